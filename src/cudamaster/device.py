"""Device facts and measured ceilings, cached per GPU (by UUID)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from .bench.build import build, cache_dir, nvcc_version
from .bench.client import worker_env
from .errors import UserError
from .gpus import NO_GPU, Gpu, nvidia_smi, pin, select

log = logging.getLogger(__name__)
PEAKS_SOURCE = Path(__file__).parent / "csrc" / "peaks.cu"


@dataclass
class DeviceFacts:
    """What the speed-of-light fraction and the reports need to know about the GPU."""

    name: str
    uuid: str
    driver: str
    nvcc: str
    compute_capability: str
    sm_count: int
    l2_bytes: int
    memory_mib: int
    copy_gbs: float  # measured: bytes read + written per second, device-to-device
    fp32_tflops: float  # measured: cuBLAS SGEMM 8192^3
    bf16_tflops: float  # measured: cuBLAS GemmEx BF16 in, FP32 accumulate, 8192^3
    shared_per_sm: int  # bytes of shared memory per SM
    shared_per_block: int  # bytes of shared memory one block may opt in to
    registers_per_sm: int  # 32-bit registers per SM
    threads_per_sm: int  # resident threads per SM, at most
    # measured: an empty kernel's launch and device synchronize, timed as the harness times a
    # call (events around the call and the synchronize): no implementation can be faster
    launch_floor_us: float

    @property
    def arch(self) -> str:
        return nvcc_arch(self.compute_capability)

    def peak_gflops(self, kind: str) -> float:
        return (self.bf16_tflops if kind == "tensor" else self.fp32_tflops) * 1e3


def _smi(index: int = 0) -> dict[str, str]:
    if os.environ.get("CUDA_VISIBLE_DEVICES", "0").strip() in ("", "-1", "none", "NoDevFiles"):
        raise UserError(f"{NO_GPU}: CUDA_VISIBLE_DEVICES hides every GPU")
    fields = "name,uuid,driver_version,compute_cap,memory.total"
    lines = nvidia_smi(f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-i", str(index))
    name, uuid, driver, cc, mem = (x.strip() for x in lines[0].split(","))
    return {"name": name, "uuid": uuid, "driver": driver, "cc": cc.replace(".", ""), "mem": mem}


#: Compute capabilities whose arch-specific target is built instead of the portable one: on
#: Hopper, sm_90a makes wgmma, TMA (cp.async.bulk.tensor) and setmaxnreg available.
ARCH_SPECIFIC = frozenset({"90"})


def nvcc_arch(cc: str) -> str:
    """The -arch every build on a GPU of compute capability ``cc`` ("90") uses: sm_90a on
    Hopper, else sm_XY (the GPU's own)."""
    return f"sm_{cc}a" if cc in ARCH_SPECIFIC else f"sm_{cc}"


def detect_arch() -> str:
    """The -arch for GPU 0 (nvcc_arch)."""
    return nvcc_arch(_smi()["cc"])


def build_arch() -> str:
    """nvcc's target for a build that may happen without a GPU: $CUDAMASTER_ARCH, else the
    GPU's, else sm_90a (a machine without a GPU builds and checks for Hopper)."""
    if os.environ.get("CUDAMASTER_ARCH"):
        return os.environ["CUDAMASTER_ARCH"]
    try:
        return detect_arch()
    except UserError:
        return "sm_90a"


_PROBE = r"""
import ctypes, json, sys
import statistics
from cudamaster.bench import cudart as cu
rt = cu.CudaRuntime(); rt.set_device(0)
lib = ctypes.CDLL(sys.argv[1])
bw, g32, g16 = ctypes.c_double(), ctypes.c_double(), ctypes.c_double()
codes = [lib.cm_copy_bandwidth(ctypes.c_size_t(1 << 30), 20, ctypes.byref(bw)),
         lib.cm_gemm_rate(0, 8192, 10, ctypes.byref(g32)),
         lib.cm_gemm_rate(1, 8192, 20, ctypes.byref(g16))]
e0, e1 = rt.event(), rt.event()
launch, times = lib.cm_empty_launch, []
for i in range(550):  # as bench.worker times a call: events around the call and a synchronize
    rt.synchronize()
    rt.lib.cudaEventRecord(e0, None); launch(); rt.lib.cudaDeviceSynchronize()
    rt.lib.cudaEventRecord(e1, None)
    if i >= 50:
        times.append(rt.elapsed_ms(e0, e1))
rt.last_error()
a = rt.attribute
print(json.dumps({"codes": codes, "copy_gbs": bw.value, "fp32_tflops": g32.value,
                  "bf16_tflops": g16.value, "sm_count": a(cu.ATTR_SM_COUNT),
                  "l2_bytes": a(cu.ATTR_L2_BYTES), "shared_per_sm": a(cu.ATTR_SHARED_PER_SM),
                  "shared_per_block": a(cu.ATTR_SHARED_PER_BLOCK_OPTIN),
                  "registers_per_sm": a(cu.ATTR_REGISTERS_PER_SM),
                  "threads_per_sm": a(cu.ATTR_MAX_THREADS_PER_SM),
                  "launch_floor_us": 1e3 * statistics.median(times)}))
"""


def _measure(arch: str) -> dict:
    lib = build(PEAKS_SOURCE, arch, links=("cublas",)).library
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(lib)],
        capture_output=True,
        text=True,
        env=worker_env(),
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"measuring the device failed: {tail}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    if any(data.pop("codes")):
        raise UserError("measuring the device failed: a CUDA or cuBLAS call returned an error")
    return data


def facts(refresh: bool = False, gpu: Gpu | None = None) -> DeviceFacts:
    """Facts for GPU 0 (or gpu): read from the cache, or measured (seconds) and cached."""
    smi = _smi(gpu.index if gpu else 0)
    path = cache_dir() / f"device-{smi['uuid']}.json"
    if path.exists() and not refresh:
        data = json.loads(path.read_text())
        known = {f.name for f in fields(DeviceFacts)}
        if data.get("nvcc") == nvcc_version() and known <= data.keys():
            return DeviceFacts(**{k: v for k, v in data.items() if k in known})
    log.info("measuring %s (copy bandwidth, GEMM rates)", smi["name"])
    with pin(gpu):  # the probe runs on that GPU alone
        measured = _measure(nvcc_arch(smi["cc"]))
    result = DeviceFacts(
        name=smi["name"],
        uuid=smi["uuid"],
        driver=smi["driver"],
        nvcc=nvcc_version(),
        compute_capability=smi["cc"],
        memory_mib=int(float(smi["mem"])),
        **measured,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(result), indent=2))
    return result


def targets(spec: str | None) -> tuple[list[Gpu], dict[str, DeviceFacts]]:
    """The GPUs a --gpus option names and each one's facts, keyed by UUID (each measured on
    itself, all at once). Without --gpus: the default GPU, unpinned (CUDA_VISIBLE_DEVICES as
    the user set it), under the key ""."""
    if spec is None:
        device = facts()
        return [Gpu.default(device.name)], {"": device}
    chosen = select(spec)
    with ThreadPoolExecutor(len(chosen)) as pool:
        measured = list(pool.map(lambda g: facts(gpu=g), chosen))
    return chosen, {g.uuid: d for g, d in zip(chosen, measured, strict=True)}
