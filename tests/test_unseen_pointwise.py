"""Unseen shape spaces of the pointwise group (norms, softmax, activations, losses): every draw
works and stays small, and the known-wrong implementations in tests/fixtures/wrong_unseen/ are
right on the paper suite but caught by every draw. The fixtures are emulated in numpy (fp32
arithmetic in the kernels' order, NaN where a kernel never writes, as the harness's poison)
and judged by the harness's own rule (bench/verify.py) with the task's tolerance."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from cudamaster.bench import unseen
from cudamaster.bench.inputs import case_seed, make_inputs
from cudamaster.bench.verify import compare
from cudamaster.dtypes import concrete
from cudamaster.tasks import Case, Task, get_task

OPS = ["rms_norm", "layer_norm", "batch_norm", "softmax", "RELU", "elu", "gelu", "leaky_RELU",
       "selu", "sigmoid", "row_tanh", "MSE_loss", "cross_entropy_loss", "hinge_loss"]  # fmt: skip
SEEDS = range(8)
FIXTURES = Path(__file__).parent / "fixtures" / "wrong_unseen"
F32 = np.float32


def _values(task: Task, case: Case, variant: str, seed: int):
    inp = make_inputs(task, case, variant, seed)
    dtypes = {a.name: concrete(a.dtype, variant) for a in task.spec.args}
    return inp, inp.values(dtypes)


def _outputs(task: Task) -> list[str]:
    return [a.name for a in task.spec.args if a.role_for("fp32") not in ("input", "scalar")]


# --- the shape spaces ---------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS)
def test_every_draw_works_stays_small_and_covers_every_listed_value(op):
    task = get_task(op)
    space = task.spec.unseen
    listed = {k: v for k, v in space.dims.items() if isinstance(v, list)}
    seen: dict[str, set] = {k: set() for k in listed}
    kinds = set()
    for seed in SEEDS:
        cases = unseen.draw(task, 6, seed).cases
        for name, values in listed.items():
            drawn = {c.params[name] for c in cases}
            if len(values) <= 6:  # cycled: every value in every draw
                assert drawn == set(values), (op, seed, name)
            seen[name] |= drawn
        drawn_kinds = {unseen.value_kind(c.params) for c in cases}
        assert drawn_kinds == set(space.values)
        kinds |= drawn_kinds
        for case in cases:
            for name in space.dims:
                bounds = space.range_of(name)
                if bounds is not None:
                    assert bounds[0] <= case.params[name] <= bounds[1]
            if "tail" in space.dims:  # the length mod 8, cycled
                length = case.params["C" if op == "softmax" else "N"]
                assert length % 8 == case.params["tail"]
            for variant in ("fp32", "bf16"):
                inp, values = _values(task, case, variant, seed)
                assert sum(inp.nbytes.values()) < 64 << 20, (op, case.params)
                start = time.perf_counter()
                out = task.oracle(values, dict(inp.params), variant)
                assert time.perf_counter() - start < 2.0, (op, case.params)
                assert set(out) == set(_outputs(task))
                for ref in out.values():
                    ref = ref[0] if isinstance(ref, tuple) else ref
                    assert np.isfinite(np.asarray(ref, dtype=np.float64)).all(), (op, case.params)
    assert all(seen[name] == set(values) for name, values in listed.items())
    assert kinds == set(space.values)


def test_cross_entropy_structures_are_what_their_codes_say():
    task = get_task("cross_entropy_loss")
    structures = task.reference.STRUCTURES
    for seed in SEEDS:
        for case in unseen.draw(task, 6, seed).cases:
            c, structure = case.params["C"], structures[case.params["structure"]]
            if structure == "last":  # an odd C >= 3: any power-of-two tail holds class C - 1
                assert c % 2 == 1 and c >= 3
            if structure == "uniform":
                assert c <= 65536
    rng = np.random.default_rng
    paper = task.generator({"C": 4096}, rng(5), "fp32")
    dense = task.generator({"C": 4096, "structure": 0}, rng(5), "fp32")
    assert all(np.array_equal(paper[k], dense[k]) for k in ("X", "Y"))  # suites' bytes unchanged
    for code, name in enumerate(structures):
        g = task.generator({"C": 1001, "structure": code}, rng(code), "fp32")
        x, y = g["X"], g["Y"]
        assert x.dtype == y.dtype == np.float32 and x.min() >= 0 and y.min() >= 0
        assert abs(x.astype(np.float64).sum() - 1) < 1e-5
        if name == "first" or name == "last":
            hot = 0 if name == "first" else 1000
            assert y[hot] == 1 and np.count_nonzero(y) == 1
        elif name == "uniform":
            assert np.all(y == F32(1) / F32(1001))
        elif name == "zero_x":
            assert 0.4 < np.mean(x == 0) < 0.6
        elif name == "sparse_y":
            assert 0.05 < np.mean(y != 0) < 0.15
        if name != "uniform":
            assert abs(y.astype(np.float64).sum() - 1) < 1e-5


# --- the known-wrong implementations, emulated --------------------------------------------------


def _nan(n: int) -> np.ndarray:
    return np.full(n, np.nan, dtype=np.float32)


def _fma(a, b, c):
    """fmaf: the exact product plus c, one rounding (the float64 product of two floats is exact;
    the double rounding through float64 is at most an ulp of a rare tie away)."""
    return (
        np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)
    ).astype(F32)


def relu_vec4(v, p) -> dict:
    x = v["input"].astype(F32)
    out = _nan(x.size)
    n = x.size // 4 * 4
    out[:n] = np.maximum(F32(0), x[:n])
    return {"output": out}


def _xor_tree(v: np.ndarray) -> np.ndarray:
    """Warp shuffles v += shfl_xor(v, o), o = 16..1, on the last axis (32 lanes): lane 0's sum."""
    for o in (16, 8, 4, 2, 1):
        lanes = np.arange(32)
        v = (v + v[..., lanes ^ o]).astype(F32)
    return v[..., 0]


def softmax_baked(v, p) -> dict:
    x = v["input"].astype(F32)
    n, c = x.shape
    per = min(c // 256, 64)
    out = np.full((n, c), np.nan, dtype=F32)
    if per:
        cols = per * 256
        held = x[:, :cols].reshape(n, per, 256)  # held[r, k, t] = x[r, k*256 + t]
        m = held.max(axis=(1, 2), keepdims=True)
        e = np.exp((held - m).astype(F32)).astype(F32)
        partial = np.cumsum(e, axis=1, dtype=F32)[:, -1, :]  # thread t: k = 0, 1, ... in order
        warps = _xor_tree(partial.reshape(n, 8, 32))  # [n, 8]
        total = np.cumsum(warps, axis=1, dtype=F32)[:, -1]
        inv = (F32(1) / total).astype(F32)
        out[:, :cols] = (e * inv[:, None, None]).astype(F32).reshape(n, cols)
    return {"out": out}


def rms_norm_block(v, p) -> dict:
    x, w, b = (v[k].astype(F32) for k in ("input", "weight", "bias"))
    n = x.size
    threads = n // 4
    out = _nan(n)
    if 0 < threads <= 1024:
        q = x[: 4 * threads].reshape(threads, 4)
        part = (q[:, 0] * q[:, 0]).astype(F32)
        for j in (1, 2, 3):  # contracted: fmaf(x_j, x_j, partial)
            part = _fma(q[:, j], q[:, j], part)
        s = threads // 2
        while s > 0:  # the tree halves blockDim.x: partials past 2*s are dropped
            part[:s] = (part[:s] + part[s : 2 * s]).astype(F32)
            s //= 2
        rms = np.sqrt(F32(part[0] / F32(n)) + F32(v["epsilon"]), dtype=F32)
        k = 4 * threads
        out[:k] = _fma(w[:k], (x[:k] / rms).astype(F32), b[:k])
    return {"output": out}


def cross_entropy_tiles(v, p) -> dict:
    x, y = v["X"].astype(F32), v["Y"].astype(F32)
    blocks = x.size // 1024
    loss = F32(0)  # the harness zeroes the accumulated loss
    if blocks:
        k = blocks * 1024
        with np.errstate(divide="ignore"):
            logs = np.log(np.maximum(x[:k], F32(1e-8))).astype(F32)
        terms = np.where(y[:k] != 0, -(y[:k] * logs).astype(F32), F32(0)).reshape(blocks, 256, 4)
        part = np.cumsum(terms, axis=2, dtype=F32)[:, :, -1]  # s = t0; s += t1; ...
        w = 128
        while w > 0:
            part[:, :w] = (part[:, :w] + part[:, w : 2 * w]).astype(F32)
            w //= 2
        loss = np.cumsum(np.concatenate(([loss], part[:, 0])), dtype=F32)[-1]  # the atomics
    return {"loss": np.array([loss], dtype=F32)}


def batch_norm_tiles(v, p) -> dict:
    x, g, b = (v[k].astype(F32) for k in ("input", "gamma", "beta"))
    n, c = x.shape
    out = np.full((n, c), np.nan, dtype=F32)
    rows, cols = n // 16 * 16, c // 16 * 16
    if rows and cols:
        tile = x[:rows, :cols]
        total = np.cumsum(tile, axis=0, dtype=F32)[-1]
        sumsq = np.zeros(cols, dtype=F32)
        for r in range(rows):
            sumsq = _fma(tile[r], tile[r], sumsq)
        mean = (total / F32(n)).astype(F32)
        var = _fma(-mean, mean, (sumsq / F32(n)).astype(F32))  # sumsq/N - mean*mean, contracted
        sd = np.sqrt((var + F32(v["epsilon"])).astype(F32), dtype=F32)
        xhat = ((tile - mean).astype(F32) / sd).astype(F32)
        out[:rows, :cols] = _fma(g[:cols], xhat, b[:cols])
    return {"output": out}


# fixture file, emulation, the paper cases it is checked on, and what makes an unseen case catch it
Emulation = Callable[[dict, dict], dict]
WRONG: dict[str, tuple[str, Emulation, Callable[[dict], bool], Callable[[dict], bool]]] = {
    "RELU": ("RELU__vec4_no_tail", relu_vec4, lambda p: True, lambda p: p["N"] % 4 != 0),
    "softmax": (
        "softmax__baked_row_len",
        softmax_baked,
        lambda p: p["N"] == 16,  # every C of the paper; its rows are independent
        lambda p: p["C"] % 256 != 0 or p["C"] > 16384,
    ),
    "rms_norm": (
        "rms_norm__pow2_block_no_tail",
        rms_norm_block,
        lambda p: True,
        lambda p: p["N"] % 4 != 0 or p["N"] > 4096,
    ),
    "cross_entropy_loss": (
        "cross_entropy_loss__fixed_grid_no_tail",
        cross_entropy_tiles,
        lambda p: True,
        lambda p: p["structure"] == 2,  # all of Y on class C - 1, C odd: past the last tile
    ),
    "batch_norm": (
        "batch_norm__tiles_16_no_tail",
        batch_norm_tiles,
        lambda p: True,
        lambda p: p["N"] % 16 != 0 or p["C"] % 16 != 0,
    ),
}


def _verdict(task: Task, case: Case, seed: int, emulate: Emulation) -> bool:
    inp, values = _values(task, case, "fp32", seed)
    got = emulate(values, dict(inp.params))
    out = task.oracle(values, dict(inp.params), "fp32")
    tol = task.spec.tolerance["fp32"]
    results = []
    for name, ref in out.items():
        ref, mag = ref if isinstance(ref, tuple) else (ref, None)
        g = np.asarray(got[name], dtype=np.float64)
        results.append(compare(name, g, ref, mag, tol, None, "f32").passed)
    return all(results)


@pytest.mark.parametrize("op", sorted(WRONG))
def test_each_fixture_says_what_it_assumes_and_exports_the_fp32_entry_point(op):
    name = WRONG[op][0]
    text = (FIXTURES / f"{name}.cu").read_text()
    first = text.splitlines()[0]
    assert first.startswith("// Known wrong (unseen shapes): ")
    assert f'extern "C" void {get_task(op).symbol("fp32")}(' in text


@pytest.mark.parametrize("op", sorted(WRONG))
def test_a_fixture_is_right_on_the_paper_suite(op):
    task = get_task(op)
    _, emulate, picked, _ = WRONG[op]
    cases = [c for c in task.cases("paper") if picked(c.params)]
    assert cases
    for case in cases:
        for base_seed in (0, 1):
            seed = case_seed(task.name, "fp32", case, 0, base_seed)
            assert _verdict(task, case, seed, emulate), (op, case.params, base_seed)


@pytest.mark.parametrize("op", sorted(WRONG))
def test_a_fixture_is_caught_by_every_draw_of_unseen_cases(op):
    task = get_task(op)
    _, emulate, _, catches = WRONG[op]
    for seed in SEEDS:
        cases = unseen.draw(task, 6, seed).cases
        catching = [c for c in cases if catches(c.params)]
        assert catching, (op, seed)  # by construction: the cycled dims guarantee one
        checked = catching if seed < 3 else catching[:1]
        for case in checked:
            assert not _verdict(task, case, seed, emulate), (op, seed, case.params)
