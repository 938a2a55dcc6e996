"""Unseen cases: shapes and inputs drawn, per evaluation, from an operator's valid shape space.

Every correctness check runs on them besides the suite's own cases, so that an implementation
which bakes in the suite's sizes, or leans on a property of its input generator, is caught.
They are judged and never timed or scored. Their draw is replayable: the evaluation records the
seed (``--unseen-seed``), and the case parameters follow from it and the task alone.

A range dimension ``lo..hi`` is drawn as an edge (lo, lo + 1 or hi), a prime, an odd size or
any size, log-uniformly between its bounds; a listed dimension cycles through its list from a
random start, as do the value kinds, so that a few cases cover every structure. A draw must meet
the task's ``where`` constraints and stay small: at most UNSEEN_MAX_BYTES of compulsory traffic
(the task's ``bytes`` formula, where it can be computed before the inputs are made).
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

import numpy as np

from .. import formula
from ..errors import UserError
from ..tasks import VALUE_KINDS, VALUES_PARAM, Case, Task, value_kind

UNSEEN_CASES = 6  # per evaluation, by default
UNSEEN_MAX_BYTES = 32 << 20  # compulsory traffic of one unseen case, FP32
_TRIES = 4000  # draws per case before the shape space is declared too tight
_STYLES = ("edge", "prime", "odd", "any")
_STYLE_WEIGHTS = (0.15, 0.35, 0.25, 0.25)
SUITE_PREFIX = "unseen:"


@dataclass(frozen=True)
class UnseenDraw:
    """The unseen cases of one evaluation and the seed they replay from."""

    seed: int
    cases: tuple[Case, ...]


def new_seed() -> int:
    """A fresh 63-bit seed for one evaluation's draw."""
    return secrets.randbits(63)


def draw(task: Task, count: int = UNSEEN_CASES, seed: int | None = None) -> UnseenDraw:
    """``count`` cases from the task's shape space; the same (task, count, seed), the same
    cases. Their suite names the seed (``unseen:<seed>``), so their input sets differ per draw."""
    seed = new_seed() if seed is None else seed
    rng = np.random.default_rng(seed)
    space = task.spec.unseen
    starts = {name: int(rng.integers(0, 1 << 30)) for name in space.dims}
    value_start = int(rng.integers(0, len(space.values)))
    cases = []
    for k in range(count):
        for _ in range(_TRIES):
            params: dict[str, int | float] = {}
            for name, dim in space.dims.items():
                bounds = space.range_of(name)
                if bounds is None:
                    assert isinstance(dim, list)
                    params[name] = dim[(starts[name] + k) % len(dim)]
                else:
                    params[name] = _draw_size(rng, *bounds)
            if _fits(task, params):
                break
        else:
            raise UserError(
                f"{task.name}: no unseen case in {_TRIES} draws meets unseen.where and the "
                f"{UNSEEN_MAX_BYTES >> 20} MiB cap: widen the ranges in its task.toml"
            )
        kind = space.values[(value_start + k) % len(space.values)]
        if kind != "declared":
            params[VALUES_PARAM] = VALUE_KINDS.index(kind)
        cases.append(Case(f"{SUITE_PREFIX}{seed}", k, params))
    return UnseenDraw(seed, tuple(cases))


def label(case: Case) -> str:
    """The case's parameters, with its value kind by name."""
    return " ".join(
        f"{k}={value_kind(case.params) if k == VALUES_PARAM else v}" for k, v in case.params.items()
    )


def _fits(task: Task, params: dict[str, int | float]) -> bool:
    if not all(formula.evaluate(text, params) for text in task.spec.unseen.where):
        return False
    try:
        traffic = formula.evaluate(task.spec.metrics.bytes, task.names(params, "fp32"))
    except UserError:  # names a parameter the generator derives (nnz): the where bounds it
        return True
    return traffic <= UNSEEN_MAX_BYTES


def _draw_size(rng: np.random.Generator, lo: int, hi: int) -> int:
    style = _STYLES[int(rng.choice(len(_STYLES), p=_STYLE_WEIGHTS))]
    if style == "edge" or lo == hi:
        return int(rng.choice([lo, min(lo + 1, hi), hi]))
    size = _log_uniform(rng, lo, hi)
    if style == "prime":
        return _prime_near(size, lo, hi)
    if style == "odd" and size % 2 == 0:
        return size + 1 if size + 1 <= hi else size - 1 if size - 1 >= lo else size
    return size


def _log_uniform(rng: np.random.Generator, lo: int, hi: int) -> int:
    a, b = math.log(max(lo, 1)), math.log(hi + 1)
    return min(hi, max(lo, int(math.exp(rng.uniform(a, b)))))


def _prime_near(size: int, lo: int, hi: int) -> int:
    """The largest prime <= size within [lo, hi], else the smallest above; size if none."""
    for n in range(size, lo - 1, -1):
        if _is_prime(n):
            return n
    for n in range(size + 1, hi + 1):
        if _is_prime(n):
            return n
    return size


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    return all(n % d for d in range(2, math.isqrt(n) + 1))
