"""The GPUs of this host and how work is spread over them: one evaluation at a time per GPU.

``GpuPool.lease()`` hands out a free GPU and pins the calling thread to it: every worker,
ncu or compute-sanitizer process that thread starts sees only that GPU (CUDA_VISIBLE_DEVICES
set to its UUID), so timings are never taken with two evaluations sharing a GPU, and every
number can name the GPU that produced it.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import queue
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TypeVar

from .errors import UserError

log = logging.getLogger(__name__)
J = TypeVar("J")
R = TypeVar("R")
#: how every "there is no GPU here" error begins (a run then goes on without one)
NO_GPU = "no GPU found"


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    @property
    def pinned(self) -> bool:
        return bool(self.uuid)

    @classmethod
    def default(cls, name: str = "the default GPU") -> Gpu:
        """The GPU CUDA picks by itself: running on it pins nothing."""
        return cls(0, "", name)


_PINNED: contextvars.ContextVar[Gpu | None] = contextvars.ContextVar("pinned_gpu", default=None)


def pinned() -> Gpu | None:
    """The GPU the calling thread is pinned to, if any (the default GPU pins nothing)."""
    gpu = _PINNED.get()
    return gpu if gpu is not None and gpu.pinned else None


@contextlib.contextmanager
def pin(gpu: Gpu | None) -> Iterator[Gpu | None]:
    """Pin the calling thread to gpu for the block (None: no pinning)."""
    token = _PINNED.set(gpu)
    try:
        yield gpu
    finally:
        _PINNED.reset(token)


def nvidia_smi(*args: str) -> list[str]:
    """nvidia-smi's output lines for a query, or a one-line UserError saying why there are none."""
    if not shutil.which("nvidia-smi"):
        raise UserError(f"{NO_GPU}: nvidia-smi is not on PATH (this command needs an NVIDIA GPU)")
    proc = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise UserError(f"{NO_GPU}: nvidia-smi says {msg[0] if msg else 'nothing'}")
    return proc.stdout.strip().splitlines()


def list_gpus() -> list[Gpu]:
    """Every GPU nvidia-smi sees, in its index order."""
    gpus = []
    for line in nvidia_smi("--query-gpu=index,uuid,name", "--format=csv,noheader"):
        index, uuid, name = (x.strip() for x in line.split(",", 2))
        gpus.append(Gpu(int(index), uuid, name))
    return gpus


def _indices(spec: str) -> list[int] | None:
    """The GPU indices a --gpus option names, None for 'all'; a UserError for anything else."""
    if spec.strip() == "all":
        return None
    try:
        return list(dict.fromkeys(int(part) for part in spec.split(",")))
    except ValueError:
        raise UserError(f"--gpus takes 'all' or indices like 0,2 (got {spec!r})") from None


def select(spec: str | None, available: list[Gpu] | None = None) -> list[Gpu]:
    """The GPUs a --gpus option names: 'all', or indices like '0,2'; None means GPU 0."""
    indices = _indices(spec) if spec is not None else None
    available = list_gpus() if available is None else available
    if not available:
        raise UserError(NO_GPU)
    if spec is None:
        return available[:1]
    if indices is None:
        return available
    by_index = {g.index: g for g in available}
    for index in indices:
        if index not in by_index:
            have = ", ".join(str(i) for i in by_index)
            raise UserError(f"--gpus {spec}: there is no GPU {index} (this host has {have})")
    return [by_index[i] for i in indices]


class GpuLost(Exception):
    """A job found its GPU unusable (it fell off the bus, or its context cannot start); the
    job is run again on another GPU and this one is given no more work."""


class GpuPool:
    """One job at a time per GPU, every GPU busy while jobs remain."""

    def __init__(self, gpus: list[Gpu], retries: int = 2) -> None:
        if not gpus:
            raise UserError("no GPU to run on")
        self.gpus = list(gpus)
        self.retries = retries
        self._free: queue.Queue[Gpu | None] = queue.Queue()  # None: every GPU is lost
        for g in self.gpus:
            self._free.put(g)
        self._lost: set[str] = set()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def lease(self) -> Iterator[Gpu]:
        """Wait for a free GPU, pin the calling thread to it for the block, then free it."""
        while True:
            gpu = self._free.get()
            if gpu is None:
                self._free.put(None)  # wake the next waiter too
                raise UserError("every GPU was lost; nothing left to run on")
            if gpu.uuid not in self._lost:
                break
        try:
            with pin(gpu):
                yield gpu
        finally:
            if gpu.uuid not in self._lost:
                self._free.put(gpu)

    def lose(self, gpu: Gpu) -> None:
        """Give gpu no more work; UserError once no GPU is left."""
        with self._lock:
            self._lost.add(gpu.uuid)
            if len(self._lost) == len(self.gpus):
                self._free.put(None)
                raise UserError("every GPU was lost; nothing left to run on")

    def run(
        self,
        jobs: list[J],
        work: Callable[[J, Gpu], R],
        done: Callable[[J, Gpu, R], None] | None = None,
    ) -> list[R]:
        """Run work(job, gpu) for every job, one at a time per GPU, and return the results in
        job order; done(job, gpu, result) is called as each finishes (serialized). A job that
        raises GpuLost runs again elsewhere, at most `retries` times."""
        results: dict[int, R] = {}
        pending: queue.Queue[tuple[int, int]] = queue.Queue()
        for i in range(len(jobs)):
            pending.put((i, 0))
        failure: list[BaseException] = []

        def one(i: int) -> tuple[Gpu, R] | None:
            """The job on a free GPU: its result, or None when the GPU was lost."""
            with self.lease() as gpu:
                try:
                    return gpu, work(jobs[i], gpu)
                except GpuLost as exc:
                    log.warning("GPU %d (%s) lost: %s", gpu.index, gpu.name, exc)
                    self.lose(gpu)
                    return None

        def runner() -> None:
            while not failure:
                try:
                    i, tries = pending.get_nowait()
                except queue.Empty:
                    return
                try:
                    outcome = one(i)
                except BaseException as exc:  # re-raised by run, in the caller
                    failure.append(exc)
                    return
                if outcome is None:
                    if tries >= self.retries:
                        failure.append(UserError(f"a job lost its GPU {tries + 1} times"))
                        return
                    pending.put((i, tries + 1))
                    continue
                gpu, result = outcome
                with self._lock:
                    results[i] = result
                    if done is not None:
                        done(jobs[i], gpu, result)

        threads = [threading.Thread(target=runner, daemon=True) for _ in self.gpus]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failure:
            raise failure[0]
        return [results[i] for i in range(len(jobs))]
