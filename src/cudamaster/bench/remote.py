"""One bench job as a self-contained function, for a Ray task on another host: it measures
that host's GPU, evaluates the baseline and library there and returns everything the run
directory keeps (cudamaster.ray_pool ships it; the local bench runs the same steps in place)."""

from __future__ import annotations

from typing import Any

from ..device import DeviceFacts, targets
from ..report import report_json
from ..tasks import get_task
from .evaluate import EvalReport, Evaluator, standard_impls


def bench_job(job: tuple[str, str, str, int]) -> tuple[EvalReport, dict[str, Any], DeviceFacts]:
    """(operator, variant, suite, base seed) -> the report, its JSON and the GPU's facts."""
    name, variant, suite, seed = job
    task = get_task(name)
    _, devices = targets(None)  # the GPU Ray gave this task: the only one it sees
    device = devices[""]
    report = Evaluator(task, variant, suite, device.arch, base_seed=seed).run(
        standard_impls(task, variant)
    )
    return report, report_json(task, report, device), device
