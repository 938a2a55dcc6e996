"""Compile an implementation (.cu) into a shared library with nvcc, cached by content hash.

The cache key is the source, the flags, nvcc's version and what the vendor include folders
hold (their files' contents, not their paths), so that checkouts and virtual environments with
the same headers share builds, and a changed header builds again.

The build log and ptxas resource usage are kept beside the library. Libraries link the CUDA
runtime shared (``-cudart shared``) so that their undefined symbols list only what the
implementation itself uses (see symbols.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

from ..errors import UserError
from ..extras import install_line
from .client import without_secrets

log = logging.getLogger(__name__)

#: Flags of every build; baselines use these and nothing else (the original used nvcc defaults).
#: CCCL_DISABLE_NVTX: CUB (and Thrust through it) would otherwise wrap its algorithms in NVTX
#: ranges, whose header-only loader calls dlopen and dlsym, which the static checks refuse; the
#: rules allow CUB, and nothing here reads NVTX ranges.
BASE_FLAGS = ("-O3", "-Xcompiler", "-fPIC", "-shared", "-cudart", "shared", "-Xptxas", "-v",
              "-DCCCL_DISABLE_NVTX")  # fmt: skip
NVCC_TIMEOUT_S = 600
LINK_NAMES = {
    "cublas": "cublas",
    "cublasLt": "cublasLt",
    "cusparse": "cusparse",
    "cufft": "cufft",
    "cudnn": "cudnn",
}


class BuildError(UserError):
    """nvcc rejected the source; the message carries the compiler's first error."""

    def __init__(self, message: str, log_path: Path) -> None:
        super().__init__(message)
        self.log_path = log_path


@dataclass
class KernelResources:
    """ptxas -v figures for one kernel."""

    kernel: str
    registers: int = 0
    shared_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0


@dataclass
class BuildResult:
    """A built shared library and what the compiler said."""

    source: Path
    library: Path
    log_path: Path
    flags: list[str]
    cached: bool
    resources: list[KernelResources] = field(default_factory=list)

    def to_json(self) -> dict:
        d = asdict(self)
        return {k: str(v) if isinstance(v, Path) else v for k, v in d.items()}


@cache
def nvcc() -> str:
    """Path of nvcc ($CUDAMASTER_NVCC, else PATH, else /usr/local/cuda), or a UserError."""
    chosen = os.environ.get("CUDAMASTER_NVCC")
    if chosen:
        if not Path(chosen).is_file():
            raise UserError(f"nvcc not found at CUDAMASTER_NVCC={chosen}: fix or unset it")
        return chosen
    found = shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None
    )
    if not found:
        raise UserError("nvcc not found: install the CUDA toolkit and put its bin/ on PATH")
    return found


@cache
def nvcc_version() -> str:
    out = subprocess.run(
        [nvcc(), "--version"], capture_output=True, text=True, check=False, env=without_secrets()
    )
    m = re.search(r"release ([\d.]+), V([\d.]+)", out.stdout)
    return m.group(2) if m else out.stdout.strip().splitlines()[-1]


def cache_dir() -> Path:
    root = os.environ.get("CUDAMASTER_CACHE") or Path.home() / ".cache" / "cudamaster"
    return Path(root)


def build_cache_dir() -> Path:
    """Where builds are kept: $CUDAMASTER_BUILD_CACHE, else the cache's build/."""
    return Path(os.environ.get("CUDAMASTER_BUILD_CACHE") or cache_dir() / "build")


def _python_nvidia_dirs(sub: str) -> list[Path]:
    """include/ or lib/ folders of the nvidia-* Python wheels (cuDNN ships only as one)."""
    dirs: list[Path] = []
    for entry in sys.path:
        base = Path(entry) / "nvidia"
        if base.is_dir():
            dirs += sorted(p for p in base.glob(f"*/{sub}") if p.is_dir())
    return dirs


VENDOR_HEADERS = ("cublas_v2.h", "cusparse.h", "cudnn.h", "cufft.h")


def vendor_dirs() -> list[Path]:
    """Where scripts/vendor-headers.sh puts the headers it fetches (under nvidia/*/include):
    $CUDAMASTER_VENDOR (folders separated by ':'), else the checkout's build/vendor, then the
    cache's vendor/ (shared by checkouts; the tests fetch there)."""
    env = os.environ.get("CUDAMASTER_VENDOR")
    if env:
        return [Path(p) for p in env.split(os.pathsep) if p]
    return [Path(__file__).resolve().parents[3] / "build" / "vendor", cache_dir() / "vendor"]


def vendor_include_dirs() -> list[Path]:
    """For each vendor header, the first folder that has it: the toolkit, the nvidia-* wheels,
    then the vendor_dirs(). Only folders that hold a vendor header are returned, so a wheel's
    own CUDA runtime headers never shadow nvcc's."""
    toolkit = Path("/usr/local/cuda/include")
    fetched = [d for v in vendor_dirs() for d in sorted(v.glob("nvidia/*/include"))]
    search = [toolkit, *_python_nvidia_dirs("include"), *fetched]
    found: list[Path] = []
    for header in VENDOR_HEADERS:
        first = next((d for d in search if (d / header).exists()), None)
        if first is not None and first != toolkit and first not in found:
            found.append(first)
    return found


_DIGESTS: dict[tuple, str] = {}  # (folder, its files' names, sizes and mtimes) -> digest


def headers_digest(folder: Path) -> str:
    """A digest of every file under FOLDER (names and contents): what an include folder gives
    a build. The contents are read again when a file's size or mtime changes, and while any
    file is too recent for its mtime to tell (a second write within the clock's tick)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    stats = tuple((str(p.relative_to(folder)), *_stat(p)) for p in files)
    sign = (str(folder), stats)
    if sign in _DIGESTS:
        return _DIGESTS[sign]
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(folder)).encode() + b"\0" + p.read_bytes() + b"\0")
    digest = "headers:" + h.hexdigest()
    if all(time.time_ns() - mtime > 2_000_000_000 for _, _, mtime in stats):
        _DIGESTS[sign] = digest
    return digest


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def vendor_lib_dirs() -> list[Path]:
    candidates = [Path("/usr/local/cuda/lib64"), *_python_nvidia_dirs("lib")]
    return [p for p in candidates if p.is_dir()]


def _link_flags(links: tuple[str, ...]) -> list[str]:
    flags: list[str] = []
    if not links:
        return flags
    for d in vendor_lib_dirs():
        flags += [f"-L{d}", "-Xlinker", f"-rpath={d}"]
    for name in links:
        lib = LINK_NAMES[name]
        # wheels ship only versioned files (libcudnn.so.9): link the versioned name when needed
        plain = any((d / f"lib{lib}.so").exists() for d in vendor_lib_dirs())
        if plain:
            flags.append(f"-l{lib}")
        else:
            versioned = sorted(
                p.name for d in vendor_lib_dirs() for p in d.glob(f"lib{lib}.so.[0-9]*")
            )
            flags.append(f"-l:{versioned[0]}" if versioned else f"-l{lib}")
    return flags


_PTXAS_FUNC = re.compile(r"Compiling entry function '(\w+)'|Function properties for (\w+)")
_PTXAS_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")
_PTXAS_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill")


def parse_ptxas(text: str) -> list[KernelResources]:
    """Per-kernel registers, shared memory, stack and spills from ptxas -v output."""
    kernels: dict[str, KernelResources] = {}
    current: KernelResources | None = None
    for line in text.splitlines():
        m = _PTXAS_FUNC.search(line)
        if m:
            name = m.group(1) or m.group(2)
            current = kernels.setdefault(name, KernelResources(kernel=name))
            continue
        if current is None:
            continue
        m = _PTXAS_SPILL.search(line)
        if m:
            current.stack_bytes, current.spill_stores, current.spill_loads = map(int, m.groups())
        m = _PTXAS_USED.search(line)
        if m:
            current.registers = int(m.group(1))
            current.shared_bytes = int(m.group(2) or 0)
    return list(kernels.values())


#: nvcc's words when neither the cudnn extra, nor a cuDNN of the system, is there
_CUDNN_MISSING = re.compile(r"cudnn\.h: No such file|cannot find -l:?(lib)?cudnn\b")


def _first_error(log_text: str) -> str:
    """The line that says what went wrong: a compiler error, else the linker's reason."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    for pattern in (" error", "cannot find", "undefined reference", "error", "fatal"):
        for line in lines:
            if pattern in line and not line.startswith("collect2"):
                return line
    return lines[-1] if lines else "nvcc failed with no message"


def arch_flags(arch: str) -> tuple[str, ...]:
    """nvcc's target flags for ``arch``. An arch-specific target ("sm_90a") gets its machine
    code and its own PTX only: nvcc 13's ``-arch=sm_90a`` also compiles the source for generic
    compute_90 PTX, which rejects wgmma and setmaxnreg, so code written for the target the
    prompts promise would not build."""
    if arch.startswith("sm_") and arch.endswith("a"):
        virtual = "compute_" + arch.removeprefix("sm_")
        return ("-gencode", f"arch={virtual},code=[{arch},{virtual}]")
    return (f"-arch={arch}",)


def build(
    source: Path,
    arch: str,
    links: tuple[str, ...] = (),
    extra_flags: tuple[str, ...] = (),
    compile_only: bool = False,
) -> BuildResult:
    """Build source for arch (e.g. 'sm_90'); a cached result is reused when nothing changed."""
    source = Path(source)
    try:
        code = source.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {source}: {exc.strerror}") from None
    include_dirs = vendor_include_dirs()  # headers only; linking is checked
    includes = [f"-I{d}" for d in include_dirs]
    base = [f for f in BASE_FLAGS if not (compile_only and f == "-shared")]
    flags = [*base, *arch_flags(arch), *extra_flags, *includes, *(["-c"] if compile_only else [])]
    link = [] if compile_only else _link_flags(links)
    # keyed on what the include folders hold, not on where they are: checkouts share builds
    keyed = [f for f in flags if f not in includes] + [headers_digest(d) for d in include_dirs]
    key = hashlib.sha256(
        b"\0".join([code, " ".join(keyed + link).encode(), nvcc_version().encode()])
    ).hexdigest()[:24]
    out_dir = build_cache_dir() / key
    library = out_dir / ("impl.o" if compile_only else "impl.so")
    log_path = out_dir / "build.log"
    meta_path = out_dir / "build.json"

    def cached() -> BuildResult | None:
        if not (library.exists() and meta_path.exists()):
            return None
        meta = json.loads(meta_path.read_text())
        resources = [KernelResources(**r) for r in meta["resources"]]
        return BuildResult(source, library, log_path, flags + link, True, resources)

    if (hit := cached()) is not None:
        return hit
    out_dir.mkdir(parents=True, exist_ok=True)
    # one build per key at a time (threads and processes: the same file evaluated twice at
    # once); whoever waited finds the finished build
    with open(out_dir / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (hit := cached()) is not None:
            return hit
        return _compile(source, code, flags, link, out_dir, library)


def _compile(
    source: Path, code: bytes, flags: list[str], link: list[str], out_dir: Path, library: Path
) -> BuildResult:
    log_path, meta_path = out_dir / "build.log", out_dir / "build.json"
    (out_dir / "source.cu").write_bytes(code)
    cmd = [nvcc(), *flags, "-o", str(library), str(out_dir / "source.cu"), *link]
    log.debug("nvcc: %s", " ".join(cmd))
    try:
        # nvcc (and the host compiler) never see the keys; in a session of its own, so that a
        # Ctrl-C at the terminal does not kill it into a compile error (the caller stops)
        proc = subprocess.run(
            cmd, capture_output=True, text=True, check=False, timeout=NVCC_TIMEOUT_S,
            env=without_secrets(), start_new_session=True,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        log_path.write_text(f"$ {' '.join(cmd)}\nnvcc timed out after {NVCC_TIMEOUT_S} s\n")
        message = f"nvcc timed out after {NVCC_TIMEOUT_S} s on {source.name}"
        raise BuildError(message, log_path) from None
    log_text = f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
    log_path.write_text(log_text)
    if proc.returncode != 0:
        library.unlink(missing_ok=True)
        if _CUDNN_MISSING.search(proc.stderr):
            raise BuildError(f"{source.name} needs cuDNN, which is not installed here: "
                             f"{install_line('cudnn')}", log_path)  # fmt: skip
        first = _first_error(proc.stderr).replace(str(out_dir / "source.cu"), source.name)
        raise BuildError(f"compile error in {source.name}: {first}", log_path)
    resources = parse_ptxas(proc.stderr + proc.stdout)
    meta_path.write_text(json.dumps({"resources": [asdict(r) for r in resources]}))
    return BuildResult(source, library, log_path, flags + link, False, resources)
