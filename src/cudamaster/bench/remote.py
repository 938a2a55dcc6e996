"""Jobs as self-contained functions, for Ray tasks on other hosts (cudamaster.ray_pool ships
them): each measures the GPU Ray gave it, does its work there and returns what this host keeps.
The local bench and calibration run the same steps in place."""

from __future__ import annotations

import os
from typing import Any

from ..device import DeviceFacts, facts
from ..errors import UserError
from ..gpus import select
from ..profile.run import ProfileReport, profile
from ..report import report_json
from ..tasks import get_task
from .evaluate import EvalReport, Evaluator, Impl, standard_impls


def assigned_gpu() -> DeviceFacts:
    """The facts of the GPU Ray gave this task. nvidia-smi ignores CUDA_VISIBLE_DEVICES, so the
    physical index Ray set there is looked up; the workers this task starts see only that GPU."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return facts(gpu=select(first)[0]) if first.isdigit() else facts()


def bench_job(job: tuple[str, str, str, int]) -> tuple[EvalReport, dict[str, Any], DeviceFacts]:
    """(operator, variant, suite, base seed) -> the report, its JSON and the GPU's facts."""
    name, variant, suite, seed = job
    task = get_task(name)
    device = assigned_gpu()
    report = Evaluator(task, variant, suite, device.arch, base_seed=seed).run(
        standard_impls(task, variant)
    )
    return report, report_json(task, report, device), device


def profile_job(job: tuple[str, str]) -> tuple[ProfileReport, DeviceFacts]:
    """(operator, variant) -> the baseline's profile on the last paper case, and the GPU's facts
    (calibration: the thresholds are computed where the profiles are gathered)."""
    name, variant = job
    task = get_task(name)
    device = assigned_gpu()
    base = task.source("baseline", variant)
    if base is None:
        raise UserError(f"{task.folder} has no baseline for {variant}")
    impl = Impl("baseline", base, trusted=True)
    return profile(task, variant, impl, device.arch, device=device), device
