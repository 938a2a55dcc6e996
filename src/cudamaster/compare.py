"""Two runs side by side: per task and implementation, the ratio B/A of the scores P, whether
the difference is beyond both runs' noise, and the totals (geometric mean of the ratios, how
many better, worse, or within noise)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.table import Table

from .bench.score import geometric_mean
from .resultset import LIBRARY, ImplEntry, ResultSet, TaskKey

BETTER, WORSE, SAME = "better", "worse", "within noise"
NOISE_UNKNOWN = "noise unknown"
ONLY_A, ONLY_B = "only in A", "only in B"


@dataclass
class Row:
    op: str
    dtype: str
    suite: str
    impl: str  # the label in both, or "A's -> B's" where the only other kernel of each is paired
    status: str  # better | worse | within noise | noise unknown | only in A | only in B | no P ...
    a: float | None = None
    a_noise: float | None = None
    b: float | None = None
    b_noise: float | None = None
    ratio: float | None = None  # B / A
    ratio_u: float | None = None  # its uncertainty, from both noises


@dataclass
class Totals:
    compared: int  # rows with a P and its noise on both sides
    geomean: float | None  # of their ratios B/A
    better: int
    worse: int
    same: int
    only_a: int
    only_b: int
    unscored: int  # in both, without a P on one side or without a noise


@dataclass
class Comparison:
    a: str
    b: str
    rows: list[Row]
    totals: Totals
    a_device: str | None = None  # the GPU of bench JSON (a run directory does not say)
    b_device: str | None = None

    @property
    def other_gpus(self) -> bool:
        """A and B name different GPUs: their ratios compare GPUs as much as kernels."""
        return None not in (self.a_device, self.b_device) and self.a_device != self.b_device


def compare(a: ResultSet, b: ResultSet) -> Comparison:
    keys = [t.key for t in a.tasks] + [t.key for t in b.tasks if a.task(t.key) is None]
    rows = []
    for key in keys:
        ta, tb = a.task(key), b.task(key)
        for impl, ea, eb in _pairs(ta.scored if ta else [], tb.scored if tb else []):
            rows.append(_row(key, impl, ea, eb))
    return Comparison(str(a.source), str(b.source), rows, _totals(rows), a.device, b.device)


def _pairs(
    a: list[ImplEntry], b: list[ImplEntry]
) -> list[tuple[str, ImplEntry | None, ImplEntry | None]]:
    """One task's implementations matched by label; where A and B each have exactly one
    unmatched kernel other than the library (an optimizer's best and a bench's --impls kernel,
    say), those two are paired."""
    by_a, by_b = {e.label: e for e in a}, {e.label: e for e in b}
    left_a = [e for e in a if e.label not in by_b and e.label != LIBRARY]
    left_b = [e for e in b if e.label not in by_a and e.label != LIBRARY]
    cross = (left_a[0], left_b[0]) if len(left_a) == len(left_b) == 1 else None
    crossed = cross or ()
    pairs: list[tuple[str, ImplEntry | None, ImplEntry | None]] = [
        (e.label, e, by_b.get(e.label)) for e in a if e not in crossed
    ]
    if cross is not None:
        pairs.append((f"{cross[0].label} -> {cross[1].label}", *cross))
    pairs += [(e.label, None, e) for e in b if e.label not in by_a and e not in crossed]
    return pairs


def _row(key: TaskKey, impl: str, a: ImplEntry | None, b: ImplEntry | None) -> Row:
    row = Row(key.op, key.dtype, key.suite, impl, "")
    if a is not None:
        row.a, row.a_noise = a.score, a.noise
    if b is not None:
        row.b, row.b_noise = b.score, b.noise
    if a is None or b is None:
        row.status = ONLY_B if a is None else ONLY_A
        return row
    missing = [
        f"no P in {side} ({e.verdict})"
        for side, e in (("A", a), ("B", b))
        if e.score is None or e.score <= 0
    ]
    if a.score is None or b.score is None or missing:
        row.status = ", ".join(missing)
        return row
    row.ratio = b.score / a.score
    if a.noise is None or b.noise is None:
        row.status = NOISE_UNKNOWN
        return row
    row.ratio_u = row.ratio * math.hypot(a.noise / a.score, b.noise / b.score)
    beyond = abs(b.score - a.score) > math.hypot(a.noise, b.noise)
    row.status = SAME if not beyond else BETTER if b.score > a.score else WORSE
    return row


def _totals(rows: list[Row]) -> Totals:
    counted = [r for r in rows if r.status in (BETTER, WORSE, SAME)]
    ratios = [r.ratio for r in counted if r.ratio is not None]
    return Totals(
        compared=len(counted),
        geomean=geometric_mean(ratios) if ratios else None,
        better=sum(r.status == BETTER for r in rows),
        worse=sum(r.status == WORSE for r in rows),
        same=sum(r.status == SAME for r in rows),
        only_a=sum(r.status == ONLY_A for r in rows),
        only_b=sum(r.status == ONLY_B for r in rows),
        unscored=sum(r.status not in (BETTER, WORSE, SAME, ONLY_A, ONLY_B) for r in rows),
    )


def with_noise(x: float | None, u: float | None) -> str:
    """A value with its noise, "1.09 ± 0.068"; "-" for none."""
    if x is None:
        return "-"
    return f"{x:.3g}" if u is None else f"{x:.3g} ± {u:.2g}"


_STYLE = {BETTER: "green", WORSE: "red"}


def table(c: Comparison) -> Table:
    t = Table(title=f"B/A: A = {c.a}, B = {c.b} (beyond noise: |B - A| > the noises combined)")
    for col in ("operator", "dtype", "suite", "impl", "P in A", "P in B", "B/A", "status"):
        t.add_column(col, justify="right" if col.startswith(("P", "B/")) else "left")
    for r in c.rows:
        style = _STYLE.get(r.status)
        status = f"[{style}]{r.status}[/{style}]" if style else r.status
        t.add_row(
            r.op,
            r.dtype,
            r.suite,
            r.impl,
            with_noise(r.a, r.a_noise),
            with_noise(r.b, r.b_noise),
            with_noise(r.ratio, r.ratio_u),
            status,
        )
    return t


def totals_line(t: Totals) -> str:
    geo = "-" if t.geomean is None else f"{t.geomean:.3g}"
    return (
        f"{t.compared} compared: geometric mean of B/A {geo}; {t.better} better, {t.worse} "
        f"worse, {t.same} within noise; {t.only_a} only in A, {t.only_b} only in B, "
        f"{t.unscored} without a P or its noise on one side"
    )
