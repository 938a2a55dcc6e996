"""Evaluate implementations of one operator on one (variant, suite): verify, then time.

Every implementation runs in its own worker process. Per case: seeded input sets are made and
the float64 oracle computed once; each implementation's first call is checked; those that pass
are timed together, turn by turn, until every one's median is known, so that clock drift cancels
in their ratios; the output of the final timed turn's last call, on the input set that the
first call did not use, is checked too (an implementation that caches, or leaves work running
past the call, differs there); finally a fresh input set is checked again. The inputs and
oracles come from cudamaster.bench.prepare, cases ahead, which also judges the outputs; no
preparation shares a core with a timed call (cudamaster.cpus), and none runs at all while short
calls are timed. Cold calls rotate over several placements of the buffers (bench.worker).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .. import cpus
from ..dtypes import concrete
from ..errors import UserError
from ..gpus import pinned
from ..tasks import Case, Task
from .build import BuildError, BuildResult, build
from .client import WorkerClient, WorkerDied, WorkerPool
from .comparer import comparer_library
from .prepare import MAX_AHEAD, N_SETS, CaseKey, Judgement, Prepared, Preparer
from .symbols import SymbolReport, check_library, defines_symbol
from .timing import TimingPolicy, TimingStats, exhausted, settled, summarize
from .verify import CheckResult

log = logging.getLogger(__name__)

CHECK_SET, TIMING_SETS, RECHECK_SET = 0, (0, 1), 2
# a timed call (with the harness's work around it) shorter than this is timed with every
# preparation stopped, even where the helper has cores of its own (see Preparer.quiet)
SHORT_CALL_S = 2e-3
assert RECHECK_SET < N_SETS


@dataclass
class Impl:
    """An implementation to evaluate: a .cu file and how far it is trusted."""

    label: str
    source: Path
    trusted: bool = False  # baselines and library baselines may link vendor libraries
    links: tuple[str, ...] = ()
    extra_flags: tuple[str, ...] = ()


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
    build: BuildResult | None = None
    symbols: SymbolReport | None = None
    cases: list[CaseResult] = field(default_factory=list)

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
    # per case, where the coordinator's wall time went (seconds): waiting for the inputs, input
    # sets loaded by the workers, first calls checked, timed turns, hot timing and the
    # re-check; "checks" is the part of those spent waiting for judged outputs (and so for
    # the oracles), "oracles" the longest oracle (computed by the preparer, cases ahead)
    phases: list[dict[str, float]] = field(default_factory=list)

    def impl(self, label: str) -> ImplResult | None:
        return next((i for i in self.impls if i.label == label), None)


@dataclass
class _Live:
    impl: Impl
    result: ImplResult
    worker: WorkerClient | None = None
    info: dict[str, Any] = field(default_factory=dict)  # what the worker's init reported
    stop: bool = False  # no further cases (after a hang)


def prepare(impl: Impl, arch: str, symbol: str, result: ImplResult) -> None:
    """Build and inspect one implementation before anything runs; sets the verdict on refusal."""
    try:
        result.build = build(impl.source, arch, impl.links, impl.extra_flags)
    except BuildError as exc:
        result.verdict, result.detail = "compile_error", f"{exc} (log: {exc.log_path})"
        return
    if not defines_symbol(result.build.library, symbol):
        result.verdict = "missing_symbol"
        result.detail = f'{impl.source.name} does not define extern "C" {symbol}'
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
    ) -> None:
        """``preparer`` makes the inputs (one of its own when None); ``then`` are the (task,
        variant, suite) jobs that the same preparer serves next, in order, whose first cases
        it prepares during this evaluation's last cases; ``cores`` are the workers' cores and
        the preparer's (cudamaster.cpus; "auto": this host's split for the pinned GPU, None: no
        split)."""
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
        self.device: dict[str, Any] = {}
        self.phases: list[dict[str, float]] = []
        self._check_s = 0.0  # host time judging outputs, in the current case
        self.dtypes = {a.name: concrete(a.dtype, variant) for a in task.spec.args}
        self.arg_specs = [
            {"name": a.name, "role": a.role_for(variant), "dtype": self.dtypes[a.name]}
            for a in task.spec.args
        ]

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
                info = worker.request(
                    60, cmd="init", device=0, comparer=comparer_library(self.arch)
                )
            except WorkerDied as exc:
                worker.close()
                if "no CUDA GPU" in exc.detail or "cudaGetDeviceCount" in exc.detail:
                    raise UserError(f"no usable CUDA GPU: {exc.detail}") from None
                raise
            info.pop("ok", None)
        live.info = info
        self.device = self.device or info
        reply = worker.request(
            60,
            cmd="load",
            library=str(live.result.build.library),
            symbol=self.task.symbol(self.variant),
            args=self.arg_specs,
        )
        if not reply.get("ok"):
            worker.close()
            raise WorkerDied(reply.get("verdict", "load_error"), reply.get("error", ""))
        if reply.get("loaded") and not live.impl.trusted:
            worker.close()
            raise WorkerDied("forbidden", f"loading it brought in {', '.join(reply['loaded'])}")
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
    def _verdict(self, asked: Judgement) -> list[CheckResult]:
        """Wait for a judgement asked of the preparer (the wait is counted as check time)."""
        t0 = time.monotonic()
        try:
            return asked.result()
        finally:
            self._check_s += time.monotonic() - t0

    # -- one case ---------------------------------------------------------------------------
    def _run_case(
        self, case: Case, lives: list[_Live], prep: Preparer, after: list[tuple[Task, str, Case]]
    ) -> None:
        """One case; ``after`` are the cases that the preparer is asked to make ahead."""
        t_case = time.monotonic()
        active = [lv for lv in lives if not lv.stop and lv.result.verdict == "pending"]
        prepared: Prepared | None = None
        if active:
            prepared = prep.take(self.task, self.variant, case, self.base_seed)
        prep.ahead(after, self.base_seed)
        sets = prepared.sets if prepared else []
        key = CaseKey(str(self.task.folder), self.variant, case, self.base_seed)
        seeds = key.seeds(self.task.name)
        params = dict(sets[0].params) if sets else dict(case.params)  # with derived ones (nnz)
        complexity = self.task.complexity(params, self.variant)
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
            return
        case_dir = prepared.case_dir
        self._check_s = 0.0
        mark = _Phases(case.index, t_case)
        mark("inputs")
        arg_bytes = [{**a, "nbytes": sets[0].nbytes.get(a["name"], 0)} for a in self.arg_specs]
        scalars = [inp.call_scalars for inp in sets]

        # 1. the input sets loaded by every worker at once (no implementation code runs), then
        # a checked first call, one implementation at a time; each output is judged by the
        # preparer while the next implementation runs
        loaded = self._setup_all(active, results, case_dir, arg_bytes, scalars)
        mark("setup")
        asked = [
            (lv, prepared.ask(CHECK_SET, _out(case_dir, lv)))
            for lv in self._first_calls(loaded, results)
        ]
        timed: list[_Live] = []
        for lv, judgement in asked:
            res = results[lv.impl.label]
            res.checks = self._verdict(judgement)
            res.paper_rule_passed = all(c.paper_rule_passed for c in res.checks)
            bad = [c for c in res.checks if not c.passed]
            if bad:
                res.verdict, res.detail = "wrong", "; ".join(c.summary() for c in bad)
            else:
                timed.append(lv)
        verdicts = {lv.impl.label: results[lv.impl.label].verdict for lv in active}
        log.info("first calls checked: %s", verdicts)
        mark("first_calls")

        # 2. timing, interleaved turn by turn, with no preparation on the workers' cores; the
        # final turn's last output (still in the worker's buffers) is saved and judged
        times, turn = self._time_turns(timed, results, prep)
        asked = []
        for lv in list(timed):
            try:
                assert lv.worker is not None
                lv.worker.request(self.call_timeout_s, cmd="save")
            except WorkerDied as exc:
                self._fail(lv, results[lv.impl.label], exc.verdict, exc.detail)
                timed.remove(lv)
                continue
            asked.append((lv, prepared.ask(TIMING_SETS[-1], _out(case_dir, lv), full=False)))
        for lv in timed:
            results[lv.impl.label].cold = summarize(times[lv.impl.label])
        log.info("timed in %d turns: %s", turn, {k: len(v) for k, v in times.items()})
        mark("timing")

        # 3. hot L2 (back-to-back calls, no flush) while the timed outputs are judged; then
        # 4. a re-check on a fresh input set, for those whose timed output was right
        hot = self._time_hot(timed, results, prep)
        rechecked = []
        for lv, judgement in asked:
            res = results[lv.impl.label]
            bad = self._verdict(judgement)
            if bad:
                res.verdict = "wrong_when_timed"
                res.detail = "a timed call's output was wrong: " + "; ".join(
                    c.summary() for c in bad
                )
            elif lv.impl.label in hot:
                res.hot = hot[lv.impl.label]
                rechecked.append(lv)
        asked = []
        for lv in rechecked:
            res = results[lv.impl.label]
            try:
                assert lv.worker is not None
                reply = lv.worker.request(self.call_timeout_s, cmd="run", set=RECHECK_SET)
            except WorkerDied as exc:
                self._fail(lv, res, exc.verdict, exc.detail)
                continue
            if reply["changed_inputs"]:
                res.verdict = "inputs_mutated"
                res.detail = "a later call changed input(s) " + ", ".join(reply["changed_inputs"])
            else:
                asked.append((lv, prepared.ask(RECHECK_SET, _out(case_dir, lv), full=False)))
        for lv, judgement in asked:
            res = results[lv.impl.label]
            if bad := self._verdict(judgement):
                res.verdict = "wrong_on_fresh_inputs"
                res.detail = "; ".join(c.summary() for c in bad)
            else:
                res.verdict = "ok"
        for lv in active:
            if lv.worker is not None:
                try:
                    lv.worker.request(60, cmd="release")
                except WorkerDied as exc:
                    self._fail(lv, results[lv.impl.label], exc.verdict, exc.detail)
        prepared.discard()
        mark("finish")
        mark.times["checks"] = round(self._check_s, 4)
        mark.times["oracles"] = round(max(prepared.oracle_seconds.values(), default=0.0), 4)
        self.phases.append(mark.times)

    def _first_calls(self, loaded: list[_Live], results: dict[str, CaseResult]) -> list[_Live]:
        """The checked first call of each loaded implementation, one at a time; returns those
        whose outputs are to be judged (the others have their verdict)."""
        ran = []
        for lv in loaded:
            res = results[lv.impl.label]
            try:
                assert lv.worker is not None
                reply = lv.worker.request(self.call_timeout_s, cmd="run", set=CHECK_SET)
            except WorkerDied as exc:
                self._fail(lv, res, exc.verdict, exc.detail)
                continue
            res.wall_ms_first_call = reply["wall_ms"]
            if reply["vendor_libraries"] and not lv.impl.trusted:
                self._fail(lv, res, "forbidden", "loaded " + ", ".join(reply["vendor_libraries"]))
            elif reply["changed_inputs"]:
                res.verdict = "inputs_mutated"
                res.detail = "the call changed input(s) " + ", ".join(reply["changed_inputs"])
            elif reply["unordered_outputs"]:
                res.verdict = "unsynchronized"
                res.detail = (
                    "output(s) " + ", ".join(reply["unordered_outputs"]) + " were still being "
                    "written after the call returned (work not ordered with the default stream)"
                )
            else:
                ran.append(lv)
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
                        self._batch_timeout(lv, n_hot + 1),
                        cmd="time",
                        n=n_hot + 1,
                        mode="hot",
                        sets=list(TIMING_SETS),
                        start=0,
                    )
            except WorkerDied as exc:
                self._fail(lv, res, exc.verdict, exc.detail)
                continue
            hot[lv.impl.label] = summarize(reply["times_ms"][1:])
        return hot

    def _time_turns(
        self, timed: list[_Live], results: dict[str, CaseResult], prep: Preparer
    ) -> tuple[dict[str, list[float]], int]:
        """Warm up, then timed turns over ``timed`` (those that fail leave it) until every
        median is known, with no preparation beside them (none at all for short calls);
        returns each one's cold times and the number of turns."""
        times: dict[str, list[float]] = {lv.impl.label: [] for lv in timed}
        batch: dict[str, int] = {}
        per_call: dict[str, float] = {}  # seconds, from the warm-up
        with prep.quiet():
            for lv in list(timed):
                self._warm_up(lv, results[lv.impl.label], timed, batch, per_call)
        with prep.quiet(strict=min(per_call.values(), default=1.0) < SHORT_CALL_S):
            turn = self._turns(timed, results, times, batch)
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
            lv.worker.request(
                self._batch_timeout(lv, warmup),
                cmd="time",
                n=warmup,
                mode="cold",
                sets=list(TIMING_SETS),
                start=0,
            )
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
    ) -> int:
        """The timed turns of _time_turns; returns their number."""
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
                    reply = lv.worker.request(
                        self._batch_timeout(lv, batch[label] + 1),
                        cmd="time",
                        n=batch[label] + 1,
                        mode="cold",
                        sets=list(TIMING_SETS),
                        start=0,
                    )
                except WorkerDied as exc:
                    self._fail(lv, results[label], exc.verdict, exc.detail)
                    timed.remove(lv)
                    continue
                spent[label] += time.monotonic() - t0
                times[label] += reply["times_ms"][1:]  # the first call after a switch is dropped
                results[label].placements = reply.get("placements")
            turn += 1
        return turn

    def _setup_all(
        self,
        active: list[_Live],
        results: dict[str, CaseResult],
        case_dir: Path,
        arg_bytes: list[dict],
        scalars: list[list[Any]],
    ) -> list[_Live]:
        """Start the workers that need it, then load the case's input sets into all of them
        concurrently; returns those that are ready for their first call."""
        started = []
        for lv in active:
            try:
                if lv.worker is None:
                    self._spawn(lv)
                started.append(lv)
            except WorkerDied as exc:
                self._fail(lv, results[lv.impl.label], exc.verdict, exc.detail)

        def setup(lv: _Live) -> None:
            assert lv.worker is not None
            reply = lv.worker.request(120, cmd="setup", dir=str(case_dir), nsets=N_SETS,
                                      args=arg_bytes, scalars=scalars,
                                      out=str(_out(case_dir, lv)))  # fmt: skip
            if reply.get("unpinned_outputs"):  # correct, only slower: say so in the log
                log.warning("%s: outputs %s could not be page-locked; copies run unpinned",
                            lv.impl.label, ", ".join(reply["unpinned_outputs"]))  # fmt: skip

        loaded = []
        with ThreadPoolExecutor(max_workers=max(len(started), 1)) as pool:
            futures = [(lv, pool.submit(setup, lv)) for lv in started]
        for lv, future in futures:
            exc = future.exception()
            if isinstance(exc, WorkerDied):
                self._fail(lv, results[lv.impl.label], exc.verdict, exc.detail)
            elif exc is not None:
                raise exc
            else:
                loaded.append(lv)
        return loaded

    def _batch_timeout(self, lv: _Live, n: int) -> float:
        first = lv.result.cases[-1].wall_ms_first_call or 1000.0
        return self.call_timeout_s + n * 20 * first / 1e3

    # -- all cases --------------------------------------------------------------------------
    def run(self, impls: list[Impl]) -> EvalReport:
        t_start = time.monotonic()
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
        upcoming = [(self.task, self.variant, c) for c in cases]
        for then_task, then_variant, then_suite in self.then:
            if len(upcoming) > len(cases) + MAX_AHEAD:
                break
            upcoming += [(then_task, then_variant, c) for c in then_task.cases(then_suite)]
        try:
            for k, case in enumerate(cases):
                self.progress(
                    f"{self.task.name} {self.variant} {self.suite} case {case.index}: {case.label}"
                )
                self._run_case(case, lives, prep, upcoming[k + 1 :])
        finally:
            if self.preparer is None:
                prep.close()
            for lv in lives:
                if lv.worker is None:
                    continue
                if self.pool is not None and lv.impl.trusted and lv.worker.alive:
                    self.pool.give(lv.impl.label, lv.worker, lv.info)
                else:
                    lv.worker.close()
        for r in results:
            if r.verdict == "pending":
                bad = [c for c in r.cases if not c.ok]
                if bad:
                    r.verdict = bad[0].verdict
                    r.detail = f"case {bad[0].index} ({_label(bad[0].params)}): {bad[0].detail}"
                else:
                    r.verdict = "ok"
        return EvalReport(
            task=self.task.name,
            variant=self.variant,
            suite=self.suite,
            base_seed=self.base_seed,
            arch=self.arch,
            device=self.device,
            impls=results,
            wall_s=time.monotonic() - t_start,
            gpu=gpu.as_dict() if (gpu := pinned()) else None,
            phases=self.phases,
        )


class _Phases:
    """Seconds spent in each phase of one case, marked at each phase's end."""

    def __init__(self, case: int, start: float) -> None:
        self.times: dict[str, float] = {"case": case}
        self._last = start

    def __call__(self, phase: str) -> None:
        now = time.monotonic()
        self.times[phase] = round(now - self._last, 4)
        self._last = now


def _out(case_dir: Path, live: _Live) -> Path:
    """Where an implementation's worker leaves the outputs it is asked to save, for this case."""
    return case_dir / f"out-{live.impl.label}"


def _label(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


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
