"""Profile one implementation on one case, classify it and summarise it; calibrate thresholds."""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..bench.evaluate import Impl, ImplResult, prepare
from ..bench.inputs import case_seed, make_inputs
from ..bench.protocol import ArgSpec, Load, Setup
from ..dtypes import concrete
from ..errors import UserError
from ..tasks import Case, Task
from . import classify
from .ncu import KernelProfile, ProfileResult, run_ncu
from .summary import MODES, Summary, render
from .target import TargetSpec

if TYPE_CHECKING:
    from ..device import DeviceFacts

log = logging.getLogger(__name__)


@dataclass
class ProfileReport:
    task: str
    variant: str
    case: int
    label: str
    result: ProfileResult
    thresholds: classify.Thresholds
    bottleneck: str | None = None
    summaries: dict[str, Summary] = field(default_factory=dict)


def _case(task: Task, suite: str, case_index: int) -> Case:
    cases = task.cases(suite)
    try:
        return cases[case_index]
    except IndexError:
        raise UserError(f"{task.name} {suite} has cases 0..{len(cases) - 1}") from None


def target_spec(
    task: Task, variant: str, impl: Impl, arch: str, case: Case, work: Path
) -> TargetSpec:
    """Build and check ``impl``, write one input set of ``case`` under ``work``, and return the
    spec that profile/target.py runs (under ncu, or under compute-sanitizer)."""
    pre = ImplResult(impl.label, str(impl.source))
    prepare(impl, arch, task.symbol(variant), pre)
    if pre.verdict != "pending":
        raise UserError(pre.detail)
    assert pre.build is not None
    inputs = make_inputs(task, case, variant, case_seed(task.name, variant, case, 0, 0))
    inputs.write(work / "set0")
    args = tuple(
        ArgSpec(a.name, a.role_for(variant), concrete(a.dtype, variant),
                inputs.nbytes.get(a.name, 0))
        for a in task.spec.args
    )  # fmt: skip
    return TargetSpec(
        load=Load(str(pre.build.library), impl.entry_for(task.symbol(variant)), args),
        setup=Setup(str(work), 1, args, (tuple(inputs.call_scalars),), str(work / "out")),
    )


def profile(
    task: Task,
    variant: str,
    impl: Impl,
    arch: str,
    case_index: int = -1,
    suite: str = "paper",
    out_dir: Path | None = None,
    device: DeviceFacts | None = None,
) -> ProfileReport:
    """ncu metrics of ``impl`` on one case (default: the suite's last), with summaries."""
    case = _case(task, suite, case_index)
    thresholds = classify.load(device) if device else classify.DEFAULT
    work = Path(tempfile.mkdtemp(prefix="cudamaster-profile-"))
    result: ProfileResult | None = None
    try:
        spec = target_spec(task, variant, impl, arch, case, work)
        result = run_ncu(spec, out_dir or work / "ncu")
    finally:
        for sub in ("set0", "out"):
            shutil.rmtree(work / sub, ignore_errors=True)
        # without OUT_DIR, ncu's report stays here (the result names it); nothing else does
        if out_dir is not None or result is None or result.report is None:
            shutil.rmtree(work, ignore_errors=True)
    report = ProfileReport(task.name, variant, case.index, case.label, result, thresholds)
    if result.ok:
        report.summaries = {
            m: render(result.aggregate, m, thresholds, result.kernels) for m in MODES
        }
        report.bottleneck = report.summaries["filtered"].bottleneck
    return report


def report_from_dict(data: dict) -> ProfileReport:
    """A ProfileReport as ``dataclasses.asdict`` wrote it (a calibration's JSON)."""
    res = dict(data["result"])
    res["kernels"] = [KernelProfile(**k) for k in res.get("kernels", [])]
    return ProfileReport(
        task=data["task"],
        variant=data["variant"],
        case=data["case"],
        label=data["label"],
        result=ProfileResult(**res),
        thresholds=classify.Thresholds(**data["thresholds"]),
        bottleneck=data.get("bottleneck"),
        summaries={k: Summary(**v) for k, v in data.get("summaries", {}).items()},
    )


def calibrate_from(reports: list[ProfileReport]) -> classify.Thresholds:
    """Otsu thresholds from the aggregates of profiled baselines (failed profiles are skipped)."""
    samples = [r.result.aggregate for r in reports if r.result.ok]
    if len(samples) < 2:
        raise UserError("calibration needs at least two successful baseline profiles")
    return classify.calibrate(samples)


def sanitize(
    task: Task,
    variant: str,
    impl: Impl,
    arch: str,
    tool: str = "memcheck",
    case_index: int = 0,
    timeout_s: float = 300,
    suite: str = "paper",
) -> str:
    """compute-sanitizer's report (its last lines) for the calls of ``impl`` on one case of
    ``suite`` (``tool``: memcheck, racecheck, initcheck or synccheck)."""
    import subprocess
    import sys

    from ..bench.client import worker_env

    exe = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not Path(exe).exists():
        return "(compute-sanitizer not found)"
    work = Path(tempfile.mkdtemp(prefix="cudamaster-sanitize-"))
    try:
        spec = target_spec(task, variant, impl, arch, _case(task, suite, case_index), work)
        spec.write(work / "target.json")
        cmd = [exe, "--tool", tool, "--print-limit", "20", sys.executable, "-m",
               "cudamaster.profile.target", str(work / "target.json")]  # fmt: skip
        try:
            # a session of its own: a Ctrl-C at the terminal stops the caller, not the check
            proc = subprocess.run(cmd, capture_output=True, text=True, env=worker_env(),
                                  timeout=timeout_s, check=False,
                                  start_new_session=True)  # fmt: skip
        except subprocess.TimeoutExpired:
            return f"(compute-sanitizer {tool} timed out after {timeout_s:.0f} s)"
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "=========" in ln]
        return "\n".join(lines[-40:]) or f"(compute-sanitizer {tool} found nothing)"
    finally:
        shutil.rmtree(work, ignore_errors=True)
