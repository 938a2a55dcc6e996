"""Timing honesty: A/A speedups near 1, and a harness overhead of a few microseconds."""

import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cudamaster.bench import protocol
from cudamaster.bench.build import build
from cudamaster.bench.client import WorkerClient, worker_env
from cudamaster.bench.evaluate import Evaluator, Impl
from cudamaster.bench.inputs import make_inputs
from cudamaster.tasks import get_task

pytestmark = pytest.mark.gpu
OVERHEAD = Path(__file__).resolve().parents[1] / "fixtures" / "overhead"


@pytest.mark.parametrize(
    ("op", "suite"), [("vector_add", "large"), ("matrix_mul", "paper"), ("softmax", "paper")]
)
def test_baseline_against_itself_gives_speedups_near_one(op, suite, arch, record):
    task = get_task(op)
    src = task.source("baseline", "fp32")
    report = Evaluator(task, "fp32", suite, arch).run(
        [Impl("baseline", src, trusted=True), Impl("candidate", src)]
    )
    a, b = report.impl("baseline"), report.impl("candidate")
    ratios = [
        ca.cold.median_ms / cb.cold.median_ms for ca, cb in zip(a.cases, b.cases, strict=True)
    ]
    spreads = [max(ca.cold.spread, cb.cold.spread) for ca, cb in zip(a.cases, b.cases, strict=True)]
    record(
        f"aa-{op}-{suite}",
        {"ratios": ratios, "spreads": spreads, "max_abs_dev": max(abs(r - 1) for r in ratios)},
    )
    assert all(abs(r - 1) < 0.05 for r in ratios), ratios


def _time_through_worker(label: str, lib: Path, case_dir: Path, ev: Evaluator, sets) -> dict:
    w = WorkerClient(label)
    try:
        w.request(60, protocol.Init(device=0))
        assert w.request(60, protocol.Load(str(lib), "vector_add", ev.arg_specs)).ok
        specs = tuple(replace(a, nbytes=sets[0].nbytes.get(a.name, 0)) for a in ev.arg_specs)
        scalars = tuple(tuple(s.call_scalars) for s in sets)
        w.request(
            60, protocol.Setup(str(case_dir), 2, specs, scalars, str(case_dir / f"out-{label}"))
        )
        cold = w.request(120, protocol.Time(300, "cold", (0, 1))).times_ms
        hot = w.request(120, protocol.Time(300, "hot", (0, 1))).times_ms
    finally:
        w.close()
    return {
        "cold_us": float(np.median(cold[20:]) * 1e3),
        "hot_us": float(np.median(hot[20:]) * 1e3),
    }


def test_harness_overhead_is_a_few_microseconds(arch, record):
    task = get_task("vector_add")
    ev = Evaluator(task, "fp32", "paper", arch)
    case = task.cases("paper")[0]
    sets = [make_inputs(task, case, "fp32", s) for s in (1, 2)]
    with tempfile.TemporaryDirectory() as tmp:
        for i, s in enumerate(sets):
            s.write(Path(tmp) / f"set{i}")
        noop = _time_through_worker(
            "noop", build(OVERHEAD / "noop.cu", arch).library, Path(tmp), ev, sets
        )
        empty_lib = build(OVERHEAD / "empty_kernel.cu", arch).library
        empty = _time_through_worker("empty", empty_lib, Path(tmp), ev, sets)
    probe = (
        "import ctypes, sys; f = ctypes.CDLL(sys.argv[1]).raw_launch_sync_us; "
        "f.restype = ctypes.c_double; print(f(2000))"
    )
    raw = float(
        subprocess.run(
            [sys.executable, "-c", probe, str(empty_lib)],
            capture_output=True,
            text=True,
            env=worker_env(),
            check=True,
        ).stdout
    )
    figures = {
        "raw_empty_launch_sync_us": raw,
        "harness_noop": noop,
        "harness_empty_kernel": empty,
        "overhead_on_empty_kernel_us": empty["cold_us"] - raw,
    }
    record("overhead", figures)
    assert noop["cold_us"] <= raw + 5.0
    assert empty["cold_us"] - raw <= 5.0


BURN = "import cudamaster, numpy as np\na = np.ones(1 << 24)\nwhile True:\n    a *= 1.0000001\n"


def _medians(task, suite: str, cases: list[int], arch: str) -> list[float]:
    src = task.source("baseline", "fp32")
    report = Evaluator(task, "fp32", suite, arch, cases=cases).run(
        [Impl("baseline", src, trusted=True)]
    )
    return [c.cold.median_ms for c in report.impl("baseline").cases]


@pytest.mark.parametrize(("op", "suite", "cases"), [
    ("matrix_mul", "paper", [2, 3]), ("softmax", "paper", [3, 7]), ("prefix_sum", "paper", [4]),
])  # fmt: skip
def test_long_timings_hold_while_every_preparation_core_is_busy(op, suite, cases, arch, record):
    # Preparation runs beside timed calls of SHORT_CALL_S or more, on cores of its own
    # (cudamaster.cpus): saturating all of those cores with memory-heavy numpy work must not move
    # the medians of such calls (quiet, loaded, quiet again; the loaded median against the mean
    # of the quiet ones). Shorter calls are timed with the helper stopped (a test on the CPU):
    # this load added 3-4 us to a 12 us vector_add, 30%.
    from cudamaster import cpus

    split = cpus.split()
    if split is None:
        pytest.skip("this host has too few cores for a split: preparation is stopped instead")
    task = get_task(op)
    quiet = _medians(task, suite, cases, arch)
    burners = [
        subprocess.Popen(
            [sys.executable, "-c", BURN], env={**worker_env(), **cpus.env(split.helpers)}
        )
        for _ in split.helpers
    ]
    try:
        loaded = _medians(task, suite, cases, arch)
    finally:
        for p in burners:
            p.kill()
            p.wait()
    again = _medians(task, suite, cases, arch)
    ratios = [b / ((a + c) / 2) for a, b, c in zip(quiet, loaded, again, strict=True)]
    figures = {"quiet_ms": quiet, "loaded_ms": loaded, "quiet_again_ms": again}
    record(f"loaded-{op}-{suite}", {**figures, "loaded_over_quiet": ratios, "cpus": split})
    assert all(abs(r - 1) < 0.05 for r in ratios), ratios
