"""Start, resume and summarise optimization runs over many tasks.

LLM calls of different tasks run concurrently (a thread per task, up to --concurrency); GPU
work runs one evaluation at a time per GPU (--gpus, a GpuPool). The budgets are the run's,
shared by its tasks (agents/budget.py). The run's settings live in run.json (never a key).
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..device import DeviceFacts
from ..errors import UserError
from ..llm.base import Options, Provider
from ..llm.registry import make_provider
from ..tasks import Task, get_task
from .backend import Backend, CpuBackend, save_device
from .budget import Budget, Cost
from .loop import LoopOptions, Optimizer
from .rundir import RunDir
from .state import Status, Stop, TaskState

log = logging.getLogger(__name__)
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


def start(run_dir: Path, tasks: list[tuple[str, str]], model: str, base_url: str | None,
          suite: str, options: LoopOptions, concurrency: int,
          progress: Callable[[str, TaskState], None] | None = None, gpus: str | None = None,
          price: tuple[float, float] | None = None) -> dict[str, TaskState]:  # fmt: skip
    if (run_dir / "run.json").exists():
        raise UserError(f"{run_dir} already holds a run: use `cudamaster resume {run_dir}`")
    for op, _ in tasks:
        get_task(op)
    manifest = {
        "model": model, "base_url": base_url, "price": list(price) if price else None,
        "suite": suite, "concurrency": concurrency, "gpus": gpus,
        "tasks": [list(t) for t in tasks], "options": asdict(options),
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
    }  # fmt: skip
    _provider(manifest, options)  # fail now on a missing key or price, not in a worker thread
    run = RunDir(run_dir)
    run.write_manifest(manifest)
    return execute(run, progress)


def change_settings(run: RunDir, max_cost: float | None = None, max_tokens: int | None = None,
                    price: tuple[float, float] | None = None, gpus: str | None = None,
                    concurrency: int | None = None) -> None:  # fmt: skip
    """New budgets, price, GPUs or concurrency for a run about to be resumed; None keeps what it
    had. GPUs are checked against this host's where it has any (a run driven from a machine
    without a GPU may name those of the GPU machine it will be resumed on)."""
    from ..gpus import NO_GPU, select

    m = run.read_manifest()
    if max_cost is not None:
        m["options"]["max_cost_usd"] = max_cost
    if max_tokens is not None:
        m["options"]["max_tokens"] = max_tokens
    if price is not None:
        m["price"] = list(price)
    if gpus is not None:
        try:  # the syntax always, the indices where this host has GPUs
            select(gpus)
        except UserError as exc:
            if not str(exc).startswith(NO_GPU):
                raise
        m["gpus"] = gpus
    if concurrency is not None:
        m["concurrency"] = concurrency
    _provider(m, options_from(m["options"]))
    run.write_manifest(m)


def _backends(run: RunDir, m: dict[str, Any]) -> BackendFactory:
    """The GPU backends of this machine's GPUs; without a GPU, the CPU backend, on which tasks
    go as far as they can and stop at their first GPU step (status needs_gpu)."""
    from ..device import targets
    from ..gpus import NO_GPU, GpuPool
    from .gpu import GpuBackend

    try:
        gpus, devices = targets(m.get("gpus"))
    except UserError as exc:
        if not str(exc).startswith(NO_GPU):
            raise
        why = str(exc)
        log.info("%s: the run goes on until a step needs a GPU", why)
        return lambda task, variant: CpuBackend(run.root, run.task_dir(task.name, variant) /
                                                "code", why)  # fmt: skip
    pool = GpuPool(gpus)
    if len(gpus) > int(m.get("concurrency", 4)):
        log.warning("%d GPUs, but tasks run %s at a time: `--concurrency %d` keeps every GPU busy",
                    len(gpus), m.get("concurrency", 4), len(gpus))  # fmt: skip
    device = next(iter(devices.values()))
    if m["options"].get("profile", "filtered") != "none":
        _say_if_uncalibrated(list(devices.values()))
    previous = save_device(run.root, device)  # what later CPU-side steps build for
    if previous is not None:
        log.warning("%s was measured on %s until now, from here on on %s: each choice still "
                    "compares numbers of one session, but its best P per round spans both GPUs",
                    run.root, previous, device.name)  # fmt: skip
        m["gpus_seen"] = [*m.get("gpus_seen", [previous]), device.name]
        run.write_manifest(m)

    def factory(task: Task, variant: str) -> Backend:
        code = run.task_dir(task.name, variant) / "code"
        return GpuBackend(task, variant, m["suite"], pool, devices, code)

    return factory


def _say_if_uncalibrated(devices: list[DeviceFacts]) -> None:
    """A warning where a GPU has no bottleneck calibration: its profiles (and so the prompts)
    class kernels by the default thresholds, not by Otsu's over this GPU's baselines."""
    from ..profile import classify

    names = sorted({d.name for d in devices if not classify.load(d).calibrated})
    if names:
        log.warning("no bottleneck calibration for %s: profiles class kernels by the default "
                    "%.0f%% thresholds; `cudamaster profile --calibrate` measures this GPU's "
                    "(a few seconds per baseline)", ", ".join(names),
                    classify.DEFAULT_THRESHOLD)  # fmt: skip


def execute(run: RunDir, progress: Callable[[str, TaskState], None] | None = None,
            backends: BackendFactory | None = None) -> dict[str, TaskState]:  # fmt: skip
    """Run (or continue) every task of the run; returns {task-variant: state}. A task that
    fails unexpectedly fails alone: its traceback goes to its error.log, the others go on."""
    m = run.read_manifest()
    options = options_from(m["options"])
    provider = _provider(m, options)
    budget = Budget(options.max_cost_usd, options.max_tokens, Cost(*run.spent()))
    try:
        factory = backends or _backends(run, m)
    except BaseException as exc:  # no GPU, Ctrl-C: the run stops before its first step
        _interrupted(run, m, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise
    _set_status(run, "running", None)
    stop = threading.Event()  # set at Ctrl-C: the tasks begin no further step

    def one(pair: list[str]) -> tuple[str, TaskState]:
        name = f"{pair[0]}-{pair[1]}"
        try:
            task = get_task(pair[0])
            state = Optimizer(task, pair[1], provider, run, factory(task, pair[1]), options,
                              m["suite"], budget, stop).run_task()  # fmt: skip
        except Exception as exc:
            log.exception("%s failed", name)
            tdir = run.task_dir(pair[0], pair[1])
            tdir.mkdir(parents=True, exist_ok=True)
            (tdir / "error.log").write_text(traceback.format_exc())
            state = run.load_state(tdir)
            first = str(exc).splitlines()[0] if str(exc) else ""
            # an error while the run stops may be the stop's doing: resume tries the step again
            state.status = Status.INTERRUPTED if stop.is_set() else Status.FAILED
            state.detail = f"{type(exc).__name__}: {first} (see {tdir / 'error.log'})"
            run.save_state(tdir, state)
        if progress:
            progress(name, state)
        return name, state

    pool = ThreadPoolExecutor(max_workers=max(1, int(m.get("concurrency", 4))))
    try:
        states = dict(pool.map(one, m["tasks"]))
        while granted := hand_over(run, m["tasks"], states, options.rounds):
            log.info("rounds handed over to %s", ", ".join(granted))
            states.update(pool.map(one, [p for p in m["tasks"] if "-".join(p) in granted]))
    except BaseException as exc:  # Ctrl-C: the tasks keep their states, the run says so
        stop.set()
        _set_status(run, "interrupted", f"{type(exc).__name__} {exc}".strip())
        log.warning(
            "stopping: each running task finishes the step it is in (a minute or two "
            "at most) and keeps it; `cudamaster resume %s` goes on",
            run.root,
        )
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()
    _set_status(run, run_status(states), None)
    return states


def hand_over(run: RunDir, pairs: list[list[str]], states: dict[str, TaskState],
              rounds: int) -> list[str]:  # fmt: skip
    """Give the rounds that tasks stopped early (patience, speed-of-light target) did not use to
    tasks that used all theirs and gained in their last round, one each in turn, largest last
    gain first; returns the tasks granted a round (set running again, to be run again).

    What is free: the rounds the early stoppers left (negative for one that stopped after
    rounds it was granted), less the extra rounds granted to tasks that did not stop early."""
    early = {
        n for n, s in states.items() if s.status == Status.DONE and s.stop_reason != Stop.ROUNDS
    }
    free = sum(rounds - states[n].round for n in early) - sum(
        s.extra_rounds for n, s in states.items() if n not in early
    )
    takers = [
        name
        for name, s in states.items()
        if s.status == Status.DONE and s.stop_reason == Stop.ROUNDS and s.gained_last_round()
    ]
    takers.sort(key=lambda n: -(states[n].trajectory[-1] / max(states[n].trajectory[-2], 1e-9)))
    granted = takers[: max(0, free)]
    for name in granted:
        state = states[name]
        state.extra_rounds += 1
        state.status, state.detail, state.stop_reason = Status.RUNNING, "", Stop.NONE
        op, variant = next(p for p in pairs if "-".join(p) == name)
        run.save_state(run.task_dir(op, variant), state)
    return granted


#: A run's status is its worst task's: the first of these that some task has.
_STATUS_ORDER = (Status.FAILED, Status.INTERRUPTED, Status.RUNNING, Status.WAITING,
                 Status.NEEDS_GPU, Status.STOPPED, Status.DONE)  # fmt: skip


def run_status(states: dict[str, TaskState]) -> str:
    """The run's status from its tasks': failed if any failed, done if all are done."""
    have = {s.status for s in states.values()}
    return next((s for s in _STATUS_ORDER if s in have), Status.DONE)


def failed(states: dict[str, TaskState]) -> list[str]:
    """The tasks that failed or never began (the CLI exits 1 when there are any)."""
    return [name for name, s in states.items() if s.status in (Status.FAILED, Status.INTERRUPTED)]


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
        state = run.load_state(tdir)
        if state.status in (Status.RUNNING, Status.INTERRUPTED):
            state.status = Status.INTERRUPTED
            when = "began" if state.baseline is None else "went on"
            state.detail = f"the run stopped before this task {when}: {reason}"
            run.save_state(tdir, state)
