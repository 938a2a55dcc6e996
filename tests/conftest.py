"""Shared fixtures; GPU tests are skipped without a GPU (and fail instead under
CUDAMASTER_REQUIRE_GPU=1, so that a device run can never skip them silently)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cudamaster.bench.build import nvcc_version

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


#: What a device probe reports beyond name, bandwidth and GEMM rates: an H100's figures.
DEVICE_EXTRAS = {"shared_per_sm": 233472, "shared_per_block": 232448, "registers_per_sm": 65536,
                 "threads_per_sm": 2048, "launch_floor_us": 2.5}  # fmt: skip


def fake_gpu_env(tmp_path: Path) -> dict[str, str]:
    """An environment in which cudamaster sees two fake GPUs: a stand-in nvidia-smi, cached
    device facts and a CPU stand-in for libcudart on which kernel launches do nothing."""
    fake = FIXTURES / "fake_cuda"
    runtime = tmp_path / "libcudart.so.13"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wl,-soname,libcudart.so.13", "-o",
                    str(runtime), str(fake / "fake_cudart.c")], check=True)  # fmt: skip
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(  # two GPUs: listed by index, described one at a time with -i
        '#!/bin/sh\ncase "$*" in\n'
        "  *index,uuid,name*) printf '0, GPU-fake-0, Fake GPU\\n1, GPU-fake-1, Fake GPU\\n' ;;\n"
        "  *'-i 1'*) echo 'Fake GPU, GPU-fake-1, 1.0, 9.0, 1024' ;;\n"
        "  *) echo 'Fake GPU, GPU-fake-0, 1.0, 9.0, 1024' ;;\nesac\n"
    )
    smi.chmod(0o755)
    cache = tmp_path / "cache"
    cache.mkdir()
    facts = {"name": "Fake GPU", "uuid": "GPU-fake-0", "driver": "1.0", "nvcc": nvcc_version(),
             "compute_capability": "90", "sm_count": 4, "l2_bytes": 1 << 20, "memory_mib": 1024,
             "copy_gbs": 100.0, "fp32_tflops": 1.0, "bf16_tflops": 2.0,
             **DEVICE_EXTRAS}  # fmt: skip
    (cache / "device-GPU-fake-0.json").write_text(json.dumps(facts))
    (cache / "device-GPU-fake-1.json").write_text(json.dumps({**facts, "uuid": "GPU-fake-1"}))
    comparer = tmp_path / "compare_host.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(comparer),
                    str(fake / "compare_host.c")], check=True)  # fmt: skip
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "CUDAMASTER_CUDART": str(runtime), "CUDAMASTER_CACHE": str(cache),
           "CUDAMASTER_COMPARER": str(comparer)}  # fmt: skip
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


@pytest.fixture
def fake_gpu(tmp_path):
    return fake_gpu_env(tmp_path)
