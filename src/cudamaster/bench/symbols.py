"""Refuse candidates that link vendor libraries or call process, file or network functions.

Three checks on the built library, all before it runs, each refusal with its reason:
- its DT_NEEDED entries may name only the CUDA runtime and the C/C++ runtime;
- its undefined symbols may not include vendor-library or forbidden libc entry points, the
  dynamic loader's (dlopen, dlsym: they reach any function by name, past this list), nor the
  C++ file streams and std::filesystem (libstdc++ opens files for them);
- its own host code may not contain a raw ``syscall`` instruction.
The worker also checks, after each call, that no vendor library was loaded at run time. These
checks see names only: a function reached by its address (walking libc's symbol table in
memory) passes them, and the kernel sandbox (bench/sandbox.py) stops what it does.
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
            "execvpe", "execl", "execlp", "execle", "fexecve", "posix_spawn", "posix_spawnp",
            "kill", "killpg", "tgkill", "tkill", "sigqueue", "ptrace", "process_vm_readv",
            "process_vm_writev", "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "unshare",
            "setns", "mount", "umount", "umount2", "chroot")  # fmt: skip
_FILES = ("open", "open64", "openat", "openat64", "__open_2", "__open64_2", "__openat_2",
          "__openat64_2", "creat", "creat64", "fopen", "fopen64", "freopen", "freopen64",
          "fdopen", "opendir", "unlink", "unlinkat", "rename", "renameat", "renameat2", "remove",
          "mkdir", "rmdir", "chmod", "fchmod", "chown", "truncate", "ftruncate",
          "open_by_handle_at", "name_to_handle_at")  # fmt: skip
_NETWORK = ("socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "send",
            "sendto", "sendmsg", "recv", "recvfrom", "recvmsg", "getaddrinfo",
            "gethostbyname")  # fmt: skip
_LOADER = ("dlopen", "dlmopen", "dlsym", "dlvsym", "dladdr", "dladdr1", "dlinfo",
           "dl_iterate_phdr", "__libc_dlopen_mode", "__libc_dlsym", "_dl_sym")  # fmt: skip
_OTHER = ("mmap", "mmap64", "mprotect", "syscall", "cudaIpcOpenMemHandle",
          "cudaIpcGetMemHandle")  # fmt: skip
#: Why each group is refused, as the refusal says it.
REASONS = {
    **dict.fromkeys(_PROCESS, "starts, signals or inspects processes"),
    **dict.fromkeys(_FILES, "opens or changes files"),
    **dict.fromkeys(_NETWORK, "uses the network"),
    **dict.fromkeys(_LOADER, "loads code or looks functions up by name at run time, which "
                    "reaches any function past these checks"),
    **dict.fromkeys(_OTHER, "maps memory, makes raw system calls or shares device memory "
                    "with other processes"),
}  # fmt: skip
#: libc entry points that start processes, touch files or the network, or load or map code.
FORBIDDEN_LIBC = frozenset(REASONS)
#: libstdc++ classes that open files, by the prefix of their mangled names (any member).
FORBIDDEN_CXX = {
    "_ZNSt13basic_filebuf": "std::basic_filebuf",
    "_ZNSt14basic_ifstream": "std::basic_ifstream",
    "_ZNSt14basic_ofstream": "std::basic_ofstream",
    "_ZNSt13basic_fstream": "std::basic_fstream",
    "_ZNSt10filesystem": "std::filesystem",
    "_ZNKSt10filesystem": "std::filesystem",
}
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
    from .client import without_secrets  # binutils read untrusted files: no keys for them

    return subprocess.run(
        [_tool(tool), *args], capture_output=True, text=True, check=True, env=without_secrets()
    ).stdout


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
    forbidden += [f"calls {s} (it {REASONS[s]})" for s in undefined if s in FORBIDDEN_LIBC]
    forbidden += [
        f"calls {s} (a vendor library: candidates write their own kernels)"
        for s in undefined
        if s.lower().startswith(VENDOR_PREFIXES)
    ]
    classes = {name for s in undefined for p, name in FORBIDDEN_CXX.items() if s.startswith(p)}
    forbidden += [f"uses {c} (C++ file streams and std::filesystem open files)" for c in
                  sorted(classes)]  # fmt: skip
    if has_raw_syscall(library):
        forbidden.append("contains a raw syscall instruction (it bypasses libc and these checks)")
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
