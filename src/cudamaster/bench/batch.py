"""Many evaluations over this host's GPUs, their results written to one JSON file as they come:
what `cudamaster bench` runs (baseline against library per operator, dtype and suite), with or
without implementations of one's own beside them (`bench --impls`, bench/impls.py).

One evaluation at a time per GPU. Baseline and library workers live across the whole batch (a
WorkerPool), and each GPU has one preparation helper that makes the next evaluation's first
cases while this one ends; an evaluation's last case is judged while the next one runs (its
report is published once settled).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from .. import cpus
from ..device import DeviceFacts
from ..errors import UserError
from ..gpus import Gpu, GpuLost, GpuPool
from ..report import ResultsFile, report_json
from ..tasks import Task
from .build import BuildError, build
from .client import WorkerPool
from .evaluate import EvalReport, Evaluator, Impl, standard_impls
from .prepare import Preparer
from .symbols import exported_symbols

if TYPE_CHECKING:
    from .impls import ImplFile

log = logging.getLogger(__name__)


@dataclass
class Job:
    """One evaluation: a task's baseline and library baseline, and ``candidates`` beside them,
    in one session; ``file`` names the --impls file that the candidate is."""

    task: Task
    variant: str
    suite: str
    candidates: tuple[Impl, ...] = ()
    file: str | None = None

    def impls(self) -> list[Impl]:
        return [*standard_impls(self.task, self.variant), *self.candidates]


@dataclass
class Finished:
    """A job's settled report, as written to the results file (``data``), and where it ran."""

    job: Job
    report: EvalReport
    device: DeviceFacts
    data: dict[str, Any]


@dataclass
class BatchRun:
    """What a batch did: its jobs' reports in job order, the GPUs, and where the time went."""

    jobs: list[Job]
    reports: list[EvalReport]
    devices: dict[str, DeviceFacts]  # by GPU UUID ("": the default GPU, unpinned)
    results: list[dict[str, Any]]  # as written, in the order they were published
    build_s: float
    eval_s: float
    out: Path
    phases: dict[str, float] = field(default_factory=dict)  # every case's phases, summed

    def device_of(self, report: EvalReport) -> DeviceFacts:
        first = next(iter(self.devices.values()))
        return self.devices[report.gpu["uuid"]] if report.gpu else first


class BenchProgress:
    """What a batch says as it goes; this one says nothing (the CLI's draws, the API's logs)."""

    def compiling(self, count: int) -> contextlib.AbstractContextManager[None]:
        """Around the compilation of ``count`` implementations."""
        return contextlib.nullcontext()

    def evaluating(self, count: int) -> contextlib.AbstractContextManager[None]:
        """Around the ``count`` evaluations."""
        return contextlib.nullcontext()

    def describe(self, text: str) -> None:
        """What runs now."""

    def advance(self) -> None:
        """One more evaluation done."""


class LogProgress(BenchProgress):
    """Progress as log lines (INFO)."""

    def __init__(self) -> None:
        self.total = self.done = 0

    @contextlib.contextmanager
    def compiling(self, count: int) -> Iterator[None]:
        log.info("compiling %d implementations", count)
        yield

    @contextlib.contextmanager
    def evaluating(self, count: int) -> Iterator[None]:
        self.total, self.done = count, 0
        yield

    def advance(self) -> None:
        self.done += 1
        log.info("%d/%d evaluations done", self.done, self.total)


def build_all(impls: Sequence[Impl], arch: str) -> dict[Path, float]:
    """Compile the implementations at once, on every core, into the build cache (and read what
    each exports, which every evaluation checks first); returns each source's wall time (a
    cached build takes next to none). A build that fails is reported by its evaluation."""
    ordered = sorted(impls, key=lambda i: i.label != "library")  # the slow (CUB, vendor) first

    def one(impl: Impl) -> tuple[Path, float]:
        t0 = time.monotonic()
        with contextlib.suppress(BuildError):  # the evaluation reports it, with nvcc's message
            exported_symbols(build(impl.source, arch, impl.links, impl.extra_flags).library)
        return impl.source, time.monotonic() - t0

    with ThreadPoolExecutor(os.cpu_count() or 4) as pool:
        return dict(pool.map(one, ordered))


def run_batch(
    jobs: list[Job],
    targets: list[Gpu],
    devices: dict[str, DeviceFacts],
    out: Path,
    *,
    seed: int = 0,
    unseen: int | None = None,
    build_s: float = 0.0,
    started: float | None = None,
    ui: BenchProgress | None = None,
    fields: Callable[[], dict[str, Any]] | None = None,
    on_finished: Callable[[Finished], None] | None = None,
) -> BatchRun:
    """Run ``jobs`` over ``targets`` (one evaluation at a time per GPU) and write every settled
    report to ``out`` as it comes, with the device facts, the build time and the wall time
    since ``started`` (and ``fields()``, called at each write after ``on_finished``)."""
    ui = ui or BenchProgress()
    started = time.monotonic() if started is None else started
    first = next(iter(devices.values()))
    results: list[dict[str, Any]] = []
    saved = ResultsFile(out)
    t0 = time.monotonic()
    pool = WorkerPool()  # baseline and library workers live across the whole bench, per GPU
    preparers: dict[str, Preparer] = {}  # per GPU: inputs and oracles made cases ahead
    # on one GPU the jobs run in order, so the next jobs' first cases are prepared during the last
    following: dict[int, list[tuple[Task, str, str]]] = {}
    if len(targets) == 1:
        following = {
            id(j): [(n.task, n.variant, n.suite) for n in jobs[k + 1 :]] for k, j in enumerate(jobs)
        }
    facts = {u: asdict(d) for u, d in devices.items()}
    # per GPU, the evaluation before, whose last case is judged while the next one runs
    settling: dict[str, tuple[Evaluator, Job, EvalReport, DeviceFacts]] = {}
    saving = threading.Lock()
    helper_cpus: dict[str, int] = {}  # per GPU: the CPUs its preparation helper may use

    def publish(uuid: str) -> None:
        """The GPU's evaluation before, settled, into the results file."""
        ev, job, report, device = settling.pop(uuid)
        ev.settle()
        with saving:
            data = report_json(job.task, report, device)
            if job.file is not None:
                data["file"] = job.file
            results.append(data)
            saved.add(data)
            if on_finished is not None:
                on_finished(Finished(job, report, device, data))
            saved.write(
                device=asdict(first),
                devices=facts,
                helper_cpus=helper_cpus,
                build_s=build_s,
                wall_s=time.monotonic() - started,
                **(fields() if fields else {}),
            )

    def evaluate(job: Job, gpu: Gpu) -> EvalReport:
        device = devices[gpu.uuid]
        ui.describe(f"{job.task.name} {job.variant} {job.suite}")
        if gpu.uuid not in preparers:
            split = cpus.split()  # this GPU's workers' cores stay free of preparation
            preparers[gpu.uuid] = Preparer(cores=split.helpers if split else None)
            helper_cpus[gpu.uuid] = len(split.helpers) if split else len(cpus.available())
        ev = Evaluator(
            job.task,
            job.variant,
            job.suite,
            device.arch,
            base_seed=seed,
            pool=pool,
            preparer=preparers[gpu.uuid],
            then=following.get(id(job), ()),
            progress=ui.describe,
            unseen=unseen,
        )
        before = settling.get(gpu.uuid)
        try:
            report = ev.run(job.impls(), previous=before[0].settle if before else None, defer=True)
        except UserError as exc:  # this GPU's workers cannot start: the job goes elsewhere
            if gpu.pinned and "no usable CUDA GPU" in str(exc):
                raise GpuLost(str(exc)) from None
            raise
        if before is not None:
            publish(gpu.uuid)
        settling[gpu.uuid] = (ev, job, report, device)
        return report

    with ui.evaluating(len(jobs)), contextlib.closing(pool):
        try:
            finished = GpuPool(targets).run(jobs, evaluate, lambda *_: ui.advance())
            for uuid in list(settling):
                publish(uuid)
        finally:
            for uuid in list(settling):  # an error cut the bench short: keep what can be kept
                try:
                    publish(uuid)
                except Exception as exc:
                    log.error("an evaluation cut short could not be saved: %s", exc)
            for prep in preparers.values():
                prep.close()
    if not results:  # no job ran (with --impls: every file refused): the file says so too
        saved.write(
            device=asdict(first),
            devices=facts,
            build_s=build_s,
            wall_s=time.monotonic() - started,
            **(fields() if fields else {}),
        )
    phases: dict[str, float] = {}
    for r in results:
        for case in r["report"]["phases"]:
            for k, v in case.items():
                if k != "case":
                    phases[k] = phases.get(k, 0.0) + v
    return BatchRun(jobs, finished, devices, results, build_s, time.monotonic() - t0, out, phases)


def run_bench(
    tasks: list[Task],
    variants: list[str],
    suites: list[str],
    out: Path,
    *,
    gpus: str | None = None,
    seed: int = 0,
    unseen: int | None = None,
    impls: Path | None = None,
    named: bool = False,
    ui: BenchProgress | None = None,
) -> tuple[BatchRun, list[ImplFile] | None]:
    """`cudamaster bench`: every (task, variant, suite), the baseline against the library; with
    ``impls`` (a folder, bench/impls.py), only the operators and dtypes it has a file for
    (among ``tasks``, which ``named`` says the user listed), each file evaluated beside them.
    Returns the batch and, with ``impls``, every file of the folder with its status."""
    from ..device import targets as device_targets
    from . import impls as folder

    ui = ui or BenchProgress()
    files = folder.scan(impls, tasks, variants, named) if impls is not None else None
    chosen, devices = device_targets(gpus)
    arch = next(iter(devices.values())).arch
    t_build = time.monotonic()
    by_name = {t.name: t for t in tasks}
    fields: Callable[[], dict[str, Any]] | None = None
    on_finished: Callable[[Finished], None] | None = None
    if files is None:  # the baseline against the library, for every task and variant asked
        candidates: dict[str, Impl] = {}
        pairs = [(t, v) for t in tasks for v in variants]
    else:  # only the operators and dtypes with a file, each file beside them
        assert impls is not None
        rows, where = files, impls
        candidates = folder.candidates(where, rows)
        named_pairs = dict.fromkeys((f.operator, f.dtype) for f in rows if f.path in candidates)
        pairs = [(by_name[op], v) for op, v in named_pairs if op and v]

        def fields() -> dict[str, Any]:  # the folder's rows, in the results file at each write
            return folder.json_fields(where, rows)

        def on_finished(f: Finished) -> None:
            folder.record(rows, f)

    standard = [i for t, v in pairs for i in standard_impls(t, v)]
    with ui.compiling(len(standard) + len(candidates)):
        seconds = build_all([*standard, *candidates.values()], arch)
        if files is None:
            jobs = [Job(t, v, s) for t, v in pairs for s in suites]
        else:
            jobs = folder.jobs(files, candidates, by_name, suites, arch, seconds)
    batch = run_batch(
        jobs,
        chosen,
        devices,
        out,
        seed=seed,
        unseen=unseen,
        build_s=time.monotonic() - t_build,
        started=t_build,
        ui=ui,
        fields=fields,
        on_finished=on_finished,
    )
    return batch, files


class ConsoleProgress(BenchProgress):
    """Progress on a rich console (the CLI's stderr): a spinner while compiling, a bar over the
    evaluations."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._progress: Progress | None = None
        self._bar: TaskID | None = None

    @contextlib.contextmanager
    def compiling(self, count: int) -> Iterator[None]:
        with self.console.status(f"compiling {count} implementations"):
            yield

    @contextlib.contextmanager
    def evaluating(self, count: int) -> Iterator[None]:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
        ) as progress:
            self._progress, self._bar = progress, progress.add_task("bench", total=count)
            try:
                yield
            finally:
                self._progress = None

    def describe(self, text: str) -> None:
        if self._progress is not None and self._bar is not None:
            self._progress.update(self._bar, description=text)

    def advance(self) -> None:
        if self._progress is not None and self._bar is not None:
            self._progress.advance(self._bar)
