"""Scores and tables for evaluation reports: per case, per implementation, JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from . import formula
from .bench.evaluate import CaseResult, EvalReport, ImplResult
from .bench.ratio import Ratio, ratio
from .bench.score import geometric_mean, speed_of_light_ms, weighted_score
from .device import DeviceFacts
from .tasks import Task


@dataclass
class CaseScore:
    index: int
    label: str
    complexity: int
    time_ms: float | None
    hot_ms: float | None
    spread: float | None
    vs_baseline: float | None
    vs_library: float | None
    sol_fraction: float | None
    verdict: str
    vs_baseline_u: float | None = None  # the speedup's uncertainty (bench/ratio.py)
    vs_library_u: float | None = None


@dataclass
class ImplScore:
    label: str
    verdict: str
    detail: str
    score: float | None  # P = sum(T*S)/sum(T) vs the baseline; None unless correct on every case
    geomean: float | None
    cases: list[CaseScore]
    noise: float | None = None  # P's uncertainty, absolute: sum(T*u)/sum(T) over the speedups'


def work(task: Task, params: dict[str, Any], variant: str) -> tuple[float, float]:
    """(compulsory bytes, FLOPs) of one case, from the task's formulas."""
    names = task.names(params, variant)
    nbytes = formula.evaluate(task.spec.metrics.bytes, names)
    return float(nbytes), float(formula.evaluate(task.spec.metrics.flops, names))


def sol_ms(task: Task, case: CaseResult, variant: str, device: DeviceFacts | None) -> float | None:
    if device is None:
        return None
    nbytes, flops = work(task, case.params, variant)
    peak = device.peak_gflops(task.spec.metrics.peak)
    return speed_of_light_ms(nbytes, flops, device.copy_gbs, peak)


def _time(case: CaseResult | None) -> float | None:
    return case.cold.median_ms if case is not None and case.ok and case.cold else None


def _speedup(reference: CaseResult | None, case: CaseResult) -> Ratio | None:
    """reference's time over the case's, when both were timed and correct (exactly 1 for the
    same measurement)."""
    if reference is None or not (reference.ok and reference.cold and case.ok and case.cold):
        return None
    return Ratio(1.0, 0.0) if reference is case else ratio(reference.cold, case.cold)


def score_impl(
    task: Task, report: EvalReport, impl: ImplResult, device: DeviceFacts | None
) -> ImplScore:
    base = report.impl("baseline")
    lib = report.impl("library")
    rows: list[CaseScore] = []
    for i, case in enumerate(impl.cases):
        t = _time(case)
        vb = _speedup(base.cases[i], case) if base else None
        vl = _speedup(lib.cases[i], case) if lib else None
        sol = sol_ms(task, case, report.variant, device)
        rows.append(
            CaseScore(
                index=case.index,
                label=" ".join(f"{k}={v}" for k, v in case.params.items()),
                complexity=case.complexity,
                time_ms=t,
                hot_ms=case.hot.median_ms if case.hot else None,
                spread=case.cold.spread if case.cold else None,
                vs_baseline=vb.value if vb else None,
                vs_library=vl.value if vl else None,
                sol_fraction=sol / t if t and sol else None,
                verdict=case.verdict,
                vs_baseline_u=vb.uncertainty if vb else None,
                vs_library_u=vl.uncertainty if vl else None,
            )
        )
    speedups = [r.vs_baseline for r in rows if r.vs_baseline is not None]
    uncertainties = [r.vs_baseline_u for r in rows if r.vs_baseline_u is not None]
    complete = impl.correct and len(speedups) == len(uncertainties) == len(rows)
    weights = [r.complexity for r in rows]
    return ImplScore(
        label=impl.label,
        verdict=impl.verdict,
        detail=impl.detail,
        score=weighted_score(weights, speedups) if complete else None,
        geomean=geometric_mean(speedups) if complete else None,
        cases=rows,
        noise=weighted_score(weights, uncertainties) if complete else None,
    )


def _fmt(x: float | None, spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def _with_u(x: float | None, u: float | None) -> str:
    """A speedup with its uncertainty (none shown where it is 0: the baseline against itself)."""
    if x is None:
        return "-"
    return f"{x:.2f}" if not u else f"{x:.2f}±{u:.2f}"


def case_table(task: Task, report: EvalReport, scores: list[ImplScore]) -> Table:
    """One row per case and implementation: time, spread, hot time, speedups, speed of light."""
    table = Table(title=f"{task.name} ({report.variant}, {report.suite} suite)", show_lines=False)
    for col in ("case", "impl", "verdict", "cold ms", "±IQR", "hot ms", "vs base", "vs lib", "SOL"):
        table.add_column(col, justify="right" if col not in ("case", "impl", "verdict") else "left")
    for i in range(len(scores[0].cases) if scores else 0):
        for s in scores:
            c = s.cases[i]
            iqr = c.spread * c.time_ms if c.spread is not None and c.time_ms else None
            table.add_row(
                c.label if s is scores[0] else "",
                s.label,
                c.verdict if c.verdict == "ok" else f"[red]{c.verdict}[/red]",
                _fmt(c.time_ms, ".4f"),
                _fmt(iqr, ".4f"),
                _fmt(c.hot_ms, ".4f"),
                _with_u(c.vs_baseline, c.vs_baseline_u),
                _with_u(c.vs_library, c.vs_library_u),
                _fmt(c.sol_fraction, ".1%"),
            )
    return table


def unseen_line(report: EvalReport) -> str:
    """One line on the unseen cases: the seed that replays them, and how each implementation
    fared (its first failure)."""
    if report.unseen_seed is None:
        return "unseen cases: none drawn (--unseen 0)"
    count = max((len(i.unseen) for i in report.impls), default=0)
    fared = []
    for impl in report.impls:
        bad = next((c for c in impl.unseen if not c.ok), None)
        if bad is not None:
            fared.append(f"{impl.label} {bad.verdict} on case {bad.index}")
        elif impl.unseen:
            fared.append(f"{impl.label} ok on {len(impl.unseen)}")
        else:
            fared.append(f"{impl.label} not run ({impl.verdict})")
    return (
        f"unseen cases: {count} drawn with --unseen-seed {report.unseen_seed} "
        f"({report.unseen_s:.1f} s): " + ", ".join(fared)
    )


def report_json(task: Task, report: EvalReport, device: DeviceFacts | None) -> dict[str, Any]:
    scores = [score_impl(task, report, i, device) for i in report.impls]
    return {
        "report": asdict(report),
        "scores": [asdict(s) for s in scores],
        "device_facts": asdict(device) if device else None,
    }


def write_json(data: Any, path: Path) -> None:
    """Write ``data`` to ``path`` as indented JSON, atomically (a reader never sees half a
    file)."""
    _write_atomically(path, json.dumps(data, indent=1, default=str))


class ResultsFile:
    """A JSON file of results rewritten, atomically, as each result comes: ``{fields...,
    "results": [...]}``. Each result is encoded once, compactly: encoding a bench's 192
    results at every rewrite took 0.06 s (the GPU waits for it), a rewrite now 8 ms."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._encoded: list[str] = []

    def add(self, result: dict[str, Any]) -> None:
        self._encoded.append(_compact(result))

    def write(self, **fields: Any) -> None:
        head = _compact(fields)[:-1] + ("," if fields else "")
        _write_atomically(self.path, f'{head}"results":[{",".join(self._encoded)}]}}')


def _compact(data: Any) -> str:
    return json.dumps(data, default=str, separators=(",", ":"))


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
