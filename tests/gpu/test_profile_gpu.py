"""Nsight Compute on the GPU: a multi-kernel operator, a crash under the profiler, calibration."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cudamaster.bench.evaluate import Impl
from cudamaster.profile.run import profile
from cudamaster.tasks import get_task

pytestmark = pytest.mark.gpu
WRONG = Path(__file__).resolve().parents[1] / "fixtures" / "wrong"
CORE = (
    "vector_add,dot_product,matrix_mul,spmv_csr,rms_norm,softmax,silu_and_mul,stencil_2d,"
    "prefix_sum,sorting"
)


def _out() -> Path:
    out = Path(os.environ.get("CUDAMASTER_TEST_OUT") or tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)
    return out


def test_every_kernel_of_a_multi_kernel_operator_is_profiled(arch, record):
    task = get_task("rms_norm")  # two kernels: the sum of squares, then the scaling
    keep = Path(tempfile.mkdtemp())
    rep = profile(task, "fp32", Impl("baseline", task.source("baseline", "fp32"), trusted=True),
                  arch, out_dir=keep)  # fmt: skip
    assert rep.result.ok, rep.result.error
    assert len(rep.result.kernels) >= 2, [k.name for k in rep.result.kernels]
    assert Path(rep.result.report).exists()
    f, full = rep.summaries["filtered"], rep.summaries["full"]
    assert f.bottleneck and f.tokens and full.tokens and f.tokens < full.tokens
    shutil.copy(keep / "metrics.csv", _out() / "ncu-rms_norm-fp32.csv")  # a real CSV, for a fixture
    record("profile-rms_norm", {"kernels": [k.name for k in rep.result.kernels],
                                "class": rep.bottleneck, "tokens_filtered": f.tokens,
                                "tokens_full": full.tokens, "wall_s": rep.result.wall_s,
                                "dropped_metrics": rep.result.dropped_metrics,
                                "filtered": f.text})  # fmt: skip


def test_a_kernel_that_crashes_under_the_profiler_gives_a_missing_profile(arch, record):
    task = get_task("vector_add")
    rep = profile(task, "fp32", Impl("candidate", WRONG / "illegal_address.cu"), arch)
    assert not rep.result.ok and rep.result.error
    assert rep.summaries == {}
    record("profile-crash", {"error": rep.result.error, "wall_s": rep.result.wall_s})


def test_calibration_over_the_baselines(record):
    # CUDAMASTER_CALIBRATE_OPS=all: every baseline; CUDAMASTER_CALIBRATE_FROM=calibration.json of
    # a run cut short (carried in the working tree): resumed, keeping its profiles
    ops = os.environ.get("CUDAMASTER_CALIBRATE_OPS", CORE)
    out = _out()
    cmd = [sys.executable, "-m", "cudamaster.cli", "profile", "--calibrate", "--out", str(out)]
    cmd += [] if ops == "all" else ["--ops", ops]
    if earlier := os.environ.get("CUDAMASTER_CALIBRATE_FROM"):
        shutil.copy(earlier, out / "calibration.json")
        cmd.append("--resume")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    (out / "calibration.txt").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "calibration.json").exists()
    record("calibration-stdout", {"stdout": proc.stdout[-2000:]})


def test_compute_sanitizer_reports_an_illegal_write(arch, record):
    from cudamaster.profile.run import sanitize

    task = get_task("vector_add")
    report = sanitize(task, "fp32", Impl("candidate", WRONG / "illegal_address.cu"), arch)
    record("sanitizer", {"report": report[-1500:]})
    assert "Invalid __global__ write" in report or "out of bounds" in report, report[-1500:]


@pytest.mark.parametrize("op", ["vector_add", "softmax", "rms_norm"])
def test_the_profile_command_on_a_baseline(op, record):
    # rms_norm's baseline launches two kernels: each is shown with its share of the time
    baseline = Path(__file__).resolve().parents[2] / "tasks" / op / "baseline.cu"
    proc = subprocess.run([sys.executable, "-m", "cudamaster.cli", "profile", op, str(baseline)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    record(f"profile-cli-{op}", {"returncode": proc.returncode, "stdout": proc.stdout,
                                 "stderr": proc.stderr[-2000:]})  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert "Bottleneck: " in proc.stdout and "tokens;" in proc.stdout
    if op == "rms_norm":
        assert "Kernels: 2 launched" in proc.stdout
