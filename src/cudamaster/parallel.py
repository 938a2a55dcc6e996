"""Run numpy work over blocks of rows on all cores: numpy releases the GIL inside its loops,
so threads scale on large arrays. Oracles of big cases use it (tasks/*/reference.py)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .cpus import available

MIN_BLOCK = 1 << 18  # elements per block below which a thread costs more than it saves


def threads() -> int:
    return max(1, min(len(available()), 16))


def over_rows(lo: int, hi: int, row_size: int, fn: Callable[[int, int], None]) -> None:
    """Call fn(a, b) on consecutive row ranges covering [lo, hi), in parallel when it pays.
    fn must write only its own rows."""
    rows = hi - lo
    if rows <= 0:
        return
    blocks = max(1, min(threads() * 2, rows * max(row_size, 1) // MIN_BLOCK, rows))
    if blocks == 1:
        fn(lo, hi)
        return
    edges = [lo + rows * i // blocks for i in range(blocks + 1)]
    with ThreadPoolExecutor(min(threads(), blocks)) as pool:
        list(pool.map(lambda i: fn(edges[i], edges[i + 1]), range(blocks)))
