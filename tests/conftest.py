"""Shared fixtures; GPU tests are skipped without a GPU (and fail instead under
CUDAMASTER_REQUIRE_GPU=1, so that a device run can never skip them silently)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"


def gpu_available() -> bool:
    if not shutil.which("nvidia-smi"):
        return False
    proc = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return proc.returncode == 0 and "GPU" in proc.stdout


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    require = os.environ.get("CUDAMASTER_REQUIRE_GPU") == "1"
    for item in items:
        if "gpu" in item.keywords:
            if require:
                item.add_marker(pytest.mark.usefixtures("_fail_without_gpu"))
            else:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU (run on the device)"))


@pytest.fixture
def _fail_without_gpu():
    pytest.fail("CUDAMASTER_REQUIRE_GPU=1 but no GPU is visible")


@pytest.fixture(scope="session")
def vendor_headers() -> None:
    """Make cuBLAS/cuSPARSE/cuDNN headers available, fetching them once if needed."""
    from cudamaster.bench.build import VENDOR_HEADERS, vendor_include_dirs

    def have_all() -> bool:
        dirs = [*vendor_include_dirs(), Path("/usr/local/cuda/include")]
        return all(any((d / h).exists() for d in dirs) for h in VENDOR_HEADERS)

    if not have_all():
        subprocess.run(["bash", str(ROOT / "scripts" / "vendor-headers.sh")], check=True, cwd=ROOT)
    assert have_all(), "vendor headers still missing after scripts/vendor-headers.sh"
