"""The coordinator's handle on one worker process: spawn, request with a timeout, kill.

A worker killed by SIGSYS was stopped by its sandbox (bench/sandbox.py): the verdict is
``sandbox_violation``, with the line the worker wrote naming the blocked system call. Whatever
confinement a worker cannot apply (its Init reply's ``sandbox_gaps``) is logged once per
process, and recorded in every report with the rest of the Init reply.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TypeVar

from .. import cpus
from ..gpus import pinned
from .protocol import (
    Exit,
    Fatal,
    InitReply,
    LoadReply,
    ProtocolError,
    Reply,
    Request,
    SetupReply,
    decode_reply,
    encode_request,
)
from .sandbox import TAG, WORKER_ENV

log = logging.getLogger(__name__)

#: Environment variables never passed to a worker, nvcc or binutils (API keys, other secrets).
SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH", re.IGNORECASE)
R = TypeVar("R", bound=Reply)
_warned: set[str] = set()  # sandbox gaps already logged by this process


def without_secrets() -> dict[str, str]:
    """This process's environment without anything whose name looks like a secret."""
    return {k: v for k, v in os.environ.items() if not SECRET.search(k)}


def worker_env() -> dict[str, str]:
    """The parent's environment without anything that looks like a secret; a thread pinned to
    a GPU (cudamaster.gpus.pin) gets only that GPU."""
    env = without_secrets()
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    gpu = pinned()
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu.uuid
    return env


class WorkerDied(Exception):
    """The worker crashed, exited or hung; ``verdict`` is crash, timeout, runtime_error or
    sandbox_violation."""

    def __init__(self, verdict: str, detail: str) -> None:
        super().__init__(detail)
        self.verdict = verdict
        self.detail = detail


class WorkerClient:
    """One live worker process running one implementation."""

    def __init__(self, label: str, cores: tuple[int, ...] | None = None) -> None:
        """``cores``: the only CPUs the worker may run on (cudamaster.cpus), or any."""
        self.label = label
        # the worker's stderr: a file without a name (gone with the last descriptor, even if
        # this process is killed), read back into the details of a crash or a violation
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cudamaster.bench.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env={**worker_env(), **WORKER_ENV, **cpus.env(cores)},
            start_new_session=True,
        )
        self.sandbox: list[str] = []  # the confinement in force, as the worker last said
        self.selector = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self.selector.register(self.proc.stdout, selectors.EVENT_READ)
        self._buffer = b""

    def _stderr_text(self) -> str:
        """What the worker has written to its stderr so far."""
        try:
            fd = self.stderr.fileno()
            return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")
        except (OSError, ValueError):  # closed
            return ""

    def stderr_tail(self, lines: int = 8) -> str:
        text = self._stderr_text()
        keep = [ln for ln in text.splitlines() if ln.strip()][-lines:]
        return " | ".join(keep)

    def request(self, timeout_s: float, req: Request[R]) -> R:
        """Send one request and wait for its reply; WorkerDied on crash, exit, timeout or a
        failure that the worker reported (it exits then)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write((encode_request(req) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died() from None
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise WorkerDied("timeout", f"no answer to {req.cmd} within {timeout_s:.0f} s")
            if not self.selector.select(timeout=min(remaining, 1.0)):
                if self.proc.poll() is not None:
                    raise self._died()
                continue
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                raise self._died()
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            reply = decode_reply(line, req.reply_type())
        except ProtocolError as exc:  # the worker's reply channel carried something else
            self.kill()
            raise WorkerDied("runtime_error", f"unreadable reply to {req.cmd}: {exc}") from None
        if isinstance(reply, Fatal):
            self.kill()
            raise WorkerDied(reply.verdict, reply.error)
        if isinstance(reply, InitReply):
            self.sandbox = []
            for gap in reply.sandbox_gaps:
                if gap not in _warned:
                    _warned.add(gap)
                    log.warning("sandbox: %s", gap)
        elif isinstance(reply, LoadReply | SetupReply):
            self.sandbox = list(reply.sandbox)
        return reply

    def _died(self) -> WorkerDied:
        code = self.proc.wait(timeout=30)
        if code == -signal.SIGSYS:
            return WorkerDied("sandbox_violation", self._violation())
        if code < 0:
            sig = signal.Signals(-code).name
            return WorkerDied("crash", f"worker killed by {sig}; stderr: {self.stderr_tail()}")
        return WorkerDied("crash", f"worker exited with code {code}; stderr: {self.stderr_tail()}")

    def _violation(self) -> str:
        """What the sandbox stopped: the line the worker's SIGSYS handler wrote."""
        text = self._stderr_text()
        said = [ln.removeprefix(TAG).strip() for ln in text.splitlines() if ln.startswith(TAG)]
        # unnamed where the call was made with signals blocked (glibc's posix_spawn, under
        # system()): the kernel then kills without running the handler
        what = said[-1] if said else "a forbidden system call (killed by SIGSYS, unnamed)"
        return f"the sandbox stopped it: {what}"

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write((encode_request(Exit()) + "\n").encode())
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        self.selector.close()
        self.stderr.close()


class WorkerPool:
    """Workers of trusted implementations (baselines, library baselines), kept alive across
    evaluations so that a bench does not pay a process start, a CUDA context and the vendor
    libraries' load for every task: each new evaluation loads its library into the same
    process. Candidates never come from the pool: each gets a fresh process."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, str], tuple[WorkerClient, InitReply]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(label: str) -> tuple[str, str]:
        gpu = pinned()  # a worker serves the GPU it was started on
        return label, gpu.uuid if gpu else ""

    def take(self, label: str) -> tuple[WorkerClient, InitReply] | None:
        with self._lock:
            entry = self._idle.pop(self._key(label), None)
        if entry is None:
            return None
        if entry[0].alive:
            return entry
        entry[0].close()
        return None

    def give(self, label: str, worker: WorkerClient, info: InitReply) -> None:
        with self._lock:
            old = self._idle.pop(self._key(label), None)
            self._idle[self._key(label)] = (worker, info)
        if old is not None:
            old[0].close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = list(self._idle.values()), {}
        for worker, _ in idle:
            worker.close()
