"""Minimal ctypes binding to the CUDA runtime (libcudart), used by the worker process.

Implementations are built with ``-cudart shared``, so they and this binding share one runtime
instance and one context.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
from pathlib import Path

from ..errors import UserError

ATTR_SM_COUNT = 16
ATTR_L2_BYTES = 38
ATTR_CC_MAJOR = 75
ATTR_CC_MINOR = 76
ATTR_MAX_THREADS_PER_SM = 39
ATTR_SHARED_PER_SM = 81
ATTR_REGISTERS_PER_SM = 82
ATTR_SHARED_PER_BLOCK_OPTIN = 97
MEMCPY_H2D, MEMCPY_D2H, MEMCPY_D2D = 1, 2, 3


def _candidates() -> list[str]:
    names: list[str] = []
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root:
            names += sorted(glob.glob(f"{root}/lib64/libcudart.so.*"), reverse=True)
    for entry in sys.path:
        names += sorted(glob.glob(f"{entry}/nvidia/cu*/lib/libcudart.so.*"), reverse=True)
        names += sorted(glob.glob(f"{entry}/nvidia/cuda_runtime/lib/libcudart.so.*"), reverse=True)
    return [*names, "libcudart.so.13", "libcudart.so.12", "libcudart.so"]


def find_cudart() -> str:
    """The runtime library: $CUDAMASTER_CUDART if set (tests use a CPU stand-in), else the
    toolkit's, else the nvidia wheels', else the loader's."""
    forced = os.environ.get("CUDAMASTER_CUDART")
    for name in [forced] if forced else _candidates():
        try:
            ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
        return name
    raise UserError(
        "CUDA runtime (libcudart.so) not found: install the CUDA toolkit or set CUDA_HOME"
    )


class CudaError(RuntimeError):
    """A CUDA runtime call failed; ``code`` is the cudaError_t."""

    def __init__(self, call: str, code: int, text: str) -> None:
        super().__init__(f"{call} failed: {text} (cudaError {code})")
        self.code = code


HOST_REGISTER_READ_ONLY = 0x08  # cudaHostRegisterReadOnly


class CudaRuntime:
    """The few runtime calls the harness needs, with errors raised as CudaError."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path or find_cudart()
        self.lib = ctypes.CDLL(self.path, mode=ctypes.RTLD_GLOBAL)
        self.lib.cudaGetErrorString.restype = ctypes.c_char_p
        self.lib.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        self.lib.cudaFree.argtypes = [ctypes.c_void_p]
        self.lib.cudaMemcpy.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
        ]
        self.lib.cudaMemsetAsync.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_size_t,
            ctypes.c_void_p,
        ]
        self.lib.cudaMemcpyAsync.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_void_p,
        ]
        self.lib.cudaEventRecord.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.lib.cudaEventSynchronize.argtypes = [ctypes.c_void_p]
        self.lib.cudaEventElapsedTime.argtypes = [
            ctypes.POINTER(ctypes.c_float),
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        self.lib.cudaDeviceGetAttribute.argtypes = [
            ctypes.POINTER(ctypes.c_int),
            ctypes.c_int,
            ctypes.c_int,
        ]

    def check(self, call: str, code: int) -> None:
        if code != 0:
            text = self.lib.cudaGetErrorString(code).decode()
            raise CudaError(call, code, text)

    def device_count(self) -> int:
        n = ctypes.c_int(0)
        self.check("cudaGetDeviceCount", self.lib.cudaGetDeviceCount(ctypes.byref(n)))
        return n.value

    def set_device(self, index: int) -> None:
        self.check("cudaSetDevice", self.lib.cudaSetDevice(index))
        self.check("cudaFree(0)", self.lib.cudaFree(None))

    def attribute(self, attr: int, device: int = 0) -> int:
        v = ctypes.c_int(0)
        self.check(
            "cudaDeviceGetAttribute", self.lib.cudaDeviceGetAttribute(ctypes.byref(v), attr, device)
        )
        return v.value

    def malloc(self, nbytes: int) -> int:
        p = ctypes.c_void_p()
        self.check("cudaMalloc", self.lib.cudaMalloc(ctypes.byref(p), max(nbytes, 1)))
        return p.value or 0

    def free_memory(self) -> int:
        """Bytes of device memory free now (cudaMemGetInfo)."""
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        code = self.lib.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
        self.check("cudaMemGetInfo", code)
        return free.value

    def free(self, ptr: int) -> None:
        self.check("cudaFree", self.lib.cudaFree(ptr))

    def upload_array(self, ptr: int, array) -> None:
        """Copy a contiguous numpy array to the device without an extra host copy."""
        self.check(
            "cudaMemcpy H2D",
            self.lib.cudaMemcpy(ptr, array.ctypes.data, array.nbytes, MEMCPY_H2D),
        )

    def download_into(self, array, ptr: int) -> None:
        self.check(
            "cudaMemcpy D2H",
            self.lib.cudaMemcpy(array.ctypes.data, ptr, array.nbytes, MEMCPY_D2H),
        )

    def register(self, array, read_only: bool = False) -> bool:
        """Page-lock a host array (a shared file mapping) so that copies into or, with
        ``read_only`` (a read-only mapping: cudaHostRegisterReadOnly), out of it run at full
        speed; False where the runtime refuses (nothing is registered then)."""
        fn = getattr(self.lib, "cudaHostRegister", None)
        if fn is None or array.nbytes == 0:
            return False
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
        if fn(array.ctypes.data, array.nbytes, HOST_REGISTER_READ_ONLY if read_only else 0) != 0:
            self.lib.cudaGetLastError()  # not sticky: clear it, the copy works unpinned
            return False
        return True

    def unregister(self, array) -> None:
        self.lib.cudaHostUnregister.argtypes = [ctypes.c_void_p]
        self.check("cudaHostUnregister", self.lib.cudaHostUnregister(array.ctypes.data))

    def copy_d2d_async(self, dst: int, src: int, nbytes: int) -> None:
        self.check(
            "cudaMemcpyAsync D2D", self.lib.cudaMemcpyAsync(dst, src, nbytes, MEMCPY_D2D, None)
        )

    def memset_async(self, ptr: int, value: int, nbytes: int) -> None:
        self.check("cudaMemsetAsync", self.lib.cudaMemsetAsync(ptr, value, nbytes, None))

    def synchronize(self) -> None:
        self.check("cudaDeviceSynchronize", self.lib.cudaDeviceSynchronize())

    def last_error(self) -> None:
        self.check("kernel launch (cudaGetLastError)", self.lib.cudaGetLastError())

    def event(self) -> int:
        e = ctypes.c_void_p()
        self.check("cudaEventCreate", self.lib.cudaEventCreate(ctypes.byref(e)))
        return e.value or 0

    def record(self, event: int) -> None:
        self.check("cudaEventRecord", self.lib.cudaEventRecord(event, None))

    def elapsed_ms(self, start: int, end: int) -> float:
        self.check("cudaEventSynchronize", self.lib.cudaEventSynchronize(end))
        ms = ctypes.c_float(0.0)
        self.check(
            "cudaEventElapsedTime", self.lib.cudaEventElapsedTime(ctypes.byref(ms), start, end)
        )
        return ms.value


def loaded_libraries() -> set[str]:
    """Shared objects mapped into this process (from /proc/self/maps)."""
    try:
        text = Path("/proc/self/maps").read_text()
    except OSError:
        return set()
    return {line.split()[-1] for line in text.splitlines() if ".so" in line.split()[-1]}
