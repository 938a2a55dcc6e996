"""The worker's kernel sandbox (bench/sandbox.py) on this machine, without CUDA: a Python
process applies the confinement a worker applies, then tries each escape; each is refused by the
kernel (the process killed by SIGSYS, naming the call, or the file refused with EACCES), while
threads, imports and the case folder keep working. A feature the kernel lacks is skipped with
its reason, never passed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cudamaster.bench import sandbox
from cudamaster.bench.sandbox import (
    AARCH64,
    RET_ALLOW,
    RET_ERRNO,
    RET_KILL_PROCESS,
    RET_TRAP,
    TAG,
    X86_64,
    Profile,
    Support,
    kernel_support,
    plan,
)

SUPPORT = kernel_support()
needs_seccomp = pytest.mark.skipif(not SUPPORT.seccomp, reason=SUPPORT.seccomp_why or "seccomp")
needs_landlock = pytest.mark.skipif(
    not SUPPORT.landlock_abi, reason=SUPPORT.landlock_why or "no Landlock"
)
SRC = str(Path(__file__).resolve().parents[1] / "src")

# the child: confine itself as a worker does (startup layer, then a profile), then run ACTION
CHILD = textwrap.dedent(
    """
    import ctypes, json, os, socket, sys, threading
    from pathlib import Path
    from cudamaster.bench import sandbox
    profile, root, action = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    c = sandbox.Confinement()
    c.startup()
    if profile != "startup":
        if profile == "worker":  # as a candidate's worker: every case readable, its slots writable
            c.confine(sandbox.Profile.UNTRUSTED, [root / "cases"], root / "slots" / "mine")
        else:
            c.confine(sandbox.Profile(profile), writable=root if profile == "untrusted" else None)
    try:
        result = eval(compile(action, "action", "exec" if "\\n" in action else "eval"))
    except OSError as exc:
        print(json.dumps({"refused": exc.errno}))
    else:
        print(json.dumps({"ok": repr(result)}))
    """
)


def confined(
    tmp_path: Path, action: str, profile: str = "untrusted"
) -> subprocess.CompletedProcess[str]:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": SRC, **sandbox.WORKER_ENV}
    env.pop(sandbox.ENV, None)
    return subprocess.run([sys.executable, "-c", CHILD, profile, str(root), action],
                          capture_output=True, text=True, timeout=60, env=env,
                          cwd=tmp_path)  # fmt: skip


def outcome(proc: subprocess.CompletedProcess) -> dict:
    if proc.returncode == -signal.SIGSYS:
        said = [ln for ln in proc.stderr.splitlines() if ln.startswith(TAG)]
        return {"killed": said[-1] if said else ""}
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- what the kernel offers -----------------------------------------------------------------
def test_plan_names_every_feature_the_kernel_lacks():
    nothing = Support("x86_64", False, 0, "seccomp filters unavailable", "no Landlock")
    features, gaps = plan(nothing, on=True)
    assert features == ["nocaps"]
    assert any(g.startswith("seccomp:") for g in gaps)
    assert any(g.startswith("landlock:") for g in gaps)
    features, gaps = plan(Support("x86_64", True, 5), on=True)
    assert "landlock-net" in features and "landlock-scope" not in features
    assert any("TSYNC" in g for g in gaps)  # ABI 5 < 8: earlier threads are not covered
    features, gaps = plan(Support("x86_64", True, 8), on=True)
    assert "landlock-scope" in features and gaps == []
    assert plan(Support("x86_64", True, 8), on=False) == (
        [],
        [f"off: {sandbox.ENV}=0 (debugging only): candidates run unconfined"],
    )


def test_this_kernel_is_probed_not_assumed():
    print(f"\n[kernel] {os.uname().release}: {SUPPORT}")
    features, gaps = plan(SUPPORT, on=True)
    assert ("seccomp" in features) == SUPPORT.seccomp
    assert ("landlock" in features) == bool(SUPPORT.landlock_abi)
    assert len(features) + len(gaps) >= 3


# -- the seccomp filter, decision by decision (both architectures, without loading it) ------
def run_bpf(prog: list[tuple[int, int, int, int]], nr: int, arch: int, arg0: int = 0) -> int:
    """A tiny classic-BPF interpreter for the instructions the filter uses."""
    data = {0: nr, 4: arch, 16: arg0 & 0xFFFFFFFF}
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == 0x20:
            acc = data[k]
        elif code == 0x06:
            return k
        else:
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if taken else jf
        pc += 1


@pytest.mark.parametrize("arch", [X86_64, AARCH64], ids=lambda a: a.name)
def test_the_filter_decides_each_call_as_documented(arch):
    pid = 4242
    untrusted = sandbox._filter(arch, Profile.UNTRUSTED, pid)
    trusted = sandbox._filter(arch, Profile.TRUSTED, pid)
    n = arch.numbers

    def decide(prog, name, arg0=0, audit=arch.audit):
        return run_bpf(prog, n[name], audit, arg0)

    for name in ("execve", "execveat", "ptrace", "process_vm_readv", "io_uring_setup", "unshare"):
        assert decide(untrusted, name) == RET_TRAP, name
        assert decide(trusted, name) == RET_TRAP, name
    assert decide(untrusted, "clone3") == RET_ERRNO | 38  # ENOSYS: libc falls back to clone
    assert decide(untrusted, "clone", 0x3D0F00) == RET_ALLOW  # pthread_create's flags
    assert decide(untrusted, "clone", signal.SIGCHLD) == RET_TRAP  # fork
    assert decide(untrusted, "socket", 2) == RET_TRAP  # AF_INET
    assert decide(untrusted, "socket", 16) == RET_TRAP  # AF_NETLINK
    assert decide(untrusted, "socket", 1) == RET_ERRNO | 1  # AF_UNIX: EPERM for candidates
    assert decide(trusted, "socket", 1) == RET_ALLOW
    assert decide(trusted, "socket", 10) == RET_TRAP  # AF_INET6
    assert decide(untrusted, "kill", pid) == RET_ALLOW
    assert decide(untrusted, "kill", pid + 1) == RET_TRAP
    assert decide(untrusted, "kill", -1) == RET_TRAP
    assert decide(untrusted, "tgkill", pid) == RET_ALLOW
    assert decide(untrusted, "ioctl") == RET_ALLOW
    assert run_bpf(untrusted, 0, arch.audit) == RET_ALLOW  # read (x86) / io_setup (arm64)
    assert decide(untrusted, "execve", audit=0x40000003) == RET_KILL_PROCESS  # i386's ABI
    if arch.x32:
        assert run_bpf(untrusted, 0x40000000 + 59, arch.audit) == RET_KILL_PROCESS
    if "fork" in n:
        assert decide(untrusted, "fork") == RET_TRAP and decide(untrusted, "vfork") == RET_TRAP


# -- the escapes, each in a confined process ------------------------------------------------
KILLED = [
    pytest.param("os.system('true')", "clone", id="os.system"),
    pytest.param("os.fork()", "clone", id="os.fork"),
    pytest.param("os.execv('/bin/true', ['true'])", "execve", id="os.execv"),
    pytest.param("socket.socket(socket.AF_INET)", "socket", id="socket-AF_INET"),
    pytest.param("socket.socket(socket.AF_INET6)", "socket", id="socket-AF_INET6"),
    pytest.param("socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)", "socket", id="netlink"),
    pytest.param("socket.socket(socket.AF_PACKET, socket.SOCK_RAW)", "socket", id="packet"),
    pytest.param("os.kill(os.getppid(), 0)", "kill", id="kill-parent"),
    pytest.param(
        "ctypes.CDLL(None).process_vm_readv(os.getppid(), None, 0, None, 0, 0)",
        "process_vm_readv",
        id="process_vm_readv",
    ),
    pytest.param("ctypes.CDLL(None).ptrace(16, os.getppid(), 0, 0)", "ptrace", id="ptrace"),
]


@needs_seccomp
@pytest.mark.parametrize(("action", "call"), KILLED)
def test_a_forbidden_call_kills_the_process_and_names_the_call(tmp_path, action, call):
    proc = confined(tmp_path, action)
    got = outcome(proc)
    assert "killed" in got, (got, proc.stderr[-1000:])
    # os.system's clone runs with every signal blocked: the kernel kills without the handler
    assert got["killed"] == "" or f"blocked {call} " in got["killed"], got
    if action.startswith(("os.fork", "socket", "os.kill", "ctypes")):
        assert f"blocked {call} " in got["killed"], got


@needs_seccomp
def test_unix_sockets_fail_for_candidates_and_work_for_trusted_code(tmp_path):
    action = "socket.socket(socket.AF_UNIX).close()"
    assert outcome(confined(tmp_path, action)) == {"refused": 1}  # EPERM
    assert outcome(confined(tmp_path, action, "trusted")) == {"ok": "None"}


@needs_landlock
@pytest.mark.parametrize(
    "path",
    [
        "/proc/1/environ",
        "/proc/{ppid}/environ",
        "/proc/{ppid}/mem",
        "/proc/{ppid}/maps",
        "/etc/passwd",
        "{outside}",
    ],
)
def test_files_outside_the_allowed_folders_are_refused(tmp_path, path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    action = f"open({path!r}.format(ppid=os.getppid(), outside={str(outside)!r}), 'rb').read(1)"
    assert outcome(confined(tmp_path, action)) == {"refused": 13}  # EACCES


@needs_landlock
def test_other_processes_are_hidden_from_every_thread_by_the_startup_layer(tmp_path):
    action = "open(f'/proc/{os.getppid()}/environ', 'rb').read(1)"
    assert outcome(confined(tmp_path, action, "startup")) == {"refused": 13}
    # and nothing else: the startup layer must not get in CUDA's way
    assert "ok" in outcome(confined(tmp_path, "open('/etc/passwd').read(1)", "startup"))
    assert "ok" in outcome(confined(tmp_path, "open('/proc/self/status').read(1)", "startup"))


@needs_seccomp
@needs_landlock
def test_threads_the_case_folder_and_imports_still_work_under_the_full_profile(tmp_path):
    action = textwrap.dedent(
        """
        done = []
        t = threading.Thread(target=lambda: done.append(threading.get_native_id()))
        t.start(); t.join()
        (root / "case").mkdir()
        (root / "case" / "a.bin").write_bytes(b"x" * 100)
        data = (root / "case" / "a.bin").read_bytes()
        (root / "case" / "a.bin").unlink()
        import json.tool, email.mime.text  # lazy imports from Python's own folders
        status = dict(ln.split(":\\t", 1) for ln in open("/proc/self/status").read().splitlines()
                      if ":\\t" in ln)
        assert done and len(data) == 100
        assert status["NoNewPrivs"].strip() == "1" and status["Seccomp"].strip() == "2"
        assert int(status["CapEff"], 16) == 0 and int(status["CapBnd"], 16) == 0
        assert int(status["CapPrm"], 16) == 0
        """
    )
    assert outcome(confined(tmp_path, action)) == {"ok": "None"}


# -- the optimizer's own process ------------------------------------------------------------
PARENT = textwrap.dedent(
    """
    import os, subprocess, sys
    from cudamaster.bench import sandbox
    # as a user without capabilities (root's children with fewer capabilities than root may
    # not read it anyway: the kernel asks for a subset of the target's capabilities)
    sandbox._no_new_privs(); sandbox._drop_capabilities()
    if sys.argv[1] == "undumpable":
        assert sandbox.make_undumpable()
    child = '''
    import os, ctypes
    from cudamaster.bench import sandbox
    sandbox._no_new_privs(); sandbox._drop_capabilities()
    try:
        print("read" if b"hunter2" in open(f"/proc/{os.getppid()}/environ", "rb").read()
              else "absent")
    except OSError as exc:
        print("refused", exc.errno)
    '''
    print(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True).stdout)
    """
)


@pytest.mark.parametrize(("mode", "expected"), [("undumpable", "refused 13"), ("plain", "read")])
def test_a_non_dumpable_process_hides_its_environment_from_its_children(mode, expected):
    env = {**os.environ, "PYTHONPATH": SRC, "CUDAMASTER_TEST_KEY": "hunter2"}
    proc = subprocess.run([sys.executable, "-c", PARENT, mode], capture_output=True, text=True,
                          timeout=60, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == expected, proc.stdout + proc.stderr


@needs_landlock
def test_a_candidate_reads_the_cases_and_writes_its_own_slots_but_no_other_workers(tmp_path):
    root = tmp_path / "root"
    for folder in ("cases/r1", "slots/mine", "slots/baseline"):
        (root / folder).mkdir(parents=True)
    (root / "cases/r1/set0.bin").write_bytes(b"inputs")
    (root / "slots/baseline/out").write_bytes(b"the baseline's right answer")
    read = "open({!r}, 'rb').read()"
    assert outcome(confined(tmp_path, read.format(str(root / "cases/r1/set0.bin")), "worker")) == {
        "ok": "b'inputs'"
    }
    mine = str(root / "slots/mine/out")
    assert "ok" in outcome(confined(tmp_path, f"open({mine!r}, 'wb').write(b'x')", "worker"))
    theirs = read.format(str(root / "slots/baseline/out"))
    assert outcome(confined(tmp_path, theirs, "worker")) == {"refused": 13}
    case = str(root / "cases/r1/set0.bin")
    assert outcome(confined(tmp_path, f"open({case!r}, 'wb')", "worker")) == {"refused": 13}
