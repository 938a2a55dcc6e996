"""`cudamaster profile` end to end on the CPU: the real profile target (profile/target.py) runs
under a stand-in ncu (tests/fixtures/ncu/fake_ncu.py), with the stand-in nvidia-smi and CUDA
runtime of tests/conftest.py. The target builds the buffers and makes its warm-up and profiled
calls through the worker exactly as on a GPU; only the metrics are a real H200 export."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudamaster.profile.target import TargetSpec

FIXTURES = Path(__file__).parent / "fixtures"
GOOD = FIXTURES / "good" / "vector_add_grid.cu"
FAKE_NCU = FIXTURES / "ncu" / "fake_ncu.py"
pytestmark = pytest.mark.skipif(
    not (shutil.which("gcc") and shutil.which("nvcc")), reason="needs gcc and nvcc"
)

# defines vector_add, but needs a function that nothing defines: the build links (a shared
# library may leave symbols undefined), loading it into the target fails
UNLOADABLE = """
extern "C" void not_defined_anywhere(void);
extern "C" void vector_add(const float* A, const float* B, float* C, int N) {
    not_defined_anywhere();
}
"""


@pytest.fixture
def fake_ncu_env(fake_gpu: dict[str, str]) -> dict[str, str]:
    """The fake GPU's environment with the stand-in ncu first on PATH."""
    bin_dir = Path(fake_gpu["PATH"].split(":", 1)[0])
    ncu = bin_dir / "ncu"
    ncu.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_NCU}" "$@"\n')
    ncu.chmod(0o755)
    return fake_gpu


def profile(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cudamaster.cli", "profile", *args], env=env,
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip


def test_profile_runs_the_target_under_ncu_and_prints_the_bottleneck(fake_ncu_env, tmp_path):
    out = tmp_path / "ncu"
    proc = profile(fake_ncu_env, "vector_add", str(GOOD), "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Bottleneck: memory-latency-bound" in proc.stdout  # the H200 export's class
    assert "Top warp stalls: " in proc.stdout  # the filtered summary
    assert "Kernels: 2 launched" in proc.stdout  # the export has two kernels: each is shown
    assert "(filtered summary: " in proc.stdout and "2 kernel(s)" in proc.stdout
    assert (out / "profile.ncu-rep").exists()
    spec = TargetSpec.read(out / "target.json")  # what the target was given, read as it reads it
    assert spec.load.symbol == "vector_add" and spec.setup.nsets == 1
    assert "Traceback" not in (out / "ncu.log").read_text()  # the target itself ran cleanly


def test_a_target_that_fails_gives_one_line_and_exit_1(fake_ncu_env, tmp_path):
    source = tmp_path / "unloadable.cu"
    source.write_text(UNLOADABLE)
    out = tmp_path / "ncu"
    proc = profile(fake_ncu_env, "vector_add", str(source), "--out", str(out))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("profile missing: "), proc.stdout
    # the target said why, as ncu saw it
    assert "not_defined_anywhere" in (out / "ncu.log").read_text()


def test_a_source_without_the_entry_symbol_is_refused_in_one_line(fake_ncu_env, tmp_path):
    source = tmp_path / "no_entry.cu"
    source.write_text('extern "C" void not_vector_add(float* C) { C[0] = 0.0f; }\n')
    proc = profile(fake_ncu_env, "vector_add", str(source))
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    message = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(message) == 1 and 'does not define extern "C" vector_add' in message[0]
