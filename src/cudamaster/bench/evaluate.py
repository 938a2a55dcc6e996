"""Evaluate implementations of one operator on one (variant, suite): verify, then time.

Every implementation runs in its own worker process. Per case: seeded input sets are made and
the float64 oracle computed once; each implementation's first call is checked; they are timed
together, turn by turn, until every one's median is known, so that clock drift cancels in their
ratios; the output of the final timed turn's last call, on the input set that the first call did
not use, is checked too (an implementation that caches, or leaves work running past the call,
differs there); finally a fresh input set is checked again. Only an implementation whose every
check passed gets times in the report.

Before the suite's cases, every implementation is checked (never timed) on a few unseen cases
drawn for this evaluation from the operator's shape space (bench/unseen.py): other sizes in every
dimension, other input structures and value kinds. One that fails there is not timed at all.

The inputs and oracles come from cudamaster.bench.prepare, cases ahead, which also judges the
outputs, while the GPU goes on: the first outputs while they are timed, the timed and re-checked
outputs while the next case loads and makes its first calls (a wrong first output costs only
its timing). No preparation shares a core with a timed call (cudamaster.cpus), and none runs at
all while short calls are timed. Cold calls rotate over several placements of the buffers
(bench.worker).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from .. import cpus
from ..dtypes import concrete
from ..errors import UserError
from ..gpus import pinned
from ..tasks import Case, Task
from .build import BuildError, BuildResult, build
from .client import WorkerClient, WorkerDied, WorkerPool
from .comparer import comparer_library
from .prepare import MAX_AHEAD, N_SETS, CaseKey, Judgement, OutputFile, Prepared, Preparer
from .protocol import (
    ArgSpec,
    Init,
    InitReply,
    Load,
    OutputSlot,
    Release,
    Run,
    Save,
    SaveReply,
    Scalar,
    Setup,
    SetupReply,
    Time,
)
from .symbols import SymbolReport, check_library, defines_symbol
from .timing import TimingPolicy, TimingStats, exhausted, settled, summarize
from .unseen import UNSEEN_CASES, UnseenDraw, draw, label
from .verify import CheckResult

log = logging.getLogger(__name__)

CHECK_SET, TIMING_SETS, RECHECK_SET = 0, (0, 1), 2
# a timed call (with the harness's work around it) shorter than this is timed with every
# preparation stopped, even where the helper has cores of its own (see Preparer.quiet)
SHORT_CALL_S = 2e-3
assert RECHECK_SET < N_SETS
T = TypeVar("T")


@dataclass
class Impl:
    """An implementation to evaluate: a .cu file and how far it is trusted."""

    label: str
    source: Path
    trusted: bool = False  # baselines and library baselines may link vendor libraries
    links: tuple[str, ...] = ()
    extra_flags: tuple[str, ...] = ()
    # the extern "C" function called (None: the task's symbol for the variant, such as
    # vector_add or vector_add_bf16); MSKernelBench's optimized kernels name theirs
    # <symbol>_optimized
    entry: str | None = None

    def entry_for(self, symbol: str) -> str:
        """The function called, where the task's own is ``symbol``."""
        return self.entry or symbol


@dataclass
class CaseResult:
    index: int
    params: dict[str, Any]
    complexity: int
    seeds: list[int]
    verdict: str = "pending"  # ok | wrong | crash | timeout | runtime_error | ...
    detail: str = ""
    paper_rule_passed: bool | None = None
    checks: list[CheckResult] = field(default_factory=list)
    cold: TimingStats | None = None
    hot: TimingStats | None = None
    wall_ms_first_call: float | None = None
    placements: int | None = None  # buffer placements the cold calls rotated over

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"


@dataclass
class ImplResult:
    label: str
    source: str
    verdict: str = "pending"  # ok | wrong | compile_error | forbidden | missing_symbol | ...
    detail: str = ""
    entry: str = ""  # the extern "C" function called (set by prepare)
    build: BuildResult | None = None
    symbols: SymbolReport | None = None
    cases: list[CaseResult] = field(default_factory=list)
    unseen: list[CaseResult] = field(default_factory=list)  # judged, never timed

    @property
    def correct(self) -> bool:
        return self.verdict == "ok"


@dataclass
class EvalReport:
    task: str
    variant: str
    suite: str
    base_seed: int
    arch: str
    device: dict[str, Any]
    impls: list[ImplResult]
    wall_s: float = 0.0
    gpu: dict[str, Any] | None = None  # the GPU this ran on, when pinned (cudamaster.gpus)
    unseen_seed: int | None = None  # replays the unseen cases' draw (--unseen-seed)
    unseen_s: float = 0.0  # wall time of the unseen cases' checks
    # per case, where the coordinator's wall time went (seconds): waiting for the inputs, input
    # sets loaded by the workers, first calls made, the previous case settled (its verdicts
    # waited for), timed turns, then the first calls' verdicts, the re-check and hot timing,
    # and for the last case its own settling; "checks" is the time spent waiting for this
    # case's judged outputs (and so for the oracles), wherever it fell. The helper's own wall
    # times (it works cases ahead, beside the GPU): "making" the input sets, "oracles" the
    # longest of their oracles, "judging" the outputs (all of them, oracle waits excluded);
    # "helper_cpu" the CPU seconds that the helper used (on any case) from this case's start to
    # its "finish", against the wall time and the helper's CPUs (bench JSON "helper_cpus")
    phases: list[dict[str, float]] = field(default_factory=list)

    def impl(self, label: str) -> ImplResult | None:
        return next((i for i in self.impls if i.label == label), None)


@dataclass
class _Live:
    impl: Impl
    result: ImplResult
    worker: WorkerClient | None = None
    info: InitReply | None = None  # what the worker's init reported
    layout: dict[str, tuple[int, int]] = field(default_factory=dict)  # the case's, in a slot
    stop: bool = False  # no further cases (after a hang)


def prepare(impl: Impl, arch: str, symbol: str, result: ImplResult) -> None:
    """Build and inspect one implementation before anything runs; sets the verdict on refusal.
    ``symbol`` is the task's entry for the variant; ``impl.entry``, where set, replaces it."""
    entry = result.entry = impl.entry_for(symbol)
    try:
        result.build = build(impl.source, arch, impl.links, impl.extra_flags)
    except BuildError as exc:
        result.verdict, result.detail = "compile_error", f"{exc} (log: {exc.log_path})"
        return
    if not defines_symbol(result.build.library, entry):
        result.verdict = "missing_symbol"
        result.detail = f'{impl.source.name} does not define extern "C" {entry}'
        if entry != symbol:
            result.detail += f" (the entry named instead of the operator's {symbol})"
        elif defines_symbol(result.build.library, optimized := optimized_entry(symbol)):
            result.detail += (f"; it defines {optimized} (MSKernelBench's name for an optimized "
                              f"kernel): name that entry (eval --entry {optimized})")  # fmt: skip
        return
    if not impl.trusted:
        result.symbols = check_library(result.build.library)
        if not result.symbols.ok:
            result.verdict = "forbidden"
            result.detail = "refused before running: " + "; ".join(result.symbols.forbidden)


class Evaluator:
    """Runs the protocol for one task/variant/suite over a list of implementations."""

    def __init__(
        self,
        task: Task,
        variant: str,
        suite: str,
        arch: str,
        policy: TimingPolicy | None = None,
        base_seed: int = 0,
        call_timeout_s: float = 60.0,
        cases: list[int] | None = None,
        progress: Callable[[str], None] | None = None,
        work_dir: Path | None = None,
        pool: WorkerPool | None = None,
        preparer: Preparer | None = None,
        then: Sequence[tuple[Task, str, str]] = (),
        cores: cpus.Split | Literal["auto"] | None = "auto",
        unseen: int | None = None,
        unseen_seed: int | None = None,
    ) -> None:
        """``preparer`` makes the inputs (one of its own when None); ``then`` are the (task,
        variant, suite) jobs that the same preparer serves next, in order, whose first cases
        it prepares during this evaluation's last cases; ``cores`` are the workers' cores and
        the preparer's (cudamaster.cpus; "auto": this host's split for the pinned GPU, None: no
        split); ``unseen`` cases (None: UNSEEN_CASES) are drawn from the task's shape space with
        ``unseen_seed`` (a fresh one when None), and checked before the suite's."""
        self.task, self.variant, self.suite, self.arch = task, variant, suite, arch
        self.policy = policy or TimingPolicy()
        self.base_seed = base_seed
        self.call_timeout_s = call_timeout_s
        self.case_filter = cases
        self.progress = progress or (lambda _msg: None)
        self.work_dir = work_dir
        self.pool = pool
        self.preparer = preparer
        self.then = then
        self.cores = cpus.split() if cores == "auto" else cores
        unseen = UNSEEN_CASES if unseen is None else unseen
        self.unseen = draw(task, unseen, unseen_seed) if unseen else UnseenDraw(0, ())
        self.device: dict[str, Any] = {}
        self.phases: list[dict[str, float]] = []
        self._report: EvalReport | None = None  # the last run's
        self._pending: _Settle | None = None  # its last case, not yet settled
        self.dtypes = {a.name: concrete(a.dtype, variant) for a in task.spec.args}
        self.arg_specs = tuple(
            ArgSpec(a.name, a.role_for(variant), self.dtypes[a.name]) for a in task.spec.args
        )

    # -- workers ----------------------------------------------------------------------------
    def _spawn(self, live: _Live) -> None:
        assert live.result.build is not None
        pooled = self.pool.take(live.impl.label) if self.pool and live.impl.trusted else None
        if pooled is not None:
            worker, info = pooled
        else:
            log.info("starting a worker for %s", live.impl.label)
            worker = WorkerClient(live.impl.label, self.cores.timing if self.cores else None)
            try:
                info = worker.request(60, Init(device=0, comparer=comparer_library(self.arch)))
            except WorkerDied as exc:
                worker.close()
                if "no CUDA GPU" in exc.detail or "cudaGetDeviceCount" in exc.detail:
                    raise UserError(f"no usable CUDA GPU: {exc.detail}") from None
                raise
        live.info = info
        self.device = self.device or asdict(info)
        library = str(live.result.build.library)
        entry = live.impl.entry_for(self.task.symbol(self.variant))
        reply = worker.request(60, Load(library, entry, self.arg_specs, live.impl.trusted))
        if not reply.ok:
            worker.close()
            raise WorkerDied(reply.verdict or "load_error", reply.error)
        if reply.loaded and not live.impl.trusted:
            worker.close()
            raise WorkerDied("forbidden", f"loading it brought in {', '.join(reply.loaded)}")
        live.worker = worker

    def _fail(self, live: _Live, case: CaseResult, verdict: str, detail: str) -> None:
        case.verdict, case.detail = verdict, detail
        if live.worker is not None:
            live.worker.kill()
            live.worker.close()
            live.worker = None
        if verdict in ("timeout", "missing_symbol", "load_error", "forbidden"):
            live.stop = True

    # -- checking ---------------------------------------------------------------------------
    @staticmethod
    def _verdict(asked: Judgement, times: dict[str, float]) -> list[CheckResult]:
        """Wait for a judgement asked of the preparer; the wait is counted as the checks of the
        case whose phase ``times`` are given."""
        t0 = time.monotonic()
        try:
            return asked.result()
        finally:
            times["checks"] = round(times.get("checks", 0.0) + time.monotonic() - t0, 4)

    # -- one case ---------------------------------------------------------------------------
    def _run_case(
        self,
        case: Case,
        lives: list[_Live],
        prep: Preparer,
        after: list[tuple[Task, str, Case]],
        previous: _Once,
    ) -> _Settle | None:
        """One case, up to its last GPU work; ``after`` are the cases that the preparer is asked
        to make ahead. ``previous`` (the settling of the case before) is run once this case's
        first calls are made; returns this case's settling, for the next case (or the caller)."""
        t_case, cpu_case = time.monotonic(), prep.cpu_seconds()
        active = [lv for lv in lives if not lv.stop and lv.result.verdict == "pending"]
        prepared: Prepared | None = None
        if active:
            prepared = prep.take(self.task, self.variant, case, self.base_seed)
        prep.ahead(after, self.base_seed)
        sets = prepared.sets if prepared else []
        key = CaseKey(str(self.task.folder), self.variant, case, self.base_seed)
        seeds = key.seeds(self.task.name)
        params = dict(sets[0].params) if sets else dict(case.params)  # with derived ones (nnz)
        # a case no implementation runs (each failed before it) has no inputs, so no derived
        # parameters to weigh it by, and weighs nothing: it is skipped for all
        complexity = self.task.complexity(params, self.variant) if prepared else 0
        results = {}
        for live in lives:
            results[live.impl.label] = CaseResult(case.index, params, complexity, seeds)
            live.result.cases.append(results[live.impl.label])
        for lv in lives:
            if lv not in active:
                results[lv.impl.label].verdict = "skipped"
                results[lv.impl.label].detail = (
                    lv.result.detail or "stopped after an earlier failure"
                )
        if prepared is None:
            previous()
            return None
        case_dir = prepared.case_dir
        mark = _Phases(case.index, t_case)
        self.phases.append(mark.times)
        mark("inputs")
        arg_bytes = tuple(replace(a, nbytes=sets[0].nbytes.get(a.name, 0)) for a in self.arg_specs)
        scalars = tuple(tuple(inp.call_scalars) for inp in sets)

        # 1. the input sets loaded by every worker at once (no implementation code runs), then
        # a checked first call, one implementation at a time, its output judged by the preparer
        # from then on; meanwhile the last case's judgements are waited for
        loaded = self._setup_all(active, results, prep.root, case_dir, arg_bytes, scalars)
        mark("setup")
        first = [
            (lv, prepared.ask(CHECK_SET, outputs))
            for lv, outputs in self._first_calls(loaded, results)
        ]
        mark("first_calls")
        previous()
        mark("previous")

        # 2. timing, interleaved turn by turn, with no preparation on the workers' cores, while
        # the first calls are judged (an implementation whose first output turns out wrong was
        # timed for nothing); the final turn's last output is saved, to be judged
        timed = [lv for lv, _ in first]
        times, turn = self._time_turns(timed, results, prep)
        saved = []
        for lv, last in self._save_all(timed, results):
            saved.append((lv, prepared.ask(TIMING_SETS[-1], _slot(lv, last.outputs), full=False)))
        log.info("timed in %d turns: %s", turn, {k: len(v) for k, v in times.items()})
        mark("timing")

        # 3. the first calls' verdicts; the timing of those whose first output was right
        passed = []
        for lv, judgement in first:
            res = results[lv.impl.label]
            res.checks = self._verdict(judgement, mark.times)
            res.paper_rule_passed = all(c.paper_rule_passed for c in res.checks)
            bad = [c for c in res.checks if not c.passed]
            if bad:  # the first failure seen, even where a later call failed too
                res.verdict, res.detail = "wrong", "; ".join(c.summary() for c in bad)
            elif res.verdict == "pending":
                res.cold = summarize(times[lv.impl.label])
                passed.append(lv)
        verdicts = {lv.impl.label: results[lv.impl.label].verdict for lv in active}
        log.info("first calls checked: %s", verdicts)

        # 4. a re-check on a fresh input set (into the first call's slot, judged by now), then
        # hot L2 timing (back-to-back calls, no flush) while the re-checks are judged
        rechecked = []
        for lv in passed:
            if (ask := self._recheck(lv, results[lv.impl.label], prepared)) is not None:
                rechecked.append((lv, ask))
        hot = self._time_hot([lv for lv, _ in rechecked], results, prep)
        self._release_all(active, results)
        mark("finish")
        mark.times["helper_cpu"] = round(prep.cpu_seconds() - cpu_case, 4)
        passed_timed = [(lv, j) for lv, j in saved if lv in passed]
        return _Settle(prepared, results, passed_timed, rechecked, hot, mark.times)

    def _check_unseen(
        self, case: Case, lives: list[_Live], prep: Preparer, after: list[tuple[Task, str, Case]]
    ) -> None:
        """One unseen case: a checked call, then one on a fresh input set, each judged before
        going on (the cases are small); an implementation that fails gets its verdict now, with
        the seed that replays the draw, and no further case."""
        active = [lv for lv in lives if not lv.stop and lv.result.verdict == "pending"]
        if not active:
            return
        prepared = prep.take(self.task, self.variant, case, self.base_seed)
        prep.ahead(after, self.base_seed)
        sets = prepared.sets
        params = dict(sets[0].params)
        results = {  # unseen cases are judged, never weighed: no complexity (it may be 0)
            lv.impl.label: CaseResult(case.index, params, 0, prepared.seeds) for lv in active
        }
        for lv in active:
            lv.result.unseen.append(results[lv.impl.label])
        arg_bytes = tuple(replace(a, nbytes=sets[0].nbytes.get(a.name, 0)) for a in self.arg_specs)
        scalars = tuple(tuple(inp.call_scalars) for inp in sets)
        times: dict[str, float] = {}
        try:
            loaded = self._setup_all(
                active, results, prep.root, prepared.case_dir, arg_bytes, scalars
            )
            for lv, outputs in self._first_calls(loaded, results):
                res = results[lv.impl.label]
                res.checks = self._verdict(prepared.ask(CHECK_SET, outputs), times)
                if bad := [c for c in res.checks if not c.passed]:
                    res.verdict, res.detail = "wrong", "; ".join(c.summary() for c in bad)
                    continue
                if (ask := self._recheck(lv, res, prepared)) is None:
                    continue
                if bad := self._verdict(ask, times):
                    res.verdict = "wrong_on_fresh_inputs"
                    res.detail = "; ".join(c.summary() for c in bad)
                else:
                    res.verdict = "ok"
            self._release_all(active, results)
        finally:
            prepared.discard()
        for lv in active:
            res = results[lv.impl.label]
            if res.verdict != "ok":
                verdict = "wrong_on_unseen" if res.verdict.startswith("wrong") else res.verdict
                lv.result.verdict = verdict
                lv.result.detail = (
                    f"unseen case {case.index} ({label(case)}; replay with --unseen-seed "
                    f"{self.unseen.seed}): {res.detail}"
                )

    def _release_all(self, lives: list[_Live], results: dict[str, CaseResult]) -> None:
        """The case's buffers freed in every live worker (a worker that dies fails its case)."""
        for lv in lives:
            if lv.worker is not None:
                try:
                    lv.worker.request(60, Release())
                except WorkerDied as exc:
                    self._fail(lv, results[lv.impl.label], exc.verdict, exc.detail)

    def _recheck(self, lv: _Live, res: CaseResult, prepared: Prepared) -> Judgement | None:
        """A call on a fresh input set (into the first call's slot, judged by now), its outputs
        asked of the preparer; None where it failed already (the verdict is set)."""
        try:
            assert lv.worker is not None
            reply = lv.worker.request(self.call_timeout_s, Run(RECHECK_SET))
        except WorkerDied as exc:
            self._fail(lv, res, exc.verdict, exc.detail)
            return None
        if reply.changed_inputs:
            res.verdict = "inputs_mutated"
            res.detail = "a later call changed input(s) " + ", ".join(reply.changed_inputs)
            return None
        return prepared.ask(RECHECK_SET, _slot(lv, reply.outputs), full=False)

    def _first_calls(
        self, loaded: list[_Live], results: dict[str, CaseResult]
    ) -> list[tuple[_Live, OutputFile]]:
        """The checked first call of each loaded implementation, one at a time; returns those
        whose outputs are to be judged, with where they are (the others have their verdict)."""
        ran = []
        for lv in loaded:
            res = results[lv.impl.label]
            try:
                assert lv.worker is not None
                reply = lv.worker.request(self.call_timeout_s, Run(CHECK_SET))
            except WorkerDied as exc:
                self._fail(lv, res, exc.verdict, exc.detail)
                continue
            res.wall_ms_first_call = reply.wall_ms
            if reply.vendor_libraries and not lv.impl.trusted:
                self._fail(lv, res, "forbidden", "loaded " + ", ".join(reply.vendor_libraries))
            elif reply.changed_inputs:
                res.verdict = "inputs_mutated"
                res.detail = "the call changed input(s) " + ", ".join(reply.changed_inputs)
            elif reply.unordered_outputs:
                res.verdict = "unsynchronized"
                res.detail = (
                    "output(s) " + ", ".join(reply.unordered_outputs) + " were still being "
                    "written after the call returned (work not ordered with the default stream)"
                )
            else:
                ran.append((lv, _slot(lv, reply.outputs)))
        return ran

    def _time_hot(
        self, timed: list[_Live], results: dict[str, CaseResult], prep: Preparer
    ) -> dict[str, TimingStats]:
        """Back-to-back calls without a flush (hot L2): a third of a second of them, at least
        3; returns their summaries by label."""
        hot = {}
        for lv in list(timed):
            res = results[lv.impl.label]
            assert res.cold is not None
            n_hot = max(3, min(self.policy.hot_samples, int(300 / max(res.cold.median_ms, 1e-3))))
            try:
                assert lv.worker is not None
                with prep.quiet(strict=res.cold.median_ms < SHORT_CALL_S * 1e3):
                    reply = lv.worker.request(
                        self._batch_timeout(lv, n_hot + 1), Time(n_hot + 1, "hot", TIMING_SETS)
                    )
            except WorkerDied as exc:
                self._fail(lv, res, exc.verdict, exc.detail)
                continue
            hot[lv.impl.label] = summarize(reply.times_ms[1:])
        return hot

    def _time_turns(
        self, timed: list[_Live], results: dict[str, CaseResult], prep: Preparer
    ) -> tuple[dict[str, list[float]], int]:
        """Warm up, then timed turns over ``timed`` (those that fail leave it) until every
        median is known, with no preparation beside them (none at all during the turns of an
        implementation whose calls are short); returns each one's cold times and the number of
        turns."""
        times: dict[str, list[float]] = {lv.impl.label: [] for lv in timed}
        batch: dict[str, int] = {}
        per_call: dict[str, float] = {}  # seconds, from the warm-up
        with prep.quiet():
            for lv in list(timed):
                self._warm_up(lv, results[lv.impl.label], timed, batch, per_call)
            turn = self._turns(timed, results, times, batch, per_call, prep)
        return times, turn

    def _warm_up(
        self,
        lv: _Live,
        res: CaseResult,
        timed: list[_Live],
        batch: dict[str, int],
        per_call: dict[str, float],
    ) -> None:
        """Untimed cold calls; they set the implementation's batch (and its time per call)."""
        pol = self.policy
        try:
            assert lv.worker is not None
            first_s = (res.wall_ms_first_call or 0.0) / 1e3
            warmup = pol.warmup_for(first_s)
            t0 = time.monotonic()
            lv.worker.request(self._batch_timeout(lv, warmup), Time(warmup, "cold", TIMING_SETS))
            per_call[lv.impl.label] = (time.monotonic() - t0) / warmup
            batch[lv.impl.label] = pol.batch_for(per_call[lv.impl.label])
        except WorkerDied as exc:
            self._fail(lv, res, exc.verdict, exc.detail)
            timed.remove(lv)

    def _turns(
        self,
        timed: list[_Live],
        results: dict[str, CaseResult],
        times: dict[str, list[float]],
        batch: dict[str, int],
        per_call: dict[str, float],
        prep: Preparer,
    ) -> int:
        """The timed turns of _time_turns; returns their number. The helper is stopped for the
        turns of short calls only: beside a long call it goes on (a 100 ms baseline timed
        against a 20 us library would otherwise stop it for seconds)."""
        spent: dict[str, float] = {lv.impl.label: 0.0 for lv in timed}
        turn = 0
        pol = self.policy
        while timed:
            if all(settled(times[lv.impl.label], spent[lv.impl.label], pol) for lv in timed):
                break
            # Everyone keeps taking turns until every median is known, so that all medians come
            # from the same stretch of time (clocks drift; a ratio of medians taken minutes
            # apart would carry the drift). Only an implementation at its own caps sits out.
            pending = [
                lv for lv in timed if not exhausted(times[lv.impl.label], spent[lv.impl.label], pol)
            ]
            order = pending[turn % len(pending) :] + pending[: turn % len(pending)]
            for lv in order:
                label = lv.impl.label
                t0 = time.monotonic()
                try:
                    assert lv.worker is not None
                    # an even number of calls from the first set: every turn ends on the set
                    # that the checked first call did not use
                    with prep.quiet(strict=per_call[label] < SHORT_CALL_S):
                        n = batch[label] + 1
                        reply = lv.worker.request(
                            self._batch_timeout(lv, n), Time(n, "cold", TIMING_SETS)
                        )
                except WorkerDied as exc:
                    self._fail(lv, results[label], exc.verdict, exc.detail)
                    timed.remove(lv)
                    continue
                spent[label] += time.monotonic() - t0
                times[label] += reply.times_ms[1:]  # the first call after a switch is dropped
                results[label].placements = reply.placements
            turn += 1
        return turn

    def _setup_all(
        self,
        active: list[_Live],
        results: dict[str, CaseResult],
        scratch: Path,
        case_dir: Path,
        arg_bytes: tuple[ArgSpec, ...],
        scalars: tuple[tuple[Scalar, ...], ...],
    ) -> list[_Live]:
        """Start the workers that need it, then load the case's input sets into all of them
        concurrently (their output slots in ``scratch``); returns those that are ready for
        their first call."""
        started = []
        for lv in active:
            try:
                if lv.worker is None:
                    self._spawn(lv)
                started.append(lv)
            except WorkerDied as exc:
                self._fail(lv, results[lv.impl.label], exc.verdict, exc.detail)

        def setup(lv: _Live) -> SetupReply:
            assert lv.worker is not None
            # each worker writes its own folder, and no other's (bench/sandbox.py)
            slots = str(scratch / "slots" / f"out-{lv.impl.label}-{lv.worker.proc.pid}")
            reply = lv.worker.request(120, Setup(str(case_dir), N_SETS, arg_bytes, scalars, slots))
            lv.layout = reply.layout
            return reply

        return [lv for lv, _ in self._at_once(started, results, setup)]

    def _save_all(
        self, timed: list[_Live], results: dict[str, CaseResult]
    ) -> list[tuple[_Live, SaveReply]]:
        """Every timed implementation's last output saved into its timed slot, all workers at
        once (a slot that grows is page-locked anew, 0.5 s per GiB); returns the replies of
        those that did not fail, in order."""

        def save(lv: _Live) -> SaveReply:
            assert lv.worker is not None
            return lv.worker.request(self.call_timeout_s, Save())

        return self._at_once(timed, results, save)

    def _at_once(
        self,
        lives: list[_Live],
        results: dict[str, CaseResult],
        request: Callable[[_Live], T],
    ) -> list[tuple[_Live, T]]:
        """``request`` made of every worker in ``lives`` at once; a worker that dies fails its
        implementation. Returns the others' replies, in order."""
        with ThreadPoolExecutor(max_workers=max(len(lives), 1)) as pool:
            futures = [(lv, pool.submit(request, lv)) for lv in lives]
        replies = []
        for lv, future in futures:
            exc = future.exception()
            if isinstance(exc, WorkerDied):
                self._fail(lv, results[lv.impl.label], exc.verdict, exc.detail)
            elif exc is not None:
                raise exc
            else:
                replies.append((lv, future.result()))
        return replies

    def _batch_timeout(self, lv: _Live, n: int) -> float:
        first = lv.result.cases[-1].wall_ms_first_call or 1000.0
        return self.call_timeout_s + n * 20 * first / 1e3

    # -- all cases --------------------------------------------------------------------------
    def run(
        self,
        impls: list[Impl],
        previous: Callable[[], None] | None = None,
        defer: bool = False,
    ) -> EvalReport:
        """Evaluate ``impls`` on the cases. ``previous`` (the ``settle`` of the evaluation before,
        on the same preparer) runs once this one's first calls are made. With ``defer`` the last
        case's verdicts come in while the caller goes on (to the next evaluation, passing
        ``settle`` as its ``previous``): the report is complete only after ``settle()``."""
        if defer and self.preparer is None:
            raise ValueError("a deferred evaluation needs a preparer that outlives it")
        t_start = time.monotonic()
        before = outer = _Once(previous)
        symbol = self.task.symbol(self.variant)
        results = [ImplResult(label=i.label, source=str(i.source)) for i in impls]
        with ThreadPoolExecutor(max_workers=max(len(impls), 1)) as pool:
            list(
                pool.map(
                    lambda p: prepare(p[0], self.arch, symbol, p[1]),
                    zip(impls, results, strict=True),
                )
            )
        lives = [_Live(i, r) for i, r in zip(impls, results, strict=True)]
        cases = self.task.cases(self.suite)
        if self.case_filter is not None:
            cases = [c for c in cases if c.index in self.case_filter]
        prep = self.preparer or Preparer(self.work_dir, self.cores.helpers if self.cores else None)
        unseen = list(self.unseen.cases)
        upcoming = [(self.task, self.variant, c) for c in unseen + cases]
        for then_task, then_variant, then_suite in self.then:
            if len(upcoming) > len(unseen) + len(cases) + MAX_AHEAD:
                break
            upcoming += [(then_task, then_variant, c) for c in then_task.cases(then_suite)]
        self._report = EvalReport(
            task=self.task.name,
            variant=self.variant,
            suite=self.suite,
            base_seed=self.base_seed,
            arch=self.arch,
            device=self.device,
            impls=results,
            gpu=gpu.as_dict() if (gpu := pinned()) else None,
            phases=self.phases,
            unseen_seed=self.unseen.seed if unseen else None,
        )
        try:
            t_unseen = time.monotonic()
            for k, case in enumerate(unseen):
                self.progress(f"{self.task.name} {self.variant} unseen case {k}: {label(case)}")
                self._check_unseen(case, lives, prep, upcoming[k + 1 :])
            self._report.unseen_s = round(time.monotonic() - t_unseen, 4)
            for k, case in enumerate(cases, start=len(unseen)):
                self.progress(
                    f"{self.task.name} {self.variant} {self.suite} case {case.index}: {case.label}"
                )
                self._pending = self._run_case(case, lives, prep, upcoming[k + 1 :], before)
                before = _Once(self._pending.run if self._pending else None)
            outer()  # where no case ran
            self._report.device = self.device
            self._report.wall_s = time.monotonic() - t_start
            if not defer:
                self.settle()
        except BaseException:
            if self._pending is not None:  # an error cut the evaluation short
                self._pending.prepared.discard()
                self._pending = None
            raise
        finally:
            if self.preparer is None:
                prep.close()
            for lv in lives:
                if lv.worker is None:
                    continue
                if (
                    self.pool is not None
                    and lv.impl.trusted
                    and lv.worker.alive
                    and lv.info is not None
                ):
                    self.pool.give(lv.impl.label, lv.worker, lv.info)
                else:
                    lv.worker.close()
        return self._report

    def settle(self) -> None:
        """Wait for the last case's verdicts (see ``run``'s ``defer``) and conclude the report;
        once is enough."""
        last, self._pending = self._pending, None
        if last is not None:
            t0 = time.monotonic()
            last.run()
            last.times["settle"] = round(time.monotonic() - t0, 4)
        if self._report is None:
            return
        for r in self._report.impls:
            if r.verdict == "pending":
                bad = [c for c in r.cases if not c.ok]
                if bad:
                    r.verdict = bad[0].verdict
                    r.detail = f"case {bad[0].index} ({_label(bad[0].params)}): {bad[0].detail}"
                else:
                    r.verdict = "ok"


class _Once:
    """A callable (or nothing) that runs at most once, however often it is called."""

    def __init__(self, fn: Callable[[], None] | None) -> None:
        self._fn = fn

    def __call__(self) -> None:
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()


@dataclass
class _Settle:
    """What is left of a case once its GPU work is done: waiting for the judgements of its
    timed and re-checked outputs (asked of the preparer, which judges them while the next case
    runs), the verdicts they give, and freeing the case."""

    prepared: Prepared
    results: dict[str, CaseResult]
    timed: list[tuple[_Live, Judgement]]  # of those whose first call passed
    rechecked: list[tuple[_Live, Judgement]]
    hot: dict[str, TimingStats]
    times: dict[str, float]  # the case's phases

    def run(self) -> None:
        for lv, judgement in self.timed:
            res = self.results[lv.impl.label]
            if bad := Evaluator._verdict(judgement, self.times):  # the first failure seen
                res.verdict = "wrong_when_timed"
                res.detail = "a timed call's output was wrong: " + "; ".join(
                    c.summary() for c in bad
                )
            elif lv.impl.label in self.hot:
                res.hot = self.hot[lv.impl.label]
        for lv, judgement in self.rechecked:
            res = self.results[lv.impl.label]
            bad = Evaluator._verdict(judgement, self.times)
            if res.verdict != "pending":
                continue
            if bad:
                res.verdict = "wrong_on_fresh_inputs"
                res.detail = "; ".join(c.summary() for c in bad)
            else:
                res.verdict = "ok"
        prepared = self.prepared
        prepared.discard()
        self.times["oracles"] = round(max(prepared.oracle_seconds.values(), default=0.0), 4)
        self.times["making"] = round(prepared.making_seconds, 4)
        self.times["judging"] = round(prepared.judging_seconds, 4)


class _Phases:
    """Seconds spent in each phase of one case, marked at each phase's end."""

    def __init__(self, case: int, start: float) -> None:
        self.times: dict[str, float] = {"case": case}
        self._last = start

    def __call__(self, phase: str) -> None:
        now = time.monotonic()
        self.times[phase] = round(now - self._last, 4)
        self._last = now


def _slot(live: _Live, written: OutputSlot) -> OutputFile:
    """The outputs that a worker's reply says it left in a slot, as the judge reads them."""
    if written.unpinned:  # correct, only slower: say so in the log
        log.warning("%s: an output slot could not be page-locked; copies run unpinned",
                    live.impl.label)  # fmt: skip
    return OutputFile(Path(written.path), live.layout)


def _label(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def optimized_entry(symbol: str) -> str:
    """The entry MSKernelBench's optimized kernels define instead of ``symbol``."""
    return f"{symbol}_optimized"


def standard_impls(task: Task, variant: str) -> list[Impl]:
    """The task's baseline and, where it has one, its library baseline."""
    impls = []
    base = task.source("baseline", variant)
    if base is None:
        raise UserError(f"{task.folder} has no baseline for {variant}")
    impls.append(Impl("baseline", base, trusted=True))
    lib = task.source("library", variant)
    if lib is not None:
        impls.append(Impl("library", lib, trusted=True, links=tuple(task.spec.library_links)))
    return impls
