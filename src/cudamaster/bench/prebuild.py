"""Compiling a bench's implementations ahead of their evaluations, into the build cache.

Without cores to spare, everything is compiled before anything runs. With ``cores`` (those that
no timing worker uses, cudamaster.cpus), the compilers run there, in the evaluations' order and
at a lower priority, while the first evaluations go on: an evaluation whose implementation is
still being compiled waits for that build (bench.build locks each one), and short timed calls
stop every compiler as they stop the preparation helper (bench.build.compilers_stopped).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from .build import BuildError, build
from .evaluate import Impl

log = logging.getLogger(__name__)

# Linux nice value of compilers beside the evaluations: the preparation of the case the GPU
# waits for runs at 10 too (bench.prepare.FIRST_NICE), the cases behind it at 19, judging at 0
BUILD_NICE = 10


def compile_all(
    impls: Sequence[Impl], arch: str, cores: tuple[int, ...] | None = None
) -> Future[float]:
    """Compile ``impls`` in order, as many at once as there are cores; returns at once, with
    the seconds it took to come (or the error that stopped it; a compile error is not one: the
    evaluation reports it). With ``cores`` the compilers run on those cores only, at BUILD_NICE."""
    done: Future[float] = Future()
    workers = len(cores) if cores else (os.cpu_count() or 4)

    def one(impl: Impl) -> None:
        with contextlib.suppress(BuildError):  # the evaluation reports it, with nvcc's message
            build(impl.source, arch, impl.links, impl.extra_flags)

    def drive() -> None:
        t0 = time.monotonic()
        try:
            with ThreadPoolExecutor(workers, initializer=_confine, initargs=(cores,)) as pool:
                list(pool.map(one, impls))
        except BaseException as exc:
            done.set_exception(exc)
            return
        seconds = time.monotonic() - t0
        log.info("compiled %d implementations in %.1f s", len(impls), seconds)
        done.set_result(seconds)

    threading.Thread(target=drive, name="prebuild", daemon=True).start()
    return done


def _confine(cores: tuple[int, ...] | None) -> None:
    """Run this thread, and so the compilers it starts, on ``cores`` at BUILD_NICE (a Linux
    thread's affinity and nice value are its own, and its children inherit them)."""
    if not cores:
        return
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setaffinity(0, cores)
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BUILD_NICE)
