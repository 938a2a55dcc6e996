"""Refuse candidates that link vendor libraries or call process, file or network functions.

Three checks on the built library, all before it runs:
- its DT_NEEDED entries may name only the CUDA runtime and the C/C++ runtime;
- its undefined symbols may not include vendor-library or forbidden libc entry points;
- its own host code may not contain a raw ``syscall`` instruction.
The worker also checks, after each call, that no vendor library was loaded at run time.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ALLOWED_NEEDED = re.compile(
    r"^(libcudart\.so\.\d+|libstdc\+\+\.so\.\d+|libm\.so\.\d+|libgcc_s\.so\.\d+|libc\.so\.\d+|"
    r"ld-linux-x86-64\.so\.\d+|libdl\.so\.\d+|libpthread\.so\.\d+|librt\.so\.\d+)$"
)
VENDOR_PREFIXES = ("cublas", "cusparse", "cudnn", "cufft", "curand", "cusolver", "nvjpeg", "npp")
_PROCESS = ("system", "popen", "pclose", "fork", "vfork", "clone", "execv", "execve", "execvp",
            "execvpe", "execl", "execlp", "execle", "posix_spawn", "posix_spawnp", "kill",
            "ptrace")  # fmt: skip
_FILES = ("open", "open64", "openat", "openat64", "creat", "creat64", "fopen", "fopen64",
          "freopen", "fdopen", "opendir", "unlink", "unlinkat", "rename", "renameat", "remove",
          "mkdir", "rmdir", "chmod", "fchmod", "chown", "truncate", "ftruncate")  # fmt: skip
_NETWORK = ("socket", "connect", "bind", "listen", "accept", "accept4", "send", "sendto",
            "sendmsg", "recv", "recvfrom", "recvmsg", "getaddrinfo", "gethostbyname")  # fmt: skip
_OTHER = ("mmap", "mmap64", "mprotect", "syscall", "dlmopen", "cudaIpcOpenMemHandle",
          "cudaIpcGetMemHandle")  # fmt: skip
#: libc entry points that start processes, touch files or the network, or map code.
FORBIDDEN_LIBC = frozenset(_PROCESS + _FILES + _NETWORK + _OTHER)
#: Vendor libraries that must not appear in the worker's address space after a candidate call.
VENDOR_LIBRARY_FILES = re.compile(r"lib(cublas|cublasLt|cusparse|cudnn\w*|cufft|cusolver)\.so")


@dataclass
class SymbolReport:
    """What a library needs from outside, and what of that is forbidden."""

    needed: list[str]
    undefined: list[str]
    forbidden: list[str]

    @property
    def ok(self) -> bool:
        return not self.forbidden


def _tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise RuntimeError(
            f"{name} (binutils) is needed to check libraries: apt-get install binutils"
        )
    return path


def _output(tool: str, *args: str) -> str:
    return subprocess.run([_tool(tool), *args], capture_output=True, text=True, check=True).stdout


def needed_libraries(library: Path) -> list[str]:
    out = _output("readelf", "-d", str(library))
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def undefined_symbols(library: Path) -> list[str]:
    out = _output("nm", "-D", "--undefined-only", str(library))
    return sorted({line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()})


def has_raw_syscall(library: Path) -> bool:
    out = _output("objdump", "-d", "--no-show-raw-insn", str(library))
    return re.search(r"\bsyscall\b|\bint\s+\$0x80\b|\bsysenter\b", out) is not None


def check_library(library: Path) -> SymbolReport:
    """Inspect a built candidate library; ``forbidden`` lists every reason to refuse it."""
    needed = needed_libraries(library)
    undefined = undefined_symbols(library)
    forbidden = [f"links {n}" for n in needed if not ALLOWED_NEEDED.match(n)]
    forbidden += [
        f"calls {s}"
        for s in undefined
        if s in FORBIDDEN_LIBC or s.lower().startswith(VENDOR_PREFIXES)
    ]
    if has_raw_syscall(library):
        forbidden.append("contains a raw syscall instruction")
    return SymbolReport(needed=needed, undefined=undefined, forbidden=forbidden)


def defines_symbol(library: Path, symbol: str) -> bool:
    """True if the library exports ``symbol`` (an extern "C" function has an unmangled name)."""
    return symbol in exported_symbols(library)


def exported_symbols(library: Path) -> frozenset[str]:
    """The symbols the library defines and exports; read once per file as it is (nm takes
    ~20 ms, and a bench asks again for every suite of every build)."""
    st = library.stat()
    return _exported(str(library), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=1024)
def _exported(path: str, _mtime_ns: int, _size: int) -> frozenset[str]:
    out = _output("nm", "-D", "--defined-only", path)
    return frozenset(line.split()[-1] for line in out.splitlines() if line.strip())
