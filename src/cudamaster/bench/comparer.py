"""The device-side byte comparer the worker uses (csrc/compare.cu), built once per arch.

With it, the checks that inputs are unchanged and that outputs were complete when the call
returned run on the GPU instead of copying every buffer to the host; without it (no nvcc, a
failed build) the worker falls back to host copies, which is slower but checks the same."""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path

from ..errors import UserError
from .build import BuildError, build

log = logging.getLogger(__name__)
SOURCE = Path(__file__).resolve().parents[1] / "csrc" / "compare.cu"


def comparer_library(arch: str) -> str | None:
    """Path of the built comparer for arch; $CUDAMASTER_COMPARER names another (tests)."""
    override = os.environ.get("CUDAMASTER_COMPARER")
    if override is not None:
        return override or None  # set but empty: compare through host copies
    return _built(arch)


@functools.cache
def _built(arch: str) -> str | None:
    try:
        return str(build(SOURCE, arch).library)
    except (BuildError, UserError) as exc:
        log.warning("device comparer unavailable (%s); comparing through host copies", exc)
        return None
