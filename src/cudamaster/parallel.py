"""Run numpy work over blocks of rows on all cores: numpy releases the GIL inside its loops,
so threads scale on large arrays. Oracles of big cases use it (tasks/*/reference.py)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .cpus import available

MIN_BLOCK = 1 << 18  # elements per block below which a thread costs more than it saves
CACHE_BLOCK = 1 << 16  # elements per block of over_rows(cached=True), at most


def threads() -> int:
    return max(1, min(len(available()), 16))


def over_rows(
    lo: int, hi: int, row_size: int, fn: Callable[[int, int], None], cached: bool = False
) -> None:
    """Call fn(a, b) on consecutive row ranges covering [lo, hi), in parallel when it pays.
    fn must write only its own rows. ``cached``: blocks of at most CACHE_BLOCK elements (where
    one row is not larger), for an fn whose float64 temporaries of a block then stay in cache
    (16384^2 stencil_2d: 2 to 3 times faster than in 2 * threads blocks; a transpose or an FFT
    over columns is slower in blocks of few rows)."""
    rows = hi - lo
    if rows <= 0:
        return
    elements = rows * max(row_size, 1)
    blocks = min(threads() * 2, elements // MIN_BLOCK)
    if cached:
        blocks = max(blocks, -(-elements // CACHE_BLOCK))
    blocks = max(1, min(blocks, rows))
    if blocks == 1:
        fn(lo, hi)
        return
    edges = [lo + rows * i // blocks for i in range(blocks + 1)]
    with ThreadPoolExecutor(min(threads(), blocks)) as pool:
        list(pool.map(lambda i: fn(edges[i], edges[i + 1]), range(blocks)))
