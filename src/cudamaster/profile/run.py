"""Profile one implementation on one case, classify it and summarise it; calibrate thresholds."""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..bench.evaluate import Impl, ImplResult, prepare
from ..bench.inputs import case_seed, make_inputs
from ..dtypes import concrete
from ..errors import UserError
from ..tasks import Task
from . import classify
from .ncu import ProfileResult, run_ncu
from .summary import MODES, Summary, render

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


def profile(
    task: Task,
    variant: str,
    impl: Impl,
    arch: str,
    case_index: int = -1,
    suite: str = "paper",
    out_dir: Path | None = None,
    device_uuid: str | None = None,
) -> ProfileReport:
    """ncu metrics of ``impl`` on one case (default: the suite's last), with summaries."""
    cases = task.cases(suite)
    try:
        case = cases[case_index]
    except IndexError:
        raise UserError(f"{task.name} {suite} has cases 0..{len(cases) - 1}") from None
    pre = ImplResult(impl.label, str(impl.source))
    prepare(impl, arch, task.symbol(variant), pre)
    if pre.verdict != "pending":
        raise UserError(pre.detail)
    assert pre.build is not None
    thresholds = classify.load(device_uuid) if device_uuid else classify.DEFAULT
    work = Path(tempfile.mkdtemp(prefix="cudamaster-profile-"))
    try:
        inputs = make_inputs(task, case, variant, case_seed(task.name, variant, case, 0, 0))
        inputs.write(work / "set0")
        args = [
            {"name": a.name, "role": a.role_for(variant), "dtype": concrete(a.dtype, variant),
             "nbytes": inputs.nbytes.get(a.name, 0)}
            for a in task.spec.args
        ]  # fmt: skip
        spec = {
            "library": str(pre.build.library), "symbol": task.symbol(variant), "args": args,
            "dir": str(work), "nsets": 1, "scalars": [inputs.call_scalars],
            "out": str(work / "out"),
        }  # fmt: skip
        keep = out_dir or work / "ncu"
        result = run_ncu(spec, keep)
    finally:
        for sub in ("set0", "out"):
            shutil.rmtree(work / sub, ignore_errors=True)
        if out_dir is not None:
            shutil.rmtree(work, ignore_errors=True)
    report = ProfileReport(task.name, variant, case.index, case.label, result, thresholds)
    if result.ok:
        report.summaries = {m: render(result.aggregate, m, thresholds) for m in MODES}
        report.bottleneck = report.summaries["filtered"].bottleneck
    return report


def calibrate_from(reports: list[ProfileReport]) -> classify.Thresholds:
    """Otsu thresholds from the aggregates of profiled baselines (failed profiles are skipped)."""
    samples = [r.result.aggregate for r in reports if r.result.ok]
    if len(samples) < 2:
        raise UserError("calibration needs at least two successful baseline profiles")
    return classify.calibrate(samples)
