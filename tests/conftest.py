"""Shared fixtures; GPU tests are skipped without a GPU (and fail instead under
CUDAMASTER_REQUIRE_GPU=1, so that a device run can never skip them silently)."""

from __future__ import annotations

import fcntl
import functools
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cudamaster.bench.build import build_cache_dir, nvcc_version, vendor_dirs

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"


def one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """The command stopped with exit 2 and one line on stderr, "error: ...", holding every
    needle (no traceback); returns the line."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def eventually(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Whether ``condition`` holds within ``timeout_s`` (polled): for what another process
    does soon, where a fixed sleep would be too short on a loaded machine."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@functools.cache
def gpu_available() -> bool:
    if not shutil.which("nvidia-smi"):
        return False
    proc = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return proc.returncode == 0 and "GPU" in proc.stdout


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """With pytest-xdist installed (the test extra), tests run in parallel unless -n says
    otherwise: a process per core (`-n auto`), each file's tests in one process (--dist
    loadfile: a module's fixtures, such as tests/test_build.py's builds and tests/test_ray.py's
    clusters, are set up once). Where a GPU is visible they run in one process, as without
    pytest-xdist: GPU tests time kernels and must not share the host."""
    if hasattr(config, "workerinput") or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a test process of pytest-xdist's: it starts none of its own
    if not hasattr(config.option, "numprocesses") or config.option.numprocesses is not None:
        return  # pytest-xdist absent (or -p no:xdist), or -n given
    if config.option.collectonly or config.option.usepdb:
        return
    config.option.numprocesses = "auto"
    if config.option.dist == "no":
        config.option.dist = "loadfile"


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, which may be absent
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: no workers where a GPU is visible, else pytest-xdist's own count."""
    return 0 if gpu_available() else None


#: The terminal size variables as pytest was started with them: pytest-xdist's test processes
#: start with COLUMNS=80 and LINES=24, which would change what the commands they run print.
TERMINAL_ENV = {name: os.environ.get(name) for name in ("COLUMNS", "LINES")}


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    node.workerinput["terminal_env"] = TERMINAL_ENV


def pytest_configure(config):
    for name, value in getattr(config, "workerinput", {}).get("terminal_env", {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


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
    """Make cuBLAS/cuSPARSE/cuFFT/cuDNN headers available, fetching them once if needed: into
    the cache (bench/build.py's vendor_dirs()), where every checkout finds them."""
    from cudamaster.bench.build import VENDOR_HEADERS, vendor_dirs, vendor_include_dirs

    def have_all() -> bool:
        dirs = [*vendor_include_dirs(), Path("/usr/local/cuda/include")]
        return all(any((d / h).exists() for d in dirs) for h in VENDOR_HEADERS)

    if not have_all():
        dest = vendor_dirs()[-1]
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(dest.parent / f"{dest.name}.lock", "w") as lock:  # parallel test processes
            fcntl.flock(lock, fcntl.LOCK_EX)  # fetch them once
            if not have_all():
                subprocess.run(["bash", str(ROOT / "scripts" / "vendor-headers.sh"), str(dest)],
                               check=True, cwd=ROOT)  # fmt: skip
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
           "CUDAMASTER_COMPARER": str(comparer),
           # builds are shared with every other test (they are keyed on their contents)
           "CUDAMASTER_BUILD_CACHE": str(build_cache_dir()),
           "CUDAMASTER_VENDOR": os.pathsep.join(str(d) for d in vendor_dirs())}  # fmt: skip
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


@pytest.fixture
def fake_gpu(tmp_path):
    return fake_gpu_env(tmp_path)


#: A real model's transcript: the exchange directory and manifest of an optimizer run whose every
#: prompt a model answered from the prompt file alone (tests/fixtures/transcripts/README.md).
TRANSCRIPT = Path(__file__).parent / "fixtures" / "transcripts" / "ev-chain.tar.xz"


@pytest.fixture(scope="session")
def real_transcript(tmp_path_factory) -> tuple[Path, dict]:
    """The recorded run unpacked: (its exchange directory, its run.json)."""
    import tarfile

    root = tmp_path_factory.mktemp("transcript")
    with tarfile.open(TRANSCRIPT) as tar:
        tar.extractall(root, filter="data")
    return root / "exchange", json.loads((root / "run.json").read_text())
