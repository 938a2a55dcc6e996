"""Compiling beside the evaluations: in order, on the cores given, at a lower priority, and
never while a short call is timed (every compiler is stopped, none starts)."""

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from cudamaster.bench import build as build_module
from cudamaster.bench import prebuild
from cudamaster.bench.evaluate import Impl
from cudamaster.errors import UserError

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux only")


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _wait_for(condition, limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_compiles_run_in_order_on_the_cores_given_at_a_lower_priority(monkeypatch):
    seen = []

    def fake_build(source, arch, links=(), extra_flags=()):
        tid = threading.get_native_id()
        seen.append((source.name, os.sched_getaffinity(0), os.getpriority(os.PRIO_PROCESS, tid)))

    monkeypatch.setattr(prebuild, "build", fake_build)
    before = os.sched_getaffinity(0)
    core = min(before)
    impls = [Impl(f"i{k}", Path(f"s{k}.cu")) for k in range(3)]
    seconds = prebuild.compile_all(impls, "sm_90", (core,)).result(timeout=30)
    assert seconds >= 0
    assert [name for name, _, _ in seen] == ["s0.cu", "s1.cu", "s2.cu"]  # one core: in order
    assert all(cpus == {core} for _, cpus, _ in seen)
    assert all(nice >= prebuild.BUILD_NICE for _, _, nice in seen)
    assert os.sched_getaffinity(0) == before  # the caller's thread is left as it was


def test_an_error_that_stops_compiling_reaches_the_caller(monkeypatch):
    def broken(*_args, **_kwargs):
        raise UserError("nvcc not found")

    monkeypatch.setattr(prebuild, "build", broken)
    done = prebuild.compile_all([Impl("x", Path("x.cu"))], "sm_90")
    with pytest.raises(UserError, match="nvcc not found"):
        done.result(timeout=30)


def test_a_compiler_is_stopped_while_a_short_call_is_timed_and_none_starts():
    compilers = build_module._Compilers()
    busy = [sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 30: pass"]
    first = threading.Thread(target=compilers.run, args=(busy,), daemon=True)
    first.start()
    _wait_for(lambda: len(compilers.groups) == 1)
    (pid,) = compilers.groups
    started = []
    with compilers.stopped():
        _wait_for(lambda: _state(pid) == "T")  # stopped (SIGSTOP to its process group)
        second = threading.Thread(
            target=lambda: started.append(compilers.run([sys.executable, "-c", "pass"])),
            daemon=True,
        )
        second.start()
        time.sleep(0.3)
        assert not started and compilers.groups == {pid}  # the second waits for the end
    _wait_for(lambda: _state(pid) in "RS")  # going on
    second.join(10)
    assert started and started[0][0] == 0  # the second ran once the block ended
    os.killpg(pid, 9)
    first.join(10)
    assert not compilers.groups


def test_the_preparers_strict_quiet_stops_the_compilers_too():
    from cudamaster.bench.prepare import Preparer

    prep = Preparer(cores=(0,))  # a helper with cores of its own (not started: nothing to stop)
    try:
        with prep.quiet():
            assert build_module._COMPILERS.stops == 0  # long calls: compiling goes on
        with prep.quiet(strict=True):
            assert build_module._COMPILERS.stops == 1
        assert build_module._COMPILERS.stops == 0
    finally:
        prep.close()
