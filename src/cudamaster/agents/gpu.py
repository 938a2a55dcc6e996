"""The loop's GPU side: evaluate a candidate (and its flag screen) with the real evaluator,
run compute-sanitizer on a failure, profile with ncu.

GPU work leases a GPU from the run's pool: LLM calls of many tasks run in parallel, GPU work
one at a time per GPU, so that timings stay clean. An evaluation (every build of the candidate,
the baseline and the library together) runs on one GPU, so every ratio compares timings from
the same GPU and the same session.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np

from ..bench.build import BuildError, build
from ..bench.client import WorkerPool
from ..bench.evaluate import CaseResult, EvalReport, Evaluator, Impl, ImplResult, standard_impls
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
from .outcome import CaseOutcome, FlagTrial, Outcome, ProfileView

log = logging.getLogger(__name__)
POOL = WorkerPool()  # baseline and library workers, reused across evaluations (per GPU)
LOG_TAIL = 40  # lines of a failed build's log given to the debug agent
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


def _extra(flags: tuple[str, ...]) -> tuple[str, ...]:
    """Flags beyond the build's own -O3."""
    return tuple(f for f in flags if f != "-O3")


def _log_tail(path: Path | None, lines: int = LOG_TAIL) -> str:
    try:
        text = path.read_text(errors="replace") if path else ""
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


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


def _case_detail(task: Task, variant: str, case: CaseResult) -> str:
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
            detail="" if case.ok else _case_detail(task, variant, case),
        ))  # fmt: skip
    resources = []
    if impl.build is not None:
        resources = [f"{k.kernel}: {k.registers} registers, {k.shared_bytes} B shared, "
                     f"{k.spill_stores} B spill stores, {k.stack_bytes} B stack"
                     for k in impl.build.resources]  # fmt: skip
    score = scored.score if impl.correct else None
    return Outcome(verdict=impl.verdict, detail=impl.detail, flags=list(flags), score=score,
                   noise=scored.noise if score is not None else None,
                   geomean=scored.geomean, cases=cases, resources=resources)  # fmt: skip


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


class GpuBackend:
    def __init__(self, task: Task, variant: str, suite: str, gpus: GpuPool,
                 devices: dict[str, DeviceFacts], code_dir: Path) -> None:  # fmt: skip
        self.task, self.variant, self.suite = task, variant, suite
        self.gpus, self.devices, self.code_dir = gpus, devices, code_dir
        self.arch = next(iter(devices.values())).arch  # one GPU model per run

    def _write(self, source: str, name: str) -> Path:
        path = self.code_dir / f"{name}.cu"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        return path

    def evaluate(self, source: str, flags: tuple[str, ...], name: str, screen: bool) -> Outcome:
        """Evaluate ``source`` built with ``flags`` (with ``screen``, beside the flag screen's
        other builds, in one session) against the baseline and the library."""
        path = self._write(source, name)
        impls = standard_impls(self.task, self.variant)
        if name == "baseline":
            return self._run(impls, {"baseline": flags}, "baseline")
        try:  # built first: a compile error needs no GPU, and ptxas says the registers
            primary = build(path, self.arch, (), _extra(flags))
        except BuildError as exc:
            return Outcome("compile_error", str(exc), list(flags),
                           compile_log=_log_tail(exc.log_path))  # fmt: skip
        builds = {name: flags}
        if screen:
            regs = max((k.registers for k in primary.resources), default=None)
            tolerance = self.task.spec.tolerance[self.variant]
            for variant in flag_rules.screen(flags, regs, tolerance, self.variant):
                builds[f"{name}+{flag_rules.short(variant[len(flags) :])}"] = variant
        for label, fl in builds.items():
            impls.append(Impl(label, path, extra_flags=_extra(fl)))
        outcome = self._run(impls, builds, name)
        if outcome.verdict in SANITIZERS:
            outcome.sanitizer = self._sanitize(path, flags, outcome)
        return outcome

    def _run(self, impls: list[Impl], builds: dict[str, tuple[str, ...]], name: str) -> Outcome:
        with self.gpus.lease() as gpu:
            device = self.devices[gpu.uuid]
            ev = Evaluator(self.task, self.variant, self.suite, device.arch, pool=POOL)
            report = ev.run(impls)
        outcomes = []
        for label, fl in builds.items():
            impl = report.impl(label)
            assert impl is not None
            outcomes.append(outcome_of(self.task, self.variant, report, impl, device, fl))
        if name == "baseline" and outcomes[0].ok:  # 1 by definition: a baseline against itself
            outcomes[0].score, outcomes[0].noise = 1.0, None
        return best_of(outcomes)

    def _sanitize(self, path: Path, flags: tuple[str, ...], outcome: Outcome) -> dict[str, str]:
        """compute-sanitizer's reports on the lightest failing case."""
        failing = [c for c in outcome.cases if c.verdict not in ("ok", "skipped", "pending")]
        case = min(failing, key=lambda c: c.weight).index if failing else 0
        reports = {}
        cand = Impl(path.stem, path, extra_flags=_extra(flags))
        for tool in SANITIZERS[outcome.verdict]:
            with self.gpus.lease():
                reports[tool] = sanitize(self.task, self.variant, cand, self.arch, tool=tool,
                                         case_index=case, suite=self.suite,
                                         timeout_s=SANITIZER_TIMEOUT_S)  # fmt: skip
            log.info("%s %s on case %d: %s", path.stem, tool, case, reports[tool][-200:])
        return reports

    def profile(self, source: str, flags: tuple[str, ...], name: str, mode: str,
                case: int) -> ProfileView:  # fmt: skip
        path = self._write(source, name)
        impl = Impl(name, path, trusted=name == "baseline", extra_flags=_extra(flags))
        with self.gpus.lease() as gpu:
            device = self.devices[gpu.uuid]
            rep = run_profile(self.task, self.variant, impl, device.arch, case_index=case,
                              suite=self.suite, device_uuid=device.uuid)  # fmt: skip
        where = f"{rep.case} ({rep.label})"
        if not rep.result.ok:
            return ProfileView(where, None, rep.result.error)
        return ProfileView(where, rep.summaries[mode].text)
