"""The loop's GPU side (agents/backend.py's Backend on a GPU): screen candidates and evaluate
them in full with the real evaluator, run compute-sanitizer on a failure, profile with ncu.

GPU work leases a GPU from the run's pool: LLM calls of many tasks run in parallel, GPU work
one at a time per GPU, so that timings stay clean. A session (every candidate and build in it,
the baseline, and in a full evaluation the library) runs on one GPU, so every ratio compares
timings from the same GPU and the same session.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np

from ..bench.build import BuildError, build
from ..bench.client import WorkerPool
from ..bench.evaluate import CaseResult, EvalReport, Evaluator, Impl, ImplResult, standard_impls
from ..bench.timing import TimingPolicy
from ..bench.verify import CheckResult
from ..device import DeviceFacts
from ..errors import UserError
from ..formula import evaluate_shape
from ..gpus import GpuPool
from ..profile.run import profile as run_profile
from ..profile.run import sanitize
from ..report import score_impl, work
from ..tasks import Task
from . import flags as flag_rules
from .backend import Submission, compile_check, extra_flags
from .outcome import CaseOutcome, FlagTrial, Outcome, ProfileView

log = logging.getLogger(__name__)
POOL = WorkerPool()  # baseline and library workers, reused across evaluations (per GPU)
#: compute-sanitizer tools run on a failure: memcheck where it crashed, racecheck and initcheck
#: where it ran but gave wrong results (a race or an uninitialised read is the usual cause); not
#: after a hang, which would hang the sanitizer too
SANITIZERS = {
    "crash": ("memcheck",), "runtime_error": ("memcheck",),
    "wrong": ("racecheck", "initcheck"), "wrong_when_timed": ("racecheck", "initcheck"),
    "wrong_on_fresh_inputs": ("racecheck", "initcheck"), "unsynchronized": ("racecheck",),
    # wrong on an unseen case: the tools run on the suite's lightest case, where a race or an
    # uninitialised read may show even if the output there came out right
    "wrong_on_unseen": ("racecheck", "initcheck"),
}  # fmt: skip
SANITIZER_TIMEOUT_S = 120


def _where(task: Task, variant: str, params: dict, name: str, flat: int) -> str:
    """A flat index into output ``name`` as [i, j, ...] where its shape is known."""
    arg = next((a for a in task.spec.args if a.name == name), None)
    if arg is None or not arg.shape:
        return f"[{flat}]"
    try:
        shape = evaluate_shape(arg.shape, task.names(params, variant))
    except UserError:  # a shape that needs derived parameters the case lacks
        return f"[{flat}]"
    if not 0 <= flat < math.prod(shape):
        return f"[{flat}]"
    return "[" + ", ".join(str(int(i)) for i in np.unravel_index(flat, shape)) + "]"


def _check_text(task: Task, variant: str, params: dict, check: CheckResult) -> str:
    nan = f", {check.nan_count} NaN" if check.nan_count else ""
    text = (f"{check.name}: {check.failed}/{check.checked} elements wrong{nan}, worst error "
            f"{check.max_error_ratio:.3g}x what is allowed")  # fmt: skip
    firsts = [
        f"{_where(task, variant, params, check.name, m.index[0])} expected {m.expected:.7g}, "
        f"got {m.got:.7g} (allowed +-{m.allowed:.3g})"
        for m in check.mismatches[:3]
    ]
    return text + ("; first: " + "; ".join(firsts) if firsts else "")


def case_detail(task: Task, variant: str, case: CaseResult) -> str:
    bad = [c for c in case.checks if not c.passed]
    if case.verdict == "wrong" and bad:
        return "\n  ".join(_check_text(task, variant, case.params, c) for c in bad)
    return case.detail


def outcome_of(task: Task, variant: str, report: EvalReport, impl: ImplResult,
               device: DeviceFacts | None, flags: tuple[str, ...]) -> Outcome:  # fmt: skip
    """One implementation's results in ``report`` as the agents read them."""
    scored = score_impl(task, report, impl, device)
    base = report.impl("baseline")
    total = sum(c.complexity for c in impl.cases) or 1
    cases = []
    for i, (case, s) in enumerate(zip(impl.cases, scored.cases, strict=True)):
        b = base.cases[i] if base is not None and i < len(base.cases) else None
        nbytes, flops = work(task, case.params, variant)
        cases.append(CaseOutcome(
            index=case.index, label=s.label, weight=case.complexity / total, bytes=nbytes,
            flops=flops, verdict=case.verdict, time_ms=s.time_ms, spread=s.spread,
            baseline_ms=b.cold.median_ms if b is not None and b.ok and b.cold else None,
            vs_baseline=s.vs_baseline, vs_baseline_u=s.vs_baseline_u, vs_library=s.vs_library,
            sol=s.sol_fraction,
            detail="" if case.ok else case_detail(task, variant, case),
        ))  # fmt: skip
    resources = []
    if impl.build is not None:
        resources = [f"{k.kernel}: {k.registers} registers, {k.shared_bytes} B shared, "
                     f"{k.spill_stores} B spill stores, {k.stack_bytes} B stack"
                     for k in impl.build.resources]  # fmt: skip
    score = scored.score if impl.correct else None
    return Outcome(verdict=impl.verdict, detail=impl.detail, flags=list(flags), score=score,
                   noise=scored.noise if score is not None else None,
                   geomean=scored.geomean, cases=cases, resources=resources,
                   gpu=device.uuid if device is not None else "")  # fmt: skip


def best_of(outcomes: list[Outcome]) -> Outcome:
    """The fastest correct build (the first, the one asked for, where none is correct), with
    every build's result as its trials, fastest first."""
    correct = [o for o in outcomes if o.ok and o.score is not None]
    chosen = max(correct, key=lambda o: o.score or 0.0) if correct else outcomes[0]
    if len(outcomes) > 1:
        ranked = sorted(outcomes, key=lambda o: -o.score if o.score is not None else 1.0)
        chosen.trials = [FlagTrial(o.flags, o.verdict, o.score, _first_line(o.detail))
                         for o in ranked]  # fmt: skip
    return chosen


def _first_line(text: str, width: int = 200) -> str:
    return text.splitlines()[0][:width] if text else ""


#: Screening: enough timed calls to tell a candidate that could become the new best from one
#: that cannot, at a fraction of a full evaluation's cost (its numbers are never reported).
SCREEN_POLICY = TimingPolicy(min_samples=5, max_samples=40, target_error=0.03, time_cap_s=0.5,
                             hot_samples=3)  # fmt: skip


class GpuBackend:
    def __init__(self, task: Task, variant: str, suite: str, gpus: GpuPool,
                 devices: dict[str, DeviceFacts], code_dir: Path) -> None:  # fmt: skip
        self.task, self.variant, self.suite = task, variant, suite
        self.gpus, self.devices, self.code_dir = gpus, devices, code_dir
        self.arch = next(iter(devices.values())).arch  # one GPU model per run

    def device(self) -> DeviceFacts:
        return next(iter(self.devices.values()))

    def _write(self, source: str, name: str) -> Path:
        path = self.code_dir / f"{name}.cu"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        return path

    def compile(self, sub: Submission) -> Outcome | None:
        return compile_check(self._write(sub.source, sub.name), self.arch, sub.flags)

    def screen(self, subs: list[Submission], variants: bool) -> list[Outcome]:
        """One session: the baseline and every submission (and, with ``variants``, its flag
        variants), checked and briefly timed; no library."""
        base = standard_impls(self.task, self.variant)[0]
        impls, builds = [base], {}
        for sub in subs:
            path = self._write(sub.source, sub.name)
            mine = {sub.name: sub.flags}
            if variants:
                regs = self._registers(path, sub.flags)
                tolerance = self.task.spec.tolerance[self.variant]
                for flags in flag_rules.screen(sub.flags, regs, tolerance, self.variant):
                    mine[f"{sub.name}+{flag_rules.short(flags[len(sub.flags) :])}"] = flags
            impls += [Impl(label, path, extra_flags=extra_flags(fl)) for label, fl in mine.items()]
            builds[sub.name] = mine
        report, device = self._session(impls, SCREEN_POLICY)
        out = []
        for sub in subs:
            outcome = best_of([
                outcome_of(self.task, self.variant, report, report_impl(report, lb), device, fl)
                for lb, fl in builds[sub.name].items()
            ])  # fmt: skip
            outcome.stage = "screen"
            out.append(self._with_sanitizers(sub, outcome))
        return out

    def evaluate(self, subs: list[Submission]) -> list[Outcome]:
        """One session: the baseline, the library and every submission, fully timed. The
        baseline itself is a submission named "baseline" (its P is 1 by definition)."""
        impls = standard_impls(self.task, self.variant)
        for sub in subs:
            if sub.name != "baseline":
                path = self._write(sub.source, sub.name)
                impls.append(Impl(sub.name, path, extra_flags=extra_flags(sub.flags)))
        report, device = self._session(impls, None)
        out = []
        for sub in subs:
            outcome = outcome_of(self.task, self.variant, report, report_impl(report, sub.name),
                                 device, sub.flags)  # fmt: skip
            if sub.name == "baseline" and outcome.ok:  # 1 by definition: against itself
                outcome.score, outcome.noise = 1.0, None
            outcome.stage = "full"
            out.append(self._with_sanitizers(sub, outcome))
        return out

    def _registers(self, path: Path, flags: tuple[str, ...]) -> int | None:
        try:  # cached by content: the session's own build of it reuses this one
            built = build(path, self.arch, (), extra_flags(flags))
        except BuildError:
            return None
        return max((k.registers for k in built.resources), default=None)

    def _session(
        self, impls: list[Impl], policy: TimingPolicy | None
    ) -> tuple[EvalReport, DeviceFacts]:
        with self.gpus.lease() as gpu:
            device = self.devices[gpu.uuid]
            ev = Evaluator(self.task, self.variant, self.suite, device.arch, policy=policy,
                           pool=POOL)  # fmt: skip
            return ev.run(impls), device

    def _with_sanitizers(self, sub: Submission, outcome: Outcome) -> Outcome:
        if outcome.verdict in SANITIZERS:
            path = self._write(sub.source, sub.name)
            outcome.sanitizer = self._sanitize(path, tuple(outcome.flags), outcome)
        return outcome

    def _sanitize(self, path: Path, flags: tuple[str, ...], outcome: Outcome) -> dict[str, str]:
        """compute-sanitizer's reports on the lightest failing case."""
        failing = [c for c in outcome.cases if c.verdict not in ("ok", "skipped", "pending")]
        case = min(failing, key=lambda c: c.weight).index if failing else 0
        reports = {}
        cand = Impl(path.stem, path, extra_flags=extra_flags(flags))
        for tool in SANITIZERS[outcome.verdict]:
            with self.gpus.lease():
                reports[tool] = sanitize(self.task, self.variant, cand, self.arch, tool=tool,
                                         case_index=case, suite=self.suite,
                                         timeout_s=SANITIZER_TIMEOUT_S)  # fmt: skip
            log.info("%s %s on case %d: %s", path.stem, tool, case, reports[tool][-200:])
        return reports

    def profile(self, sub: Submission, mode: str, case: int) -> ProfileView:
        path = self._write(sub.source, sub.name)
        impl = Impl(sub.name, path, trusted=sub.name == "baseline",
                    extra_flags=extra_flags(sub.flags))  # fmt: skip
        with self.gpus.lease() as gpu:
            device = self.devices[gpu.uuid]
            rep = run_profile(self.task, self.variant, impl, device.arch, case_index=case,
                              suite=self.suite, device=device)  # fmt: skip
        where = f"{rep.case} ({rep.label})"
        if not rep.result.ok:
            return ProfileView(where, None, rep.result.error)
        return ProfileView(where, rep.summaries[mode].text)


def report_impl(report: EvalReport, label: str) -> ImplResult:
    impl = report.impl(label)
    assert impl is not None, label
    return impl
