#!/usr/bin/env python3
"""What the worker sandbox (bench/sandbox.py) does on a GPU machine, measured: one JSON file.

Usage (from the repository root, on the GPU machine, as the workers run):
    PYTHONPATH=$PWD/src python3 scripts/sandbox-probe.py OUT.json

Sections (each written as soon as it is done; a section that fails records its error):
- ``kernel``: the kernel release, seccomp and the Landlock ABI, what a worker will enforce on a
  candidate and the gaps (as every report's ``device.sandbox``/``sandbox_gaps`` says);
- ``in_process``: in a process that made a CUDA context first, as a worker does: the threads
  that existed when the candidate profile was applied, the time the startup layer and the
  candidate profile took, a system call's cost before and after (the seccomp filter runs on
  every call), whether CUDA still allocates, copies and launches afterwards, and whether a file
  open is refused from the main thread and from a CUDA host-function callback thread (which
  may predate the profile: the Landlock TSYNC gap);
- ``worker``: the repository's own worker through WorkerClient, sandbox on and off: Init,
  Load and Setup times, a checked vector_add call on 2^20 elements (its output compared with
  A + B), the cold and hot medians of 200 timed calls, for the good candidate (full profile),
  the baseline and the cuBLAS library baseline (trusted profile);
- ``evaluation``: vector_add's baseline, library baseline and a good candidate through the
  Evaluator, sandbox on and off, twice each in turn: wall time and per-implementation medians.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cudamaster.bench import sandbox  # noqa: E402

N = 1 << 20

CALLBACK_CU = r"""
#include <cerrno>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>
struct Probe { const char* path; int err; long tid; };
static void CUDART_CB try_open(void* p) {
    Probe* q = (Probe*)p;
    int fd = open(q->path, O_RDONLY);
    q->err = fd < 0 ? errno : 0;
    if (fd >= 0) close(fd);
    q->tid = syscall(SYS_gettid);
}
__global__ void fill(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 2.0f * i;
}
// errno of open(path) made here (via_callback 0) or in a CUDA host-function callback (1)
extern "C" int probe_open(const char* path, int via_callback, long* tid) {
    Probe q{path, -1, 0};
    if (via_callback) { cudaLaunchHostFunc(0, try_open, &q); cudaStreamSynchronize(0); }
    else try_open(&q);
    *tid = q.tid;
    return q.err;
}
// a launch and a copy back: 0 where x[i] = 2 i came back
extern "C" int probe_kernel(int n) {
    float* d = nullptr; float h[4] = {0, 0, 0, 0};
    if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) return 1;
    fill<<<(n + 255) / 256, 256>>>(d, n);
    if (cudaMemcpy(h, d + 1, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess) return 2;
    cudaFree(d);
    return (h[0] == 2.0f && h[3] == 8.0f) ? 0 : 3;
}
"""

IN_PROCESS = r"""
import ctypes, json, os, sys, time
from pathlib import Path
from cudamaster.bench import sandbox
from cudamaster.bench.cudart import CudaRuntime
lib_path, root = sys.argv[1], Path(sys.argv[2])
out = {}
def syscall_ns(n=200000):
    t = time.perf_counter_ns()
    for _ in range(n):
        os.getppid()
    return (time.perf_counter_ns() - t) / n
c = sandbox.Confinement()
t = time.perf_counter(); c.startup(); out["startup_ms"] = (time.perf_counter() - t) * 1e3
rt = CudaRuntime(); rt.set_device(0); keep = rt.malloc(1 << 20)  # a context, as Init makes
out["threads_at_confine"] = len(os.listdir("/proc/self/task"))
out["getppid_ns_before"] = syscall_ns()
t = time.perf_counter()
c.confine(sandbox.Profile.UNTRUSTED, [Path(lib_path)], root)
out["confine_ms"] = (time.perf_counter() - t) * 1e3
out["getppid_ns_after"] = syscall_ns()
out["features"] = c.features
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
out["status"] = {k: status[k].strip() for k in ("NoNewPrivs", "Seccomp", "CapEff", "CapBnd")}
lib = ctypes.CDLL(lib_path)
out["kernel_after_confine"] = lib.probe_kernel(1 << 20)  # 0: launch and copy worked
tid = ctypes.c_long(0)
(root / "inside").write_text("x")
opens = {}
for name, path in [("root_file", str(root / "inside")), ("etc_hostname", "/etc/hostname"),
                   ("parent_environ", f"/proc/{os.getppid()}/environ")]:
    for via in (0, 1):
        err = lib.probe_open(path.encode(), via, ctypes.byref(tid))
        opens[f"{name}{'_callback' if via else ''}"] = {"errno": err, "tid": tid.value}
out["opens"] = opens
out["main_tid"] = __import__("threading").get_native_id()
print(json.dumps(out))
"""


def kernel() -> dict[str, Any]:
    support = sandbox.kernel_support()
    features, gaps = sandbox.plan(support, on=True)
    return {"release": os.uname().release, "machine": os.uname().machine,
            "support": support.__dict__, "enforced": features, "gaps": gaps}  # fmt: skip


def in_process(arch: str) -> dict[str, Any]:
    from cudamaster.bench.build import build

    folder = Path(tempfile.mkdtemp(prefix="cudamaster-probe-"))
    source = folder / "callback.cu"
    source.write_text(CALLBACK_CU)
    lib = build(source, arch).library
    root = folder / "root"
    root.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **sandbox.WORKER_ENV}
    runs = []
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-c", IN_PROCESS, str(lib), str(root)],
                              capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
        if proc.returncode != 0:
            return {"returncode": proc.returncode, "stderr": proc.stderr[-3000:]}
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    first = runs[0]
    for key in ("startup_ms", "confine_ms", "getppid_ns_before", "getppid_ns_after"):
        first[key] = {
            "runs": [r[key] for r in runs],
            "median": statistics.median(r[key] for r in runs),
        }
    return first


def _case(root: Path, nsets: int = 3) -> tuple[Path, list[Any]]:
    import numpy as np

    case = root / "r0"
    rng = np.random.default_rng(0)
    sets = []
    for s in range(nsets):
        (case / f"set{s}").mkdir(parents=True)
        a, b = rng.standard_normal(N, dtype=np.float32), rng.standard_normal(N, dtype=np.float32)
        a.tofile(case / f"set{s}" / "A.bin")
        b.tofile(case / f"set{s}" / "B.bin")
        sets.append(a + b)
    return case, sets


def worker(arch: str, on: bool) -> dict[str, Any]:
    """Each implementation in its own worker: request times, the checked output, timed calls."""
    import numpy as np

    from cudamaster.bench.build import build
    from cudamaster.bench.client import WorkerClient
    from cudamaster.bench.comparer import comparer_library
    from cudamaster.bench.evaluate import Impl, standard_impls
    from cudamaster.bench.protocol import ArgSpec, Init, Load, Run, Setup, Time
    from cudamaster.tasks import get_task

    os.environ[sandbox.ENV] = "1" if on else "0"
    impls = standard_impls(get_task("vector_add"), "fp32")
    impls.append(Impl("candidate", ROOT / "tests" / "fixtures" / "good" / "vector_add_grid.cu"))
    root = Path(tempfile.mkdtemp(prefix="cudamaster-probe-"))
    case, expected = _case(root)
    args = (ArgSpec("A", "input", "f32", 4 * N), ArgSpec("B", "input", "f32", 4 * N),
            ArgSpec("C", "output", "f32", 4 * N), ArgSpec("N", "scalar", "i32", 0))  # fmt: skip
    out: dict[str, Any] = {}
    for impl in impls:
        library = build(impl.source, arch, impl.links).library
        client = WorkerClient(f"probe-{impl.label}")
        row: dict[str, Any] = {"trusted": impl.trusted}
        try:
            t = time.perf_counter()
            info = client.request(120, Init(0, comparer_library(arch)))
            row["init_s"] = time.perf_counter() - t
            row["planned"], row["gaps"] = info.sandbox, info.sandbox_gaps
            t = time.perf_counter()
            loaded = client.request(60, Load(str(library), "vector_add", args, impl.trusted))
            row["load_s"], row["after_load"] = time.perf_counter() - t, loaded.sandbox
            t = time.perf_counter()
            setup = Setup(str(case), 3, args, ((N,),) * 3, str(root / f"out-{impl.label}"))
            reply = client.request(120, setup)
            row["setup_s"], row["after_setup"] = time.perf_counter() - t, reply.sandbox
            ran = client.request(60, Run(0))
            offset, nbytes = reply.layout["C"]
            got = np.fromfile(ran.outputs.path, dtype=np.uint8)[offset : offset + nbytes]
            row["output_right"] = bool(np.array_equal(got.view(np.float32), expected[0]))
            for mode in ("cold", "hot"):
                times = client.request(300, Time(200, mode, (0, 1))).times_ms
                row[f"{mode}_median_ms"] = statistics.median(times[5:])
        except Exception as exc:  # recorded; the probe goes on
            row["error"] = f"{type(exc).__name__}: {exc}"
            row["stderr"] = client.stderr_tail(20)
        finally:
            client.close()
        out[impl.label] = row
    return out


def evaluation(arch: str) -> dict[str, Any]:
    from cudamaster.bench.evaluate import Evaluator, Impl, standard_impls
    from cudamaster.bench.timing import TimingPolicy
    from cudamaster.tasks import get_task

    task = get_task("vector_add")
    policy = TimingPolicy(min_samples=20, max_samples=60, time_cap_s=1.0)
    runs = []
    for on in (True, False, True, False):
        os.environ[sandbox.ENV] = "1" if on else "0"
        impls = standard_impls(task, "fp32")
        impls.append(Impl("candidate", ROOT / "tests" / "fixtures" / "good" / "vector_add_grid.cu"))
        t = time.perf_counter()
        report = Evaluator(task, "fp32", "paper", arch, policy=policy, cases=[0, 4]).run(impls)
        runs.append({
            "sandbox": on, "wall_s": time.perf_counter() - t,
            "device_sandbox": report.device.get("sandbox"),
            "verdicts": {i.label: i.verdict for i in report.impls},
            "cold_median_ms": {i.label: [c.cold.median_ms if c.cold else None for c in i.cases]
                               for i in report.impls},
        })  # fmt: skip
    return {"runs": runs}


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    path = Path(sys.argv[1])
    results: dict[str, Any] = {}

    def section(name: str, fn: Callable[[], Any]) -> None:
        t = time.perf_counter()
        try:
            results[name] = fn()
        except Exception:  # recorded; the probe goes on
            results[name] = {"error": traceback.format_exc(limit=6)}
        results.setdefault("seconds", {})[name] = round(time.perf_counter() - t, 2)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=1, default=str))
        print(f"{name}: {json.dumps(results[name], default=str)[:2000]}", flush=True)

    section("kernel", kernel)
    from cudamaster.device import detect_arch

    arch = detect_arch()
    results["arch"] = arch
    section("in_process", lambda: in_process(arch))
    section("worker_sandbox_on", lambda: worker(arch, True))
    section("worker_sandbox_off", lambda: worker(arch, False))
    section("evaluation", lambda: evaluation(arch))
    os.environ.pop(sandbox.ENV, None)
    print(textwrap.shorten(f"written to {path}", 200))
    return 0


if __name__ == "__main__":
    sys.exit(main())
