"""Inputs for `cudamaster compare` and `report`, made without a GPU: bench JSON written by the
code `cudamaster bench` writes it with (report_json, ResultsFile) from synthetic timings, and
optimizer run directories whose state.json holds what the loop would have saved."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from conftest import DEVICE_EXTRAS
from cudamaster.agents.outcome import CaseOutcome, Outcome
from cudamaster.agents.rundir import RunDir
from cudamaster.agents.state import TaskState, Version
from cudamaster.bench.evaluate import CaseResult, EvalReport, ImplResult
from cudamaster.bench.timing import TimingStats
from cudamaster.device import DeviceFacts
from cudamaster.report import ResultsFile, report_json, sol_ms
from cudamaster.tasks import get_task

DEVICE = DeviceFacts(name="test GPU", uuid="GPU-0", driver="1", nvcc="13.0",
                     compute_capability="90", sm_count=132, l2_bytes=50 << 20, memory_mib=81559,
                     copy_gbs=3000.0, fp32_tflops=50.0, bf16_tflops=800.0,
                     **DEVICE_EXTRAS)  # fmt: skip


def impl(op: str, suite: str, variant: str, label: str, speedup: float | None) -> ImplResult:
    """An implementation timed on every case of OP's suite, SPEEDUP times faster than a baseline
    at a quarter of the speed of light (20 us at least; IQR 1%, 10 samples: P's noise is a few
    percent of P); None: wrong on every case."""
    task = get_task(op)
    cases = []
    for i, case in enumerate(task.cases(suite)):
        c = CaseResult(i, dict(case.params), task.complexity(case.params), [1, 2, 3])
        c.verdict = "ok" if speedup is not None else "wrong"
        if speedup is not None:
            floor = sol_ms(task, c, variant, DEVICE) or 0.0
            t = max(4 * floor, 0.02) / speedup
            c.cold = TimingStats(t, 0.01 * t, t, t, 10)
            c.hot = TimingStats(t, 0.0, t, t, 10)
        cases.append(c)
    return ImplResult(label, f"{label}.cu", "ok" if speedup is not None else "wrong", cases=cases)


def bench_result(
    op: str, variant: str = "fp32", suite: str = "paper", **speedups: float | None
) -> dict:
    """One result of bench JSON: the baseline and, per keyword, an implementation that many
    times faster than it (library=2.0; with --impls, mine=3.0 say)."""
    impls = [impl(op, suite, variant, "baseline", 1.0)]
    impls += [impl(op, suite, variant, label, s) for label, s in speedups.items()]
    report = EvalReport(op, variant, suite, 0, "sm_90", {}, impls)
    return report_json(get_task(op), report, DEVICE)


def bench_file(path: Path, *results: dict, gpu: str = DEVICE.name) -> Path:
    """RESULTS written as `cudamaster bench --out PATH` writes them (measured on GPU)."""
    saved = ResultsFile(path)
    for r in results:
        saved.add(json.loads(json.dumps(r, default=str)))
    saved.write(device={**asdict(DEVICE), "name": gpu}, build_s=1.0, wall_s=2.0)
    return path


def _outcome(speedup: float, vs_library: float | None = None) -> Outcome:
    """vector_add's paper suite, SPEEDUP on every case (noise 1.4% of P, as optimizer_fakes);
    vs_library: t_library / t_kernel on every case."""
    sizes = [c.params["N"] for c in get_task("vector_add").cases("paper")]
    cases = [CaseOutcome(i, f"N={n}", n / sum(sizes), 12.0 * n, float(n), "ok", 0.5 / speedup,
                         0.01, 0.5, speedup, 0.014 * speedup, vs_library, 0.1 * speedup)
             for i, n in enumerate(sizes)]  # fmt: skip
    score = sum(c.weight * speedup for c in cases)
    return Outcome("ok", score=score, noise=0.014 * score, cases=cases, stage="full")


def run_dir(path: Path, tasks: dict[str, list[float]], library: float = 2.0) -> Path:
    """A finished optimizer run over TASKS ('vector_add-fp32': the best P after each round,
    round 0 the baseline's 1.0), the library LIBRARY times faster than the baseline."""
    run = RunDir(path)
    run.write_manifest({"model": "replay:x", "base_url": None, "suite": "paper",
                        "concurrency": 1, "tasks": [t.rsplit("-", 1) for t in tasks],
                        "options": {"rounds": 3, "profile": "filtered"}})  # fmt: skip
    for name, trajectory in tasks.items():
        op, variant = name.rsplit("-", 1)
        base = Version("baseline", "// baseline", ["-O3"], _outcome(1.0, 1.0 / library))
        best = Version(f"r{len(trajectory) - 1}c1", "// best", ["-O3"],
                       _outcome(trajectory[-1], trajectory[-1] / library))  # fmt: skip
        state = TaskState(status="done", round=len(trajectory) - 1, baseline=base, best=best,
                          best_candidate={"score": best.outcome.score,
                                          "noise": best.outcome.noise, "full": True},
                          trajectory=trajectory, stop_reason="rounds")  # fmt: skip
        run.save_state(run.task_dir(op, variant), state)
    return path
