"""Start, resume and summarise optimization runs over many tasks.

LLM calls of different tasks run concurrently (a thread per task, up to --concurrency); GPU
work runs one evaluation at a time per GPU (--gpus, a GpuPool). The run's settings live in
run.json (never a key).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..bench.score import success_table
from ..errors import UserError
from ..llm.base import Options
from ..llm.registry import make_provider
from ..tasks import get_task
from .loop import LoopOptions, Optimizer, TaskState
from .rundir import RunDir, code_hash


def options_from(data: dict[str, Any]) -> LoopOptions:
    llm = Options(**data.get("llm", {}))
    return LoopOptions(**{**{k: v for k, v in data.items() if k != "llm"}, "llm": llm})


def start(run_dir: Path, ops: list[str], variants: list[str], model: str, base_url: str | None,
          suite: str, options: LoopOptions, concurrency: int,
          progress: Callable[[str, TaskState], None] | None = None,
          gpus: str | None = None) -> dict[str, Any]:  # fmt: skip
    if (run_dir / "run.json").exists():
        raise UserError(f"{run_dir} already holds a run: use `cudamaster resume {run_dir}`")
    for op in ops:
        get_task(op)
    make_provider(model, base_url)  # fail now on a missing key, not in a worker thread
    run = RunDir(run_dir)
    run.write_manifest({
        "model": model, "base_url": base_url, "suite": suite, "concurrency": concurrency,
        "gpus": gpus,
        "tasks": [[op, v] for op in ops for v in variants], "options": asdict(options),
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
    })  # fmt: skip
    return execute(run, progress)


def execute(run: RunDir, progress: Callable[[str, TaskState], None] | None = None,
            backend_factory: Callable | None = None) -> dict[str, Any]:  # fmt: skip
    """Run (or continue) every task of the run; returns {task-variant: state}."""
    m = run.read_manifest()
    options = options_from(m["options"])
    provider = make_provider(m["model"], m.get("base_url"))
    if backend_factory is None:
        from ..device import targets
        from ..gpus import GpuPool
        from .gpu import GpuBackend

        gpus, devices = targets(m.get("gpus"))
        gpu_pool: GpuPool = GpuPool(gpus)
        first = asdict(next(iter(devices.values())))  # what the planner is told about

        def backend_factory(task, variant):
            code = run.task_dir(task.name, variant) / "code"
            return GpuBackend(task, variant, m["suite"], gpu_pool, devices, code), first

    def one(pair: list[str]) -> tuple[str, TaskState]:
        task = get_task(pair[0])
        backend, device = backend_factory(task, pair[1])
        opt = Optimizer(task, pair[1], provider, run, backend.evaluate, backend.profile,
                        device, options)  # fmt: skip
        state = opt.run_task()
        if progress:
            progress(f"{pair[0]}-{pair[1]}", state)
        return f"{pair[0]}-{pair[1]}", state

    with ThreadPoolExecutor(max_workers=max(1, int(m.get("concurrency", 4)))) as pool:
        return dict(pool.map(one, m["tasks"]))


@dataclass
class TaskResult:
    task: str
    status: str
    best: str
    score: float | None
    candidate_score: float | None
    geomean: float | None
    sol: float | None
    baseline_sol: float | None
    tokens: int
    cost_usd: float
    class_before: str | None
    class_after: str | None


_CLASS = re.compile(r"Bottleneck: ([a-z-]+)")


def _class_of(run: RunDir, tdir: Path, entry: dict[str, Any], mode: str) -> str | None:
    saved = run.load_json(
        tdir, f"profiles/{code_hash(entry['source'], tuple(entry['flags']))}-{mode}.json"
    )
    m = _CLASS.search((saved or {}).get("text") or "")
    return m.group(1) if m else None


def results(run_dir: Path) -> list[TaskResult]:
    run = RunDir(run_dir)
    if not run.manifest.exists():
        raise UserError(f"{run_dir} is not a run directory (no run.json)")
    m = run.read_manifest()
    mode = m["options"].get("profile", "filtered")
    ledger = run.ledger()
    out = []
    for op, variant in m["tasks"]:
        tdir = run.task_dir(op, variant)
        state = TaskState(**(run.load_json(tdir, "state.json") or {}))
        rows = [r for r in ledger if r["task"] == tdir.name]
        best = state.best.get("outcome", {}) if state.best else {}
        base = state.baseline.get("outcome", {}) if state.baseline else {}
        out.append(TaskResult(
            task=tdir.name, status=state.status, best=state.best.get("label", "-"),
            score=best.get("score"), candidate_score=state.best_candidate_score,
            geomean=best.get("geomean"), sol=best.get("sol"), baseline_sol=base.get("sol"),
            tokens=sum(r["input_tokens"] + r["output_tokens"] for r in rows),
            cost_usd=sum(r.get("cost_usd") or 0.0 for r in rows),
            class_before=_class_of(run, tdir, state.baseline, mode) if state.baseline else None,
            class_after=_class_of(run, tdir, state.best, mode) if state.best else None,
        ))  # fmt: skip
    return out


def success(rows: list[TaskResult]) -> list[dict[str, Any]]:
    return [asdict(r) | {"rate": r.rate} for r in success_table([x.candidate_score for x in rows])]


def dump(rows: list[TaskResult]) -> str:
    return json.dumps({"tasks": [asdict(r) for r in rows], "success": success(rows)}, indent=1)
