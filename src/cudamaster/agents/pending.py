"""Run a round's independent steps together, so that one step waiting (for a model's answer
or for a GPU) does not hold back its siblings: every step runs as far as it can, then the
round stops with the reason that matters most."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ..llm.base import AnswerPending
from .backend import NeedsGpu

log = logging.getLogger(__name__)
T = TypeVar("T")


def gather(jobs: list[Callable[[], T]], workers: int | None = None) -> list[T]:
    """Every job's result, in order. When some raise: the first error that is neither a
    pending answer nor a GPU need (it is a real failure or a spent budget); else the first
    AnswerPending (the model has work to do here); else the first NeedsGpu."""
    if not jobs:
        return []
    with ThreadPoolExecutor(max_workers=workers or len(jobs)) as pool:
        futures = [pool.submit(job) for job in jobs]
    errors = [e for f in futures if (e := f.exception()) is not None]
    if not errors:
        return [f.result() for f in futures]
    waiting = [e for e in errors if isinstance(e, AnswerPending)]
    if len(waiting) > 1:
        log.info("%d answers pending (first: %s)", len(waiting), waiting[0].request_path)
    other = [e for e in errors if not isinstance(e, AnswerPending | NeedsGpu)]
    raise (other or waiting or errors)[0]
