"""Kernel-enforced confinement of a worker process: what a candidate's code may do once loaded.

The static checks (bench/symbols.py) refuse, with a reason, a library that names a forbidden
function; they cannot see a function reached by address (walking libc's symbol table, say). The
kernel can: the worker applies these layers to itself (docs/sandbox.md):

- at start, before any thread exists (**landlock-startup**): a Landlock layer that allows every
  file except other processes' ``/proc/<pid>`` entries (``/proc`` and ``/sys`` read-only). Every
  thread inherits it, the CUDA driver's included, and it is transparent to CUDA's start-up;
- before a library is loaded (trusted code: baselines, library baselines) or, for a candidate,
  at its first case, before its library is loaded (its constructors run at dlopen):
  **nocaps** (no_new_privs; capabilities cleared: effective, permitted, inheritable, ambient,
  bounding), **seccomp** (a BPF filter synchronised over every thread: no execve, fork, vfork
  or clone of a process, clone3 fails with ENOSYS so that libc falls back to clone, whose
  flags the filter reads; no ptrace, process_vm_readv/writev, pidfd, kcmp, io_uring,
  namespaces, mounts, keyrings or file handles; signals only to itself; socket() only
  AF_UNIX, which fails with EPERM for candidates), and for a candidate **landlock**: files
  read-only where the runtime, Python and the loader need them (system library folders,
  Python's own, ``/proc/self``, ``/sys``, ``/dev/nvidia*`` read-write), read-write in the
  folder that holds the case and output-slot folders, nothing else; with Landlock ABI 4 TCP
  bind/connect denied (**landlock-net**), with ABI 6 signals and abstract UNIX sockets
  scoped to the worker (**landlock-scope**).

A forbidden system call does not return: the filter traps it (SECCOMP_RET_TRAP), a SIGSYS
handler writes ``cudamaster sandbox: blocked NAME (system call N)`` to stderr and the worker
dies by SIGSYS, which the coordinator reports as the verdict ``sandbox_violation`` (a call made
with every signal blocked, as glibc's system() makes its clone, is killed without the handler:
unnamed). Files outside the allowed folders fail to open with EACCES (the process goes on).

Limits (reported in the worker's Init reply as ``sandbox_gaps``, so in every report): a
Landlock layer applies to the thread that makes it and the threads it starts later; before
Landlock ABI 8 (LANDLOCK_RESTRICT_SELF_TSYNC) threads that the CUDA driver started during
Init keep only the startup layer, and capabilities are cleared per thread too. Whatever the
kernel lacks is listed there, never skipped silently. ``CUDAMASTER_SANDBOX=0`` turns it all
off, for debugging only, and is recorded likewise.

Everything here is ctypes over the system calls, with no dependency: the GPU hosts install no
package at run time, PyPI's ``landlock`` (1.0.0.dev5) is a pre-release that knows neither
TCP rules nor scopes nor TSYNC and reads a stale errno as a failure, and ``pyseccomp``
(0.1.2, 2021) needs libseccomp.so.2 on the host; a filter of some sixty BPF instructions is
easier to read and test than either dependency.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import logging
import os
import platform
import resource
import signal
import stat
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

log = logging.getLogger(__name__)

ENV = "CUDAMASTER_SANDBOX"  # "0": no confinement (debugging only; recorded in every report)
TAG = "cudamaster sandbox:"  # starts the line the SIGSYS handler writes to stderr
#: Environment entries for a worker so that it has one thread when the startup layer is made
#: (numpy's BLAS would start a pool at import; the worker does no linear algebra).
WORKER_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class Profile(Enum):
    """Trusted code (the task's baselines, vendor-library baselines) may use AF_UNIX sockets
    and every file; untrusted code (candidates) gets the full profile."""

    TRUSTED = "trusted"
    UNTRUSTED = "untrusted"


class SandboxError(RuntimeError):
    """The kernel refused a confinement step that it said it supports."""


# -- the system calls -----------------------------------------------------------------------
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                        ctypes.c_ulong]  # fmt: skip

PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
CAP_SETPCAP, CAP_SYS_ADMIN = 8, 21
LINUX_CAPABILITY_VERSION_3 = 0x20080522

SECCOMP_SET_MODE_FILTER, SECCOMP_GET_ACTION_AVAIL = 1, 2
SECCOMP_FILTER_FLAG_TSYNC = 1
RET_KILL_PROCESS, RET_TRAP, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00030000, 0x00050000, 0x7FFF0000
CLONE_THREAD = 0x00010000
AF_UNIX = 1

LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446  # all arches
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
LANDLOCK_RESTRICT_SELF_TSYNC = 1 << 3  # ABI 8
# file-system rights, by the ABI that added them
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_DIR_ONLY_V1 = sum(1 << b for b in range(4, 13))  # remove, make dir/reg/sock/fifo/..., symlink
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6


def _syscall(nr: int, *args: int | ctypes._Pointer | ctypes._CArgObject | None) -> int:
    """A raw system call; every integer travels as a long (a variadic int may carry junk)."""
    conv = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    return int(_libc.syscall(ctypes.c_long(nr), *conv))


def _fail(what: str) -> SandboxError:
    code = ctypes.get_errno()
    return SandboxError(f"{what} failed: {os.strerror(code)} (errno {code})")


@dataclass(frozen=True)
class _Arch:
    """One architecture's audit number and system-call numbers."""

    name: str
    audit: int
    numbers: dict[str, int]
    x32: bool = False  # x86_64: numbers with bit 30 set are the x32 ABI


_COMMON = {"clone3": 435, "pidfd_getfd": 438, "process_madvise": 440, "pidfd_open": 434,
           "pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426,
           "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430,
           "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442}  # fmt: skip
X86_64 = _Arch("x86_64", 0xC000003E, {**_COMMON, "fork": 57, "vfork": 58, "execve": 59,
    "execveat": 322, "clone": 56, "ptrace": 101, "process_vm_readv": 310,
    "process_vm_writev": 311, "kcmp": 312, "kill": 62, "tkill": 200, "tgkill": 234,
    "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "socket": 41, "socketpair": 53,
    "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "keyctl": 250, "add_key": 248, "request_key": 249, "open_by_handle_at": 304,
    "name_to_handle_at": 303, "ioctl": 16, "futex": 202, "seccomp": 317},
    x32=True)  # fmt: skip
AARCH64 = _Arch("aarch64", 0xC00000B7, {**_COMMON, "execve": 221, "execveat": 281,
    "clone": 220, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
    "kcmp": 272, "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138,
    "rt_tgsigqueueinfo": 240, "socket": 198, "socketpair": 199, "unshare": 97, "setns": 268,
    "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "keyctl": 219, "add_key": 217,
    "request_key": 218, "open_by_handle_at": 265, "name_to_handle_at": 264, "ioctl": 29,
    "futex": 98, "seccomp": 277})  # fmt: skip
ARCHES = {"x86_64": X86_64, "aarch64": AARCH64}

#: System calls that never return under the sandbox, with what they would have done.
TRAPPED = {
    "fork": "start a process", "vfork": "start a process", "execve": "run a program",
    "execveat": "run a program", "ptrace": "trace a process",
    "process_vm_readv": "read another process's memory",
    "process_vm_writev": "write another process's memory", "kcmp": "inspect another process",
    "pidfd_open": "take hold of a process", "pidfd_getfd": "take another process's files",
    "pidfd_send_signal": "signal a process", "process_madvise": "touch another process's memory",
    "tkill": "signal a thread", "io_uring_setup": "use io_uring (it bypasses this filter)",
    "io_uring_enter": "use io_uring", "io_uring_register": "use io_uring",
    "unshare": "make namespaces", "setns": "enter namespaces", "mount": "mount",
    "umount2": "unmount", "pivot_root": "change the root", "chroot": "change the root",
    "open_tree": "mount", "move_mount": "mount", "fsopen": "mount", "fsconfig": "mount",
    "fsmount": "mount", "fspick": "mount", "mount_setattr": "mount",
    "keyctl": "read keyrings", "add_key": "use keyrings", "request_key": "read keyrings",
    "open_by_handle_at": "open a file by handle", "name_to_handle_at": "name a file by handle",
}  # fmt: skip
#: Trapped unless their argument is harmless (see _filter).
CONDITIONAL = {
    "clone": "start a process (clone without CLONE_THREAD)",
    "socket": "open a network socket", "socketpair": "open a network socket",
    "kill": "signal another process", "tgkill": "signal another process",
    "rt_sigqueueinfo": "signal another process", "rt_tgsigqueueinfo": "signal another process",
}  # fmt: skip


# -- what the kernel has --------------------------------------------------------------------
@dataclass(frozen=True)
class Support:
    """What this kernel offers: ``seccomp`` and ``landlock_abi`` (0: none), and why not."""

    arch: str
    seccomp: bool
    landlock_abi: int
    seccomp_why: str = ""
    landlock_why: str = ""


@functools.cache
def kernel_support() -> Support:
    """Probe the running kernel (cheap: two system calls)."""
    machine = platform.machine()
    arch = ARCHES.get(machine)
    seccomp, seccomp_why = False, ""
    if sys.platform != "linux":
        seccomp_why = f"not Linux ({sys.platform})"
    elif arch is None:
        seccomp_why = f"no system-call table here for {machine}"
    else:
        action = ctypes.c_uint32(RET_TRAP)
        if _syscall(arch.numbers["seccomp"], SECCOMP_GET_ACTION_AVAIL, 0, ctypes.byref(action)):
            code = ctypes.get_errno()
            seccomp_why = f"seccomp filters unavailable: {os.strerror(code)}"
        else:
            seccomp = True
    abi, landlock_why = 0, ""
    if sys.platform == "linux":
        abi = _syscall(LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
        if abi < 0:
            code = ctypes.get_errno()
            landlock_why = {
                errno.ENOSYS: "the kernel has no Landlock (CONFIG_SECURITY_LANDLOCK)",
                errno.EOPNOTSUPP: "Landlock is disabled at boot (not in the lsm= list)",
            }.get(code, f"Landlock unavailable: {os.strerror(code)}")
            abi = 0
    else:
        landlock_why = f"not Linux ({sys.platform})"
    return Support(machine, seccomp, abi, seccomp_why, landlock_why)


def enabled() -> bool:
    """False only where CUDAMASTER_SANDBOX=0 (debugging)."""
    return os.environ.get(ENV, "1").strip() != "0"


def plan(support: Support, on: bool) -> tuple[list[str], list[str]]:
    """What a worker enforces on a candidate's code with this kernel (names as in the module
    docstring), and every gap, each in one line."""
    if not on:
        return [], [f"off: {ENV}=0 (debugging only): candidates run unconfined"]
    features, gaps = ["nocaps"], []
    if support.seccomp:
        features.append("seccomp")
    else:
        gaps.append(f"seccomp: {support.seccomp_why}: processes, sockets and ptrace unconfined")
    abi = support.landlock_abi
    if abi:
        features += ["landlock-startup", "landlock"]
        features += ["landlock-net"] if abi >= 4 else []
        features += ["landlock-scope"] if abi >= 6 else []
        if abi < 8:
            gaps.append(
                f"landlock ABI {abi} < 8 (no TSYNC): threads started before a candidate is "
                "loaded (the CUDA driver's) keep only the startup layer and their capabilities"
            )
    else:
        gaps.append(f"landlock: {support.landlock_why}: files and /proc unconfined")
    return features, gaps


# -- the optimizer's own process ------------------------------------------------------------
def make_undumpable() -> bool:
    """Make this process non-dumpable, so that processes of the same user (workers, nvcc, a
    candidate) cannot read its /proc/<pid>/environ or mem, nor ptrace it; root with
    CAP_SYS_PTRACE still can, hence the workers' capability drop. True where it took."""
    if sys.platform != "linux":
        return False
    return _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0


# -- capabilities ---------------------------------------------------------------------------
class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]  # fmt: skip


def effective_caps() -> int:
    """This thread's effective capability set (from /proc/thread-self/status)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/thread-self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def _no_new_privs() -> None:
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")


def _drop_capabilities() -> None:
    """Clear the bounding and ambient sets, then the effective, permitted and inheritable ones
    (of this thread and the threads it starts)."""
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 63
    if effective_caps() & (1 << CAP_SETPCAP):
        for cap in range(last + 1):
            failed = _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0
            if failed and ctypes.get_errno() != errno.EINVAL:  # EINVAL: a cap the kernel lacks
                raise _fail(f"prctl(PR_CAPBSET_DROP, {cap})")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL before Linux 4.3
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), ctypes.byref(data)) != 0:  # glibc's wrapper: any arch
        raise _fail("capset")
    if effective_caps():
        raise SandboxError("capabilities remain after capset")


# -- seccomp --------------------------------------------------------------------------------
class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]  # fmt: skip


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0: its low 32 bits)
Insn = tuple[int, int, str | int, str | int]  # code, k, jump if true, jump if false


def _filter(arch: _Arch, profile: Profile, pid: int) -> list[tuple[int, int, int, int]]:
    """The BPF program: (code, jt, jf, k) per instruction. Labels resolve to forward offsets;
    0 means the next instruction."""
    n = arch.numbers
    unix = RET_ALLOW if profile is Profile.TRUSTED else RET_ERRNO | errno.EPERM
    prog: list[Insn | str] = [
        (_LD_ABS, _ARCH, 0, 0),
        (_JEQ, arch.audit, 0, "kill"),  # another ABI (i386's int 0x80): killed
        (_LD_ABS, _NR, 0, 0),
        (_JEQ, n["ioctl"], "allow", 0),  # the driver's hot path first
        (_JEQ, n["futex"], "allow", 0),
    ]
    if arch.x32:
        prog.append((_JGE, 0x40000000, "kill", 0))
    prog += [(_JEQ, n[name], "trap", 0) for name in TRAPPED if name in n]
    prog += [
        (_JEQ, n["clone3"], "enosys", 0),  # libc falls back to clone, whose flags are read
        (_JEQ, n["clone"], "clone", 0),
        (_JEQ, n["socket"], "socket", 0),
        (_JEQ, n["socketpair"], "socket", 0),
    ]
    prog += [(_JEQ, n[s], "self", 0) for s in ("kill", "tgkill", "rt_sigqueueinfo",
                                               "rt_tgsigqueueinfo")]  # fmt: skip
    prog += [
        (_RET, RET_ALLOW, 0, 0),  # any other call
        "clone", (_LD_ABS, _ARG0, 0, 0), (_JSET, CLONE_THREAD, "allow", "trap"),
        "socket", (_LD_ABS, _ARG0, 0, 0), (_JEQ, AF_UNIX, 0, "trap"), (_RET, unix, 0, 0),
        "self", (_LD_ABS, _ARG0, 0, 0), (_JEQ, pid, "allow", "trap"),
        "allow", (_RET, RET_ALLOW, 0, 0),
        "trap", (_RET, RET_TRAP, 0, 0),
        "kill", (_RET, RET_KILL_PROCESS, 0, 0),
        "enosys", (_RET, RET_ERRNO | errno.ENOSYS, 0, 0),
    ]  # fmt: skip
    labels: dict[str, int] = {}
    insns: list[Insn] = []
    for item in prog:
        if isinstance(item, str):
            labels[item] = len(insns)
        else:
            insns.append(item)
    out = []
    for i, (code, k, jt, jf) in enumerate(insns):
        offsets = [labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)]
        assert all(0 <= o < 256 for o in offsets), (i, offsets)
        out.append((code, offsets[0], offsets[1], k))
    return out


def _apply_seccomp(arch: _Arch, profile: Profile) -> None:
    """Load the filter on every thread of the process (TSYNC); no_new_privs must be set."""
    insns = _filter(arch, profile, os.getpid())
    table = (_SockFilter * len(insns))(*[_SockFilter(c, t, f, k) for c, t, f, k in insns])
    prog = _SockFprog(len(insns), table)
    got = _syscall(arch.numbers["seccomp"], SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
                   ctypes.byref(prog))  # fmt: skip
    if got < 0:
        raise _fail("seccomp(SECCOMP_SET_MODE_FILTER, TSYNC)")
    if got > 0:
        raise SandboxError(f"seccomp could not synchronise thread {got}")


# the SIGSYS handler: a trapped call never returns; the handler names it and the process dies
_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
SA_SIGINFO = 4


class _Sigaction(ctypes.Structure):  # glibc's struct sigaction (x86_64 and aarch64)
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16),
                ("flags", ctypes.c_int), ("restorer", ctypes.c_void_p)]  # fmt: skip


def _messages(arch: _Arch) -> dict[int, bytes]:
    reasons = {**TRAPPED, **CONDITIONAL}
    return {
        nr: f"{TAG} blocked {name} (system call {nr}), an attempt to {reasons[name]}\n".encode()
        for name, nr in arch.numbers.items()
        if name in reasons
    }


_installed: list[object] = []  # the handler and its messages, alive for the process's life


def _install_sigsys_handler(arch: _Arch) -> None:
    messages = _messages(arch)
    write, raise_signal, set_default = os.write, _libc["raise"], _libc.signal
    set_default.argtypes = [ctypes.c_int, ctypes.c_void_p]

    def on_sigsys(_signum: int, info: int | None, _context: int | None) -> None:
        nr = ctypes.c_int.from_address(info + 24).value if info else -1  # siginfo_t._syscall
        text = messages.get(nr) or f"{TAG} blocked system call {nr}\n".encode()
        with contextlib.suppress(OSError):
            write(2, text)
        set_default(signal.SIGSYS, None)  # then die by the (pending) SIGSYS
        raise_signal(signal.SIGSYS)

    handler = _HANDLER(on_sigsys)
    action = _Sigaction()
    action.handler = ctypes.cast(handler, ctypes.c_void_p).value
    action.flags = SA_SIGINFO
    if _libc.sigaction(signal.SIGSYS, ctypes.byref(action), None) != 0:
        raise _fail("sigaction(SIGSYS)")
    _installed.append((handler, messages))


# -- Landlock -------------------------------------------------------------------------------
class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def fs_rights(abi: int) -> tuple[int, int]:
    """(every file-system right this ABI knows, those that apply to a file)."""
    file = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE
    file |= FS_TRUNCATE if abi >= 3 else 0
    file |= FS_IOCTL_DEV if abi >= 5 else 0
    every = file | FS_READ_DIR | FS_DIR_ONLY_V1 | (FS_REFER if abi >= 2 else 0)
    return every, file


READ = FS_READ_FILE | FS_READ_DIR


class _Ruleset:
    """A Landlock ruleset being built; ``restrict`` enforces it on this thread (and, with
    ``tsync``, on every thread) and the threads started later."""

    def __init__(self, abi: int, net: bool = False, scope: bool = False) -> None:
        self.abi = abi
        self.every, self.file = fs_rights(abi)
        attr = _RulesetAttr(self.every, 0, 0)
        size = 8
        if net and abi >= 4:
            attr.handled_access_net, size = NET_BIND_TCP | NET_CONNECT_TCP, 16
        if scope and abi >= 6:
            attr.scoped, size = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL, 24
        self.fd = _syscall(LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0)
        if self.fd < 0:
            raise _fail("landlock_create_ruleset")

    def allow(self, path: str | Path, access: int) -> bool:
        """Allow ``access`` beneath ``path`` (file rights only, where it is not a folder);
        False where the path does not exist."""
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                access &= self.file
            rule = _PathBeneath(access & self.every, fd)
            if _syscall(LANDLOCK_ADD_RULE, self.fd, LANDLOCK_RULE_PATH_BENEATH,
                        ctypes.byref(rule), 0) != 0:  # fmt: skip
                raise _fail(f"landlock_add_rule({path})")
        finally:
            os.close(fd)
        return True

    def restrict(self, tsync: bool = False) -> None:
        flags = LANDLOCK_RESTRICT_SELF_TSYNC if tsync else 0
        try:
            if _syscall(LANDLOCK_RESTRICT_SELF, self.fd, flags) != 0:
                raise _fail("landlock_restrict_self")
        finally:
            os.close(self.fd)


def _proc_entries() -> Iterator[str]:
    """/proc's entries that are not a process (cpuinfo, driver, sys, ...)."""
    with contextlib.suppress(OSError), os.scandir("/proc") as it:
        for entry in it:
            if not entry.name.isdigit() and entry.name not in ("self", "thread-self"):
                yield entry.path


def _mapped_folders() -> set[str]:
    """Folders of the shared objects this process has mapped (libraries found at run time)."""
    folders = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
            if path.startswith("/") and ".so" in path and not path.endswith("(deleted)"):
                folders.add(str(Path(path).parent))
    return folders


def _python_folders() -> set[str]:
    """Python's installation and import path, without the working directory (the user's
    project: it may hold secrets)."""
    cwd = os.path.realpath(os.getcwd())
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    found |= {p for p in sys.path if p and os.path.isdir(p) and os.path.realpath(p) != cwd}
    found.add(str(Path(__file__).resolve().parents[1]))  # the cudamaster package
    return found


SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/etc/ld.so.cache",
               "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/sys")  # fmt: skip
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


def _devices() -> list[str]:
    with contextlib.suppress(OSError):
        return [*DEVICES, *(str(p) for p in Path("/dev").glob("nvidia*"))]
    return list(DEVICES)


# -- the worker's confinement ---------------------------------------------------------------
@dataclass
class Confinement:
    """The layers a worker puts on itself, one step at a time (see the module docstring);
    ``features`` are those in force now, ``gaps`` what is not enforced and why."""

    on: bool = field(default_factory=enabled)
    support: Support = field(default_factory=kernel_support)
    features: list[str] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    profiles: set[Profile] = field(default_factory=set)
    readable: tuple[Path, ...] = ()  # what a candidate may read besides the system
    writable: Path | None = None  # the one folder a candidate may write (its output slots)
    _own: int | None = None  # an O_PATH descriptor of /proc/<pid> (see startup)

    @property
    def arch(self) -> _Arch | None:
        return ARCHES.get(self.support.arch)

    def planned(self) -> tuple[list[str], list[str]]:
        """What this worker will enforce on a candidate, and the gaps (for the Init reply)."""
        features, gaps = plan(self.support, self.on)
        if "landlock-startup" not in self.features:  # not made (or it failed: see the gaps)
            features = [f for f in features if f != "landlock-startup"]
        return features, [*gaps, *(g for g in self.gaps if g not in gaps)]

    def startup(self) -> None:
        """The startup layer: every file but other processes' /proc entries; /proc and /sys
        read-only. Made before any thread exists, so that every later thread has it."""
        if not self.on or not self.support.landlock_abi or "landlock-startup" in self.features:
            return
        threads = len(os.listdir("/proc/self/task"))
        if threads > 1:
            self.gaps.append(f"landlock-startup: {threads - 1} thread(s) started before it")
        try:
            rules = _Ruleset(self.support.landlock_abi)
        except SandboxError as exc:
            self.gaps.append(f"landlock-startup: {exc}")
            return
        try:
            with os.scandir("/") as it:
                for entry in it:
                    if entry.name != "proc":
                        rules.allow(entry.path, READ if entry.name == "sys" else rules.every)
            for path in _proc_entries():
                rules.allow(path, READ)
            # this process's own folder: the rule holds the inode, and /proc makes a new inode
            # for a folder whose dentry was dropped; a descriptor kept open keeps the dentry
            self._own = os.open(f"/proc/{os.getpid()}", os.O_PATH | os.O_CLOEXEC)
            rules.allow(f"/proc/{os.getpid()}", rules.every)
            if not effective_caps() & (1 << CAP_SYS_ADMIN):
                _no_new_privs()  # Landlock needs it, or CAP_SYS_ADMIN
        except (SandboxError, OSError) as exc:  # left out, and said, rather than a dead worker
            os.close(rules.fd)
            self.gaps.append(f"landlock-startup: {exc}")
            log.warning("sandbox: no startup layer: %s", exc)
            return
        rules.restrict()
        self.features.append("landlock-startup")

    def confine(self, profile: Profile, readable: Iterable[Path] = (),
                writable: Path | None = None) -> None:  # fmt: skip
        """Apply ``profile`` now: for a trusted library before it is loaded, for a candidate
        before its library is loaded, with ``readable`` what it may read besides the system
        (its library, the folder of every case's inputs) and ``writable`` the one folder it may
        write (its own output slots: not another worker's, whose outputs it could copy).
        SandboxError where the kernel refuses a step it supports."""
        if not self.on or profile in self.profiles:
            return
        arch = self.arch
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGSYS would dump core
        if arch is not None:
            _install_sigsys_handler(arch)
        _no_new_privs()
        _drop_capabilities()
        self._add("nocaps")
        abi = self.support.landlock_abi
        if profile is Profile.UNTRUSTED and abi:
            self._landlock(abi, readable, writable)
        if self.support.seccomp and arch is not None:
            _apply_seccomp(arch, profile)
            self._add("seccomp" if profile is Profile.UNTRUSTED else "seccomp-trusted")
        self.profiles.add(profile)
        log.debug("sandbox: %s profile in force: %s", profile.value, ", ".join(self.features))

    def _landlock(self, abi: int, readable: Iterable[Path], writable: Path | None) -> None:
        rules = _Ruleset(abi, net=True, scope=True)
        library_path = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
        folders: list[str | Path] = [*SYSTEM_READ, *_python_folders(), *_mapped_folders()]
        readable = list(readable)
        for path in [*folders, *library_path, *readable]:
            rules.allow(path, READ)
        for path in _proc_entries():
            rules.allow(path, READ)
        rules.allow(f"/proc/{os.getpid()}", READ)
        for device in _devices():
            rules.allow(device, FS_READ_FILE | FS_WRITE_FILE | FS_IOCTL_DEV)
        if writable is not None and not rules.allow(writable, rules.every):
            raise SandboxError(f"the output folder {writable} does not exist")
        self.readable, self.writable = tuple(Path(p) for p in readable), writable
        rules.restrict(tsync=abi >= 8)
        self._add("landlock")
        if abi >= 4:
            self._add("landlock-net")
        if abi >= 6:
            self._add("landlock-scope")

    def _add(self, feature: str) -> None:
        if feature not in self.features:
            self.features.append(feature)
