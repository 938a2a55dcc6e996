"""What a run came to, per task and in total: the best kernel's numbers before and after, the
search's trajectory and effort (candidates, screening and full evaluations, debug calls,
tokens, cost), and the cumulative success table."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..bench.score import Scored, success_table
from ..errors import UserError
from .outcome import Outcome
from .rundir import RunDir, code_hash


@dataclass
class TaskResult:
    task: str
    status: str
    best: str
    score: float | None
    noise: float | None
    candidate_score: float | None
    candidate_noise: float | None
    candidate_full: bool  # False: that kernel was only screened (its P is a screening number)
    geomean: float | None
    sol: float | None
    baseline_sol: float | None
    library: float | None  # P of the best against the library (same weights)
    baseline_library: float | None  # ... of the baseline
    tokens: int
    cost_usd: float
    class_before: str | None
    class_after: str | None
    rounds: int = 0
    stop_reason: str = ""
    trajectory: list[float] = field(default_factory=list)  # the best's P after each round
    candidates: int = 0  # drafts and merges tried
    merges: int = 0
    screened: int = 0  # candidates that reached screening
    full: int = 0  # ... and a full evaluation
    debug_calls: int = 0
    gpu_s: float = 0.0  # wall time of its GPU sessions (screening, full evaluations, profiles)
    detail: str = ""  # what a task not done waits for, or why it stopped or failed

    @property
    def scored(self) -> Scored | None:
        """The best correct LLM-written kernel's score, for the success table."""
        if self.candidate_score is None:
            return None
        if not self.candidate_full:  # correct, but never fully evaluated: it counts at tau 0
            return Scored(0.0, 0.0)
        return Scored(self.candidate_score, self.candidate_noise or 0.0)


@dataclass
class Totals:
    tasks: int
    candidates: int
    screened: int
    full: int
    debug_calls: int
    tokens: int
    cost_usd: float
    gpu_s: float


_CLASS = re.compile(r"Bottleneck: ([a-z-]+)")


def _class_of(run: RunDir, tdir: Path, source: str, flags: list[str], mode: str) -> str | None:
    saved = run.load_json(tdir, f"profiles/{code_hash(source, tuple(flags))}-{mode}.json")
    m = _CLASS.search((saved or {}).get("text") or "")
    return m.group(1) if m else None


def library_score(outcome: Outcome) -> float | None:
    """P against the library: sum_i w_i * (t_library / t_kernel) over the cases."""
    if not outcome.cases or any(c.vs_library is None for c in outcome.cases):
        return None
    return sum(c.weight * (c.vs_library or 0.0) for c in outcome.cases)


def results(run_dir: Path) -> list[TaskResult]:
    run = RunDir(run_dir)
    if not run.manifest.exists():
        raise UserError(f"{run_dir} is not a run directory (no run.json)")
    m = run.read_manifest()
    mode = m["options"].get("profile", "filtered")
    ledger = run.ledger()
    gpu = run.gpu_seconds()
    out = []
    for op, variant in m["tasks"]:
        tdir = run.task_dir(op, variant)
        state = run.load_state(tdir)
        rows = [r for r in ledger if r["task"] == tdir.name]
        best, base, cand = state.best, state.baseline, state.best_candidate or {}
        hist = state.history
        out.append(TaskResult(
            task=tdir.name, status=state.status, best=best.label if best else "-",
            score=best.outcome.score if best else None,
            noise=best.outcome.noise if best else None,
            candidate_score=cand.get("score"), candidate_noise=cand.get("noise"),
            candidate_full=cand.get("full", True),  # runs kept before screening: all full
            geomean=best.outcome.geomean if best else None,
            sol=best.outcome.sol if best else None,
            baseline_sol=base.outcome.sol if base else None,
            library=library_score(best.outcome) if best else None,
            baseline_library=library_score(base.outcome) if base else None,
            tokens=sum(r["input_tokens"] + r["output_tokens"] for r in rows),
            cost_usd=sum(r.get("cost_usd") or 0.0 for r in rows),
            class_before=_class_of(run, tdir, base.source, base.flags, mode) if base else None,
            class_after=_class_of(run, tdir, best.source, best.flags, mode) if best else None,
            rounds=state.round, stop_reason=state.stop_reason, trajectory=state.trajectory,
            candidates=len(hist), merges=sum(c.label.endswith("-merge") for c in hist),
            screened=sum(c.stage in ("screen", "full") for c in hist),
            full=sum(c.stage == "full" for c in hist),
            debug_calls=sum("/debug" in r["key"] for r in rows), gpu_s=gpu.get(tdir.name, 0.0),
            detail=state.detail,
        ))  # fmt: skip
    return out


def totals(rows: list[TaskResult]) -> Totals:
    return Totals(len(rows), sum(r.candidates for r in rows), sum(r.screened for r in rows),
                  sum(r.full for r in rows), sum(r.debug_calls for r in rows),
                  sum(r.tokens for r in rows), sum(r.cost_usd for r in rows),
                  sum(r.gpu_s for r in rows))  # fmt: skip


def success(rows: list[TaskResult]) -> list[dict[str, Any]]:
    return [asdict(r) | {"rate": r.rate} for r in success_table([x.scored for x in rows])]


def dump(rows: list[TaskResult]) -> str:
    return json.dumps({"tasks": [asdict(r) for r in rows], "totals": asdict(totals(rows)),
                       "success": success(rows)}, indent=1)  # fmt: skip
