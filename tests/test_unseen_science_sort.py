"""Unseen shapes and inputs of the scientific and sorting operators (issue 23).

Every draw from their shape spaces makes small inputs and cheap oracles, and covers every listed
size and value kind. Each known-wrong implementation in tests/fixtures/wrong_unseen/ is
emulated here in numpy, arithmetic and unwritten outputs included (the harness poisons outputs
with NaN, int32 ones with -1): the emulation passes the paper suite (or a smaller stand-in with
the property the fixture relies on) under the task's own tolerance, and fails on some case of
every draw of unseen cases.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from cudamaster import formula
from cudamaster.bench import unseen
from cudamaster.bench.inputs import InputSet, case_seed, make_inputs
from cudamaster.bench.verify import compare
from cudamaster.dtypes import concrete
from cudamaster.tasks import VALUE_KINDS, Case, Task, get_task

OPS = [
    "stencil_2d",
    "stencil_3d",
    "simpson_int",
    "monte_carlo_int",
    "FFT",
    "prefix_sum",
    "sorting",
    "top_k",
]
SEEDS = range(20)  # FFT lists 22 sizes: 20 draws of 6 cover them all
FIXTURES = Path(__file__).parent / "fixtures" / "wrong_unseen"
F32 = np.float32
Outputs = dict[str, np.ndarray]
Emulation = Callable[[InputSet], Outputs]


@pytest.mark.parametrize("op", OPS)
def test_every_draw_makes_small_inputs_cheap_oracles_and_covers_its_lists(op):
    task = get_task(op)
    space = task.spec.unseen
    listed = {name: set(dim) for name, dim in space.dims.items() if isinstance(dim, list)}
    seen: dict[str, set] = {name: set() for name in listed}
    kinds = set()
    checked = set()
    for seed in SEEDS:
        draw = unseen.draw(task, 6, seed)
        assert draw.cases == unseen.draw(task, 6, seed).cases  # replayable
        for case in draw.cases:
            for name in listed:
                seen[name].add(case.params[name])
            kinds.add(unseen.value_kind(case.params))
            for name, bounds in ((n, space.range_of(n)) for n in space.dims):
                if bounds is not None:
                    assert bounds[0] <= case.params[name] <= bounds[1]
            if (shape := tuple(case.params.items())) in checked:
                continue  # sizes and time follow from the parameters (listed ones repeat)
            checked.add(shape)
            for variant in ("fp32", "bf16"):
                inputs = make_inputs(task, case, variant, seed)
                assert sum(inputs.nbytes.values()) < 64 << 20, unseen.label(case)
                dtypes = {a.name: concrete(a.dtype, variant) for a in task.spec.args}
                start = time.perf_counter()
                task.oracle(inputs.values(dtypes), dict(inputs.params), variant)
                assert time.perf_counter() - start < 2.0, unseen.label(case)
    assert seen == listed
    assert kinds == set(space.values)


def test_every_sorting_draw_has_a_ties_case_with_a_key_repeated_five_times():
    """The three value kinds cycle (each twice in 6 cases, 3 apart) and tiny alternates, so one
    'ties' case of every draw has N >= 33 keys drawn from 8 values."""
    task = get_task("sorting")
    for seed in range(200):
        cases = unseen.draw(task, 6, seed).cases
        ties = [c for c in cases if unseen.value_kind(c.params) == "ties"]
        assert len(ties) == 2 and any(c.params["N"] >= 33 for c in ties)


# --- judging an emulated output as the harness does ------------------------------------------


def _inputs(task: Task, case: Case, set_index: int = 0) -> InputSet:
    seed = case_seed(task.name, "fp32", case, set_index, 0)
    return make_inputs(task, case, "fp32", seed)


def _passes(task: Task, inputs: InputSet, outputs: Outputs) -> bool:
    dtypes = {a.name: concrete(a.dtype, "fp32") for a in task.spec.args}
    expected = task.oracle(inputs.values(dtypes), dict(inputs.params), "fp32")
    tol = task.spec.tolerance["fp32"]
    for name, value in expected.items():
        ref, mag = value if isinstance(value, tuple) else (value, None)
        got = np.asarray(outputs[name], dtype=np.float64)
        if not compare(name, got, ref, mag, tol, None, dtypes[name], paper=False).passed:
            return False
    return True


def _traffic(task: Task, case: Case) -> float:
    return formula.evaluate(task.spec.metrics.bytes, task.names(case.params, "fp32"))


def _first_line(fixture: str) -> str:
    return (FIXTURES / fixture).read_text().splitlines()[0]


def _check_fixture(
    op: str,
    fixture: str,
    emulate: Emulation,
    suite_cases: list[Case] | None = None,
    seeds: range = SEEDS,
) -> None:
    """The emulation passes every given suite case (default: the paper suite) on its first two
    input sets (the checked one and the fresh one) and fails on at least one case of each
    unseen draw (tried smallest first)."""
    assert _first_line(fixture).startswith("// Known wrong (unseen ")
    task = get_task(op)
    for case in suite_cases if suite_cases is not None else task.cases("paper"):
        for set_index in (0, 1):
            inputs = _inputs(task, case, set_index)
            assert _passes(task, inputs, emulate(inputs)), f"{fixture} fails {case.label}"
    for seed in seeds:
        cases = sorted(unseen.draw(task, 6, seed).cases, key=lambda c: _traffic(task, c))
        caught = False
        for case in cases:
            inputs = _inputs(task, case)
            if not _passes(task, inputs, emulate(inputs)):
                caught = True
                break
        assert caught, f"{fixture} passes every unseen case of seed {seed}"


def _f32(inputs: InputSet, name: str) -> np.ndarray:
    return np.asarray(inputs.stored[name], dtype=F32).reshape(inputs.shapes[name])


def _nan(shape: tuple[int, ...]) -> np.ndarray:
    return np.full(shape, np.nan, dtype=F32)


# --- sorting ------------------------------------------------------------------------------------

MAX_PROBE = 4


def _longest_run(x: np.ndarray) -> int:
    return int(np.unique(x, return_counts=True)[1].max()) if x.size else 0


def _rank_sort(inputs: InputSet) -> Outputs:
    """sorting__unique_keys.cu: key i goes to count(keys < key_i) of a zeroed buffer, equal keys
    to the next free slots, at most MAX_PROBE of them; the rest of a longer run stays 0."""
    x = _f32(inputs, "data")
    if x.size <= 1:
        return {"data": x}
    s = np.sort(x)
    offset = np.arange(s.size) - np.searchsorted(s, s, side="left")  # place within its run
    return {"data": np.where(offset < MAX_PROBE, s, F32(0))}


def _pow2_bitonic(inputs: InputSet) -> Outputs:
    """sorting__pow2_bitonic.cu: the bitonic stages k = 2, 4, ... <= N, partners i ^ j < N."""
    d = _f32(inputs, "data").copy()
    n = d.size
    i = np.arange(n)
    k = 2
    while k <= n:
        j = k >> 1
        while j > 0:
            l = i ^ j  # noqa: E741 (the kernel's name)
            pair = (l > i) & (l < n)
            lo, hi = i[pair], l[pair]
            a, b = d[lo], d[hi]
            ascending = (lo & k) == 0
            swap = np.where(ascending, a > b, a < b)
            d[lo[swap]], d[hi[swap]] = b[swap], a[swap]
            j >>= 1
        k <<= 1
    return {"data": d}


def test_a_rank_sort_for_nearly_distinct_keys_is_caught_by_duplicate_keys():
    _check_fixture("sorting", "sorting__unique_keys.cu", _rank_sort)
    # the paper's keys do repeat, in pairs: the fixture must (and does) survive those
    task = get_task("sorting")
    assert _longest_run(_inputs(task, task.cases("paper")[-1]).stored["data"]) == 2
    # it is the runs of equal keys that catch it: right on presorted and reversed unseen cases
    for seed in range(5):
        for case in unseen.draw(task, 6, seed).cases:
            inputs = _inputs(task, case)
            wrong = not _passes(task, inputs, _rank_sort(inputs))
            assert wrong == (_longest_run(inputs.stored["data"]) > MAX_PROBE)
            assert not wrong or unseen.value_kind(case.params) == "ties"


def test_a_bitonic_network_for_powers_of_two_is_caught_by_other_sizes():
    _check_fixture("sorting", "sorting__pow2_bitonic.cu", _pow2_bitonic)


# --- top_k --------------------------------------------------------------------------------------

KMAX = 128


def _ranked(values: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Each row's order by value descending, then index ascending (the fixture's strict order)."""
    return np.lexsort((indices, -values.astype(np.float64)), axis=-1)


def _top_128(inputs: InputSet) -> Outputs:
    """top_k__k_at_most_128.cu: the top 128 pairs of every chunk of 256 inputs, then of every
    two lists of 128, until one list is left; only its first min(k, 128) are stored."""
    x = _f32(inputs, "input").reshape(-1)
    n, k = x.size, int(inputs.scalars["k"])
    lists = -(-n // (2 * KMAX))
    pad = lists * 2 * KMAX - n
    vals = np.concatenate([x, np.full(pad, -np.finfo(F32).max, F32)]).reshape(lists, 2 * KMAX)
    idx = np.concatenate([np.arange(n), np.full(pad, 2**31 - 1)]).reshape(lists, 2 * KMAX)
    while True:
        order = _ranked(vals, idx)[:, :KMAX]
        vals = np.take_along_axis(vals, order, axis=1)
        idx = np.take_along_axis(idx, order, axis=1)
        if lists == 1:
            break
        if lists % 2:
            vals = np.concatenate([vals, np.full((1, KMAX), -np.finfo(F32).max, F32)])
            idx = np.concatenate([idx, np.full((1, KMAX), 2**31 - 1)])
        lists = (lists + 1) // 2
        vals, idx = vals.reshape(lists, 2 * KMAX), idx.reshape(lists, 2 * KMAX)
    values, indices = _nan((k,)), np.full(k, -1)
    stored = min(k, KMAX)
    values[:stored], indices[:stored] = vals[0, :stored], idx[0, :stored]
    return {"top_k_values": values, "top_k_indices": indices}


def test_a_top_k_for_the_papers_k_is_caught_by_larger_k():
    _check_fixture("top_k", "top_k__k_at_most_128.cu", _top_128)


def test_the_top_k_emulation_orders_ties_by_index():
    """On duplicate keys with k <= 128 the fixture is right: only k > 128 catches it."""
    task = get_task("top_k")
    ties = VALUE_KINDS.index("ties")
    for n, k in ((1000, 128), (777, 100), (9, 2)):
        inputs = _inputs(task, Case("stand-in", 0, {"N": n, "k": k, "values": ties}))
        assert _passes(task, inputs, _top_128(inputs))


# --- FFT ----------------------------------------------------------------------------------------

TABLE_N = 16384


def _twiddle_table() -> tuple[np.ndarray, np.ndarray]:
    m = np.arange(TABLE_N // 2)
    theta = (-2.0 * np.pi * m / TABLE_N).astype(F32).astype(np.float64)
    return np.cos(theta).astype(F32), np.sin(theta).astype(F32)


def _fft_paper_sizes(inputs: InputSet) -> Outputs:
    """FFT__paper_sizes_only.cu: nothing is written when N < 1024 (no block); twiddles
    W_16384^(p * (16384 >> s)), so all 1 in the stages past 14."""
    n = int(inputs.scalars["N"])
    if n < 1024:
        return {"output_real": _nan((n,)), "output_img": _nan((n,))}
    log2n = n.bit_length() - 1
    i = np.arange(n)
    rev = np.zeros(n, dtype=np.int64)
    for bit in range(log2n):
        rev |= ((i >> bit) & 1) << (log2n - 1 - bit)
    re = _f32(inputs, "input_real")[rev].copy()
    im = _f32(inputs, "input_img")[rev].copy()
    w_re, w_im = _twiddle_table()
    for s in range(1, log2n + 1):
        half = 1 << (s - 1)
        m = np.arange(half) * (TABLE_N >> s)
        wr, wi = w_re[m], w_im[m]
        vr, vi = re.reshape(-1, 2, half), im.reshape(-1, 2, half)
        x1r, x1i, x2r, x2i = vr[:, 0].copy(), vi[:, 0].copy(), vr[:, 1], vi[:, 1]
        tr = wr * x2r - wi * x2i
        ti = wr * x2i + wi * x2r
        vr[:, 0], vi[:, 0] = x1r + tr, x1i + ti
        vr[:, 1], vi[:, 1] = x1r - tr, x1i - ti
    return {"output_real": re, "output_img": im}


def test_an_fft_for_the_papers_sizes_is_caught_by_other_powers_of_two():
    _check_fixture("FFT", "FFT__paper_sizes_only.cu", _fft_paper_sizes)


# --- prefix_sum ---------------------------------------------------------------------------------

TILE = 1024


def _hillis_steele(s: np.ndarray) -> np.ndarray:
    """Inclusive scan of each row in float32, as the shared-memory kernel (log2 1024 steps)."""
    s = s.copy()
    d = 1
    while d < TILE:
        s[..., d:] = s[..., d:] + s[..., :-d]  # the right side is read before it is written
        d <<= 1
    return s


def _tiled_scan(inputs: InputSet) -> Outputs:
    """prefix_sum__tile_multiple.cu: N // 1024 tiles; the tail stays unwritten."""
    x = _f32(inputs, "input")
    out = _nan(x.shape)
    tiles = x.size // TILE
    if tiles:
        scanned = _hillis_steele(x[: tiles * TILE].reshape(tiles, TILE))
        totals = np.zeros(TILE, F32)
        totals[:tiles] = scanned[:, -1]
        totals = _hillis_steele(totals)
        scanned[1:] += totals[: tiles - 1, None]
        out[: tiles * TILE] = scanned.reshape(-1)
    return {"output": out}


def test_a_tiled_scan_without_a_tail_is_caught_by_other_lengths():
    _check_fixture("prefix_sum", "prefix_sum__tile_multiple.cu", _tiled_scan)


# --- stencils -----------------------------------------------------------------------------------


def _tiled_stencil_2d(inputs: InputSet) -> Outputs:
    """stencil_2d__tile_multiple.cu: the cells of whole 32x32 tiles only."""
    u = _f32(inputs, "u_old")
    r = F32(inputs.scalars["r"])
    full = u.copy()
    c = u[1:-1, 1:-1]
    inner = u[1:-1, :-2] + u[1:-1, 2:] + u[2:, 1:-1] + u[:-2, 1:-1] - F32(4) * c
    full[1:-1, 1:-1] = c + r * inner
    out = _nan(u.shape)
    ci, cj = 32 * (u.shape[0] // 32), 32 * (u.shape[1] // 32)
    out[:ci, :cj] = full[:ci, :cj]
    return {"u_new": out}


def _tiled_stencil_3d(inputs: InputSet) -> Outputs:
    """stencil_3d__tile_multiple.cu: the cells of whole 8x8x8 tiles only."""
    u = _f32(inputs, "u_old")
    r = F32(inputs.scalars["r"])
    full = u.copy()
    c = u[1:-1, 1:-1, 1:-1]
    total = (
        u[:-2, 1:-1, 1:-1]
        + u[2:, 1:-1, 1:-1]
        + u[1:-1, 2:, 1:-1]
        + u[1:-1, :-2, 1:-1]
        + u[1:-1, 1:-1, 2:]
        + u[1:-1, 1:-1, :-2]
        - F32(6) * c
    )
    full[1:-1, 1:-1, 1:-1] = c + r * total
    out = _nan(u.shape)
    ci, cj, ck = (8 * (n // 8) for n in u.shape)
    out[:ci, :cj, :ck] = full[:ci, :cj, :ck]
    return {"u_new": out}


def test_a_tiled_2d_stencil_without_partial_tiles_is_caught_by_other_extents():
    task = get_task("stencil_2d")
    # the paper cases up to 2^22 cells, and smaller stand-ins whose extents are multiples of 32
    small = [c for c in task.cases("paper") if c.params["nx"] * c.params["ny"] <= 1 << 22]
    stand_ins = [Case("stand-in", i, {"nx": nx, "ny": ny}) for i, (nx, ny) in
                 enumerate([(32, 32), (64, 512), (2048, 96)])]  # fmt: skip
    _check_fixture("stencil_2d", "stencil_2d__tile_multiple.cu", _tiled_stencil_2d,
                   small + stand_ins)  # fmt: skip


def test_a_tiled_3d_stencil_without_partial_tiles_is_caught_by_other_extents():
    task = get_task("stencil_3d")
    small = [c for c in task.cases("paper") if task.complexity(c.params) <= 1 << 20]
    stand_ins = [Case("stand-in", i, {"nx": nx, "ny": ny, "nz": nz}) for i, (nx, ny, nz) in
                 enumerate([(8, 8, 8), (16, 40, 8), (8, 24, 512)])]  # fmt: skip
    _check_fixture("stencil_3d", "stencil_3d__tile_multiple.cu", _tiled_stencil_3d,
                   small + stand_ins)  # fmt: skip


# --- integrals ----------------------------------------------------------------------------------

THREADS = 256


def _tree(terms: np.ndarray) -> np.ndarray:
    """Each row of THREADS float32 values summed by the shared-memory tree (halves)."""
    s = terms.copy()
    half = THREADS // 2
    while half:
        s[:, :half] = s[:, :half] + s[:, half : 2 * half]
        half //= 2
    return s[:, 0]


def _in_turn(values: np.ndarray) -> F32:
    """float32 atomicAdds into a zeroed result, one after the other."""
    total = F32(0)
    for v in values:
        total = F32(total + v)
    return total


def _simpson_blocks(inputs: InputSet) -> Outputs:
    """simpson_int__block_multiple.cu: N // 512 blocks of 256 panel threads."""
    y = _f32(inputs, "y_samples")
    n = y.size
    a, b = F32(inputs.scalars["a"]), F32(inputs.scalars["b"])
    blocks = n // (2 * THREADS)
    panels = min((n - 1) // 2, blocks * THREADS)
    terms = np.zeros(blocks * THREADS, F32)
    if panels > 0:
        h3 = F32(F32(b - a) / F32(n - 1)) / F32(3)
        t = np.arange(panels)
        terms[:panels] = h3 * (y[2 * t] + F32(4) * y[2 * t + 1] + y[2 * t + 2])
    result = _in_turn(_tree(terms.reshape(blocks, THREADS))) if blocks else F32(0)
    return {"result": np.array([result])}


def _monte_carlo_pow2(inputs: InputSet) -> Outputs:
    """monte_carlo_int__pow2_reciprocal.cu: grid-stride sums of (b - a)*y_i, block trees, one
    atomicAdd per block of its sum times 2^-floor(log2 N)."""
    y = _f32(inputs, "y_samples")
    n = y.size
    width = F32(F32(inputs.scalars["b"]) - F32(inputs.scalars["a"]))
    blocks = min(-(-n // THREADS), 1024)
    stride = blocks * THREADS
    terms = np.zeros(-(-n // stride) * stride, F32)
    terms[:n] = width * y
    sums = np.zeros(stride, F32)
    for row in terms.reshape(-1, stride):  # each thread's sequential sum
        sums += row
    inv_n = F32(2.0 ** -(n.bit_length() - 1))
    result = _in_turn(_tree(sums.reshape(blocks, THREADS)) * inv_n)
    return {"result": np.array([result])}


def test_a_block_reduced_simpson_rule_for_the_papers_n_is_caught_by_other_n():
    _check_fixture("simpson_int", "simpson_int__block_multiple.cu", _simpson_blocks)


def test_a_monte_carlo_sum_scaled_by_a_power_of_two_is_caught_by_other_n():
    _check_fixture("monte_carlo_int", "monte_carlo_int__pow2_reciprocal.cu", _monte_carlo_pow2)


def test_every_fixture_here_is_emulated():
    names = {p.name for p in FIXTURES.glob("*.cu") if p.name.split("__")[0] in OPS}
    assert names == {
        "sorting__unique_keys.cu",
        "sorting__pow2_bitonic.cu",
        "top_k__k_at_most_128.cu",
        "FFT__paper_sizes_only.cu",
        "prefix_sum__tile_multiple.cu",
        "stencil_2d__tile_multiple.cu",
        "stencil_3d__tile_multiple.cu",
        "simpson_int__block_multiple.cu",
        "monte_carlo_int__pow2_reciprocal.cu",
    }
