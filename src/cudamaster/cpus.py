"""Host cores: those that time calls are never shared with input preparation.

A timed call includes its host-side launch, so a worker whose core is taken by another busy
thread can lose microseconds, or a whole time slice, inside the timed region. Where the host has
enough cores, each GPU's workers get physical cores of their own (with their hyperthread
siblings) and the preparation helpers get the rest, so inputs and oracles are made while calls
are timed. With too few cores there is no split, and the helpers are stopped while anything is
timed (cudamaster.bench.prepare).

A process started with CUDAMASTER_CPUS (a list like ``0,1,8,9``) confines itself to those cores
when cudamaster is imported, before numpy and its thread pools are loaded.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ENV = "CUDAMASTER_CPUS"
ONE_CPU_ENV = "CUDAMASTER_ONE_CPU"
TIMING_CORES = 2  # physical cores per GPU for its workers (one times, the other waits)
MIN_HELPER_CPUS = 4  # fewer left for the helpers: no split


@dataclass(frozen=True)
class Split:
    """The cores of one GPU's workers, and the cores every preparation helper may use."""

    timing: tuple[int, ...]
    helpers: tuple[int, ...]


def available() -> set[int]:
    """The CPUs this process may run on."""
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return set(range(os.cpu_count() or 1))


def siblings(cpu: int) -> tuple[int, ...]:
    """The hyperthreads of ``cpu``'s physical core (itself alone when the kernel does not say)."""
    path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    try:
        return parse(path.read_text()) or (cpu,)
    except (OSError, ValueError):
        return (cpu,)


def physical_cores(
    cpus: set[int], siblings_of: Callable[[int], tuple[int, ...]] = siblings
) -> list[tuple[int, ...]]:
    """``cpus`` grouped into physical cores (hyperthread siblings together), in order."""
    groups: dict[tuple[int, ...], None] = {}
    for cpu in sorted(cpus):
        groups[tuple(c for c in siblings_of(cpu) if c in cpus) or (cpu,)] = None
    return list(groups)


def split_for(
    slot: int,
    slots: int,
    cpus: set[int] | None = None,
    siblings_of: Callable[[int], tuple[int, ...]] = siblings,
) -> Split | None:
    """Timing cores for GPU ``slot`` of ``slots``, and the helpers' cores (those of no slot);
    None when the helpers would be left fewer than MIN_HELPER_CPUS."""
    cores = physical_cores(available() if cpus is None else cpus, siblings_of)
    reserved = TIMING_CORES * slots
    helpers = tuple(sorted(c for core in cores[reserved:] for c in core))
    if slot >= slots or len(helpers) < MIN_HELPER_CPUS:
        return None
    mine = cores[TIMING_CORES * slot : TIMING_CORES * (slot + 1)]
    return Split(tuple(sorted(c for core in mine for c in core)), helpers)


@functools.cache
def _host_gpus() -> int:
    from .errors import UserError
    from .gpus import list_gpus

    try:
        return max(1, len(list_gpus()))
    except UserError:
        return 1


def split() -> Split | None:
    """The split for the GPU the calling thread is pinned to (GPU 0 when none), with cores
    kept for every GPU of the host."""
    from .gpus import pinned

    gpu = pinned()
    index = gpu.index if gpu is not None else 0
    return split_for(index, max(_host_gpus(), index + 1))


def parse(text: str) -> tuple[int, ...]:
    """A kernel CPU list ('0-3,8,10-11') as CPU numbers."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


def env(cores: tuple[int, ...] | None) -> dict[str, str]:
    """Environment entries that confine a cudamaster child process to ``cores``."""
    return {ENV: ",".join(map(str, cores))} if cores else {}


def confine_from_env() -> None:
    """Run only on the cores CUDAMASTER_CPUS names, if it is set (see the module docstring)."""
    text = os.environ.get(ENV)
    if not text:
        return
    with contextlib.suppress(AttributeError, OSError, ValueError):  # not Linux, or no such core
        os.sched_setaffinity(0, parse(text))


@contextlib.contextmanager
def one_cpu() -> Iterator[int]:
    """Every thread of this process on a single CPU, the lowest it may use, for the block (timed
    calls): every worker of a GPU may use the same CPUs, so all of them time on the same one.

    Measured (scripts/aa-causes.py, H100 host, six workers of one baseline taking turns): on two
    timing CPUs, each worker stayed on the CPU where it started, and the CPU set its time: a
    16 us vector_add took ~15.9 us on CPU 0 and ~16.9 us on CPU 1 (process medians 6.9% apart,
    7x what their standard errors explain); a 60 us softmax alternated 57.8 / 60.7 us between
    the CPUs in some runs. With every worker's calls on one CPU: 3.1% and 0.7% apart.

    ONE_CPU_ENV=0 turns it off, to measure what it changes (``cudamaster aa``)."""
    allowed = available()
    if os.environ.get(ONE_CPU_ENV) == "0":
        yield -1
        return
    cpu = min(allowed)
    _set_threads({cpu})
    try:
        yield cpu
    finally:
        _set_threads(allowed)


def _set_threads(cpus: set[int]) -> None:
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # not Linux
        return
    for tid in tids:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(tid, cpus)
