"""Start, resume and summarise optimization runs over many tasks.

LLM calls of different tasks run concurrently (a thread per task, up to --concurrency); GPU
work runs one evaluation at a time per GPU (--gpus, a GpuPool). The budgets are the run's,
shared by its tasks (agents/budget.py). The run's settings live in run.json (never a key).
"""

from __future__ import annotations

import json
import logging
import re
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..bench.score import Scored, success_table
from ..device import DeviceFacts
from ..errors import UserError
from ..llm.base import Options, Provider
from ..llm.registry import make_provider
from ..tasks import Task, get_task
from .budget import Budget, Cost
from .loop import Evaluate, LoopOptions, Optimizer, Profile, TaskState
from .rundir import RunDir, code_hash

log = logging.getLogger(__name__)
Backend = tuple[Evaluate, Profile, DeviceFacts]
BackendFactory = Callable[[Task, str], Backend]


def options_from(data: dict[str, Any]) -> LoopOptions:
    llm = Options(**data.get("llm", {}))
    return LoopOptions(**{**{k: v for k, v in data.items() if k != "llm"}, "llm": llm})


def _provider(m: dict[str, Any], options: LoopOptions) -> Provider:
    price = (float(m["price"][0]), float(m["price"][1])) if m.get("price") else None
    provider = make_provider(m["model"], m.get("base_url"), price=price)
    if options.max_cost_usd is not None and not provider.priced:
        raise UserError(
            f"--max-cost needs the price of {m['model']}, which the price table does not know: "
            "pass --price IN,OUT (USD per million input and output tokens)"
        )
    return provider


def start(run_dir: Path, ops: list[str], variants: list[str], model: str, base_url: str | None,
          suite: str, options: LoopOptions, concurrency: int,
          progress: Callable[[str, TaskState], None] | None = None, gpus: str | None = None,
          price: tuple[float, float] | None = None) -> dict[str, TaskState]:  # fmt: skip
    if (run_dir / "run.json").exists():
        raise UserError(f"{run_dir} already holds a run: use `cudamaster resume {run_dir}`")
    for op in ops:
        get_task(op)
    manifest = {
        "model": model, "base_url": base_url, "price": list(price) if price else None,
        "suite": suite, "concurrency": concurrency, "gpus": gpus,
        "tasks": [[op, v] for op in ops for v in variants], "options": asdict(options),
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
    }  # fmt: skip
    _provider(manifest, options)  # fail now on a missing key or price, not in a worker thread
    run = RunDir(run_dir)
    run.write_manifest(manifest)
    return execute(run, progress)


def change_budgets(run: RunDir, max_cost: float | None, max_tokens: int | None,
                   price: tuple[float, float] | None) -> None:  # fmt: skip
    """New budgets (and price) for a run about to be resumed; None keeps what it had."""
    m = run.read_manifest()
    if max_cost is not None:
        m["options"]["max_cost_usd"] = max_cost
    if max_tokens is not None:
        m["options"]["max_tokens"] = max_tokens
    if price is not None:
        m["price"] = list(price)
    _provider(m, options_from(m["options"]))
    run.write_manifest(m)


def _gpu_backends(run: RunDir, m: dict[str, Any]) -> BackendFactory:
    from ..device import targets
    from ..gpus import GpuPool
    from .gpu import GpuBackend

    gpus, devices = targets(m.get("gpus"))
    pool = GpuPool(gpus)
    first = next(iter(devices.values()))  # what the prompts say about the GPU

    def factory(task: Task, variant: str) -> Backend:
        code = run.task_dir(task.name, variant) / "code"
        backend = GpuBackend(task, variant, m["suite"], pool, devices, code)
        return backend.evaluate, backend.profile, first

    return factory


def execute(run: RunDir, progress: Callable[[str, TaskState], None] | None = None,
            backends: BackendFactory | None = None) -> dict[str, TaskState]:  # fmt: skip
    """Run (or continue) every task of the run; returns {task-variant: state}. A task that
    fails unexpectedly fails alone: its traceback goes to its error.log, the others go on."""
    m = run.read_manifest()
    options = options_from(m["options"])
    provider = _provider(m, options)
    budget = Budget(options.max_cost_usd, options.max_tokens, Cost(*run.spent()))
    try:
        factory = backends or _gpu_backends(run, m)
    except BaseException as exc:  # no GPU, Ctrl-C: the run stops before its first step
        _interrupted(run, m, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise
    _set_status(run, "running", None)

    def one(pair: list[str]) -> tuple[str, TaskState]:
        name = f"{pair[0]}-{pair[1]}"
        try:
            task = get_task(pair[0])
            evaluate, profile, device = factory(task, pair[1])
            state = Optimizer(task, pair[1], provider, run, evaluate, profile, device, options,
                              m["suite"], budget).run_task()  # fmt: skip
        except Exception as exc:
            log.exception("%s failed", name)
            tdir = run.task_dir(pair[0], pair[1])
            tdir.mkdir(parents=True, exist_ok=True)
            (tdir / "error.log").write_text(traceback.format_exc())
            saved = run.load_json(tdir, "state.json")
            state = TaskState.from_dict(saved) if saved else TaskState()
            first = str(exc).splitlines()[0] if str(exc) else ""
            state.status = "failed"
            state.detail = f"{type(exc).__name__}: {first} (see {tdir / 'error.log'})"
            run.save_json(tdir, "state.json", asdict(state))
        if progress:
            progress(name, state)
        return name, state

    try:
        with ThreadPoolExecutor(max_workers=max(1, int(m.get("concurrency", 4)))) as pool:
            states = dict(pool.map(one, m["tasks"]))
    except BaseException as exc:  # Ctrl-C: the tasks keep their states, the run says so
        _set_status(run, "interrupted", f"{type(exc).__name__} {exc}".strip())
        raise
    _set_status(run, run_status(states), None)
    return states


#: A run's status is its worst task's: the first of these that some task has.
_STATUS_ORDER = ("failed", "interrupted", "running", "waiting", "stopped", "done")


def run_status(states: dict[str, TaskState]) -> str:
    """The run's status from its tasks': failed if any failed, done if all are done."""
    have = {s.status for s in states.values()}
    return next((s for s in _STATUS_ORDER if s in have), "done")


def failed(states: dict[str, TaskState]) -> list[str]:
    """The tasks that failed or never began (the CLI exits 1 when there are any)."""
    return [name for name, s in states.items() if s.status in ("failed", "interrupted")]


def _set_status(run: RunDir, status: str, reason: str | None) -> None:
    """run.json's status (and why, for a run that stopped early)."""
    m = run.read_manifest()
    m["status"] = status
    if reason:
        m["reason"] = reason
    else:
        m.pop("reason", None)
    run.write_manifest(m)


def _interrupted(run: RunDir, m: dict[str, Any], reason: str) -> None:
    """A run stopped before its first step: run.json and every task not yet begun say so (a
    task begun keeps its state; `cudamaster resume` continues them all)."""
    _set_status(run, "interrupted", reason)
    for op, variant in m["tasks"]:
        tdir = run.task_dir(op, variant)
        saved = run.load_json(tdir, "state.json")
        state = TaskState.from_dict(saved) if saved else TaskState()
        if state.status in ("running", "interrupted"):
            state.status = "interrupted"
            when = "began" if state.baseline is None else "went on"
            state.detail = f"the run stopped before this task {when}: {reason}"
            run.save_json(tdir, "state.json", asdict(state))


@dataclass
class TaskResult:
    task: str
    status: str
    best: str
    score: float | None
    noise: float | None
    candidate_score: float | None
    candidate_noise: float | None
    geomean: float | None
    sol: float | None
    baseline_sol: float | None
    tokens: int
    cost_usd: float
    class_before: str | None
    class_after: str | None

    @property
    def scored(self) -> Scored | None:
        """The best correct LLM-written kernel's score, for the success table."""
        if self.candidate_score is None:
            return None
        return Scored(self.candidate_score, self.candidate_noise or 0.0)


_CLASS = re.compile(r"Bottleneck: ([a-z-]+)")


def _class_of(run: RunDir, tdir: Path, source: str, flags: list[str], mode: str) -> str | None:
    saved = run.load_json(tdir, f"profiles/{code_hash(source, tuple(flags))}-{mode}.json")
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
        saved = run.load_json(tdir, "state.json")
        state = TaskState.from_dict(saved) if saved else TaskState()
        rows = [r for r in ledger if r["task"] == tdir.name]
        best, base, cand = state.best, state.baseline, state.best_candidate or {}
        out.append(TaskResult(
            task=tdir.name, status=state.status, best=best.label if best else "-",
            score=best.outcome.score if best else None,
            noise=best.outcome.noise if best else None,
            candidate_score=cand.get("score"), candidate_noise=cand.get("noise"),
            geomean=best.outcome.geomean if best else None,
            sol=best.outcome.sol if best else None,
            baseline_sol=base.outcome.sol if base else None,
            tokens=sum(r["input_tokens"] + r["output_tokens"] for r in rows),
            cost_usd=sum(r.get("cost_usd") or 0.0 for r in rows),
            class_before=_class_of(run, tdir, base.source, base.flags, mode) if base else None,
            class_after=_class_of(run, tdir, best.source, best.flags, mode) if best else None,
        ))  # fmt: skip
    return out


def success(rows: list[TaskResult]) -> list[dict[str, Any]]:
    return [asdict(r) | {"rate": r.rate} for r in success_table([x.scored for x in rows])]


def dump(rows: list[TaskResult]) -> str:
    return json.dumps({"tasks": [asdict(r) for r in rows], "success": success(rows)}, indent=1)
