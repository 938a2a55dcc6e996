"""Unseen shape spaces of the dense group (dense linear algebra and data movement): every draw
works and stays small, and the known-wrong implementations in tests/fixtures/wrong_unseen/ are
right on the paper suite but caught by the unseen cases. The fixtures are emulated in numpy (fp32
arithmetic, NaN where a kernel never writes, as the harness's poison, and NaN for what a kernel
reads past the end of a buffer) and judged by the harness's own rule (bench/verify.py) with the
task's tolerance. matrix_power's where rules are checked against emulations of its baselines."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from cudamaster import formula
from cudamaster.bench import unseen
from cudamaster.bench.inputs import case_seed, make_inputs
from cudamaster.bench.verify import compare
from cudamaster.dtypes import bf16_bits_to_f32, concrete, f32_to_bf16_bits
from cudamaster.tasks import Case, Task, load_task, tasks_root

OPS = ["dot_product", "square_matrix_mul", "matrix_vector_mul", "matrix_power",
       "high_order_contraction", "matrix_copy", "matrix_scalar_mul", "matrix_transpose",
       "reverse_array"]  # fmt: skip
SEEDS = range(8)
FIXTURES = Path(__file__).parent / "fixtures" / "wrong_unseen"
F32 = np.float32


def _task(op: str) -> Task:
    return load_task(tasks_root() / op)  # this group's tasks only, whatever the others hold


def _values(task: Task, case: Case, variant: str, seed: int):
    inp = make_inputs(task, case, variant, seed)
    dtypes = {a.name: concrete(a.dtype, variant) for a in task.spec.args}
    return inp, inp.values(dtypes)


def _outputs(task: Task) -> list[str]:
    return [a.name for a in task.spec.args if a.role_for("fp32") not in ("input", "scalar")]


def _passes(task: Task, variant: str, values: dict, params: dict, got: dict) -> bool:
    out = task.oracle(values, dict(params), variant)
    tol = task.spec.tolerance[variant]
    results = []
    for name, ref in out.items():
        ref, mag = ref if isinstance(ref, tuple) else (ref, None)
        g = np.asarray(got[name], dtype=np.float64)
        results.append(compare(name, g, ref, mag, tol, None, concrete("T", variant)).passed)
    return all(results)


# --- the shape spaces ---------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS)
def test_every_draw_works_stays_small_and_covers_every_listed_value(op):
    task = _task(op)
    space = task.spec.unseen
    listed = {k: v for k, v in space.dims.items() if isinstance(v, list)}
    for seed in SEEDS:
        cases = unseen.draw(task, 6, seed).cases
        for name, values in listed.items():  # cycled, <= 6 values: every one in every draw
            assert len(values) <= 6 and {c.params[name] for c in cases} == set(values)
        assert {unseen.value_kind(c.params) for c in cases} == set(space.values)
        for case in cases:
            for name in space.dims:
                bounds = space.range_of(name)
                if bounds is not None:
                    assert bounds[0] <= case.params[name] <= bounds[1]
            for variant in ("fp32", "bf16"):
                inp, values = _values(task, case, variant, seed)
                assert sum(inp.nbytes.values()) < 64 << 20, (op, case.params)
                start = time.perf_counter()
                out = task.oracle(values, dict(inp.params), variant)
                assert time.perf_counter() - start < 2.0, (op, case.params)
                assert set(out) == set(_outputs(task))
                for ref in out.values():
                    ref = ref[0] if isinstance(ref, tuple) else ref
                    assert np.isfinite(np.asarray(ref, dtype=np.float64)).all(), (op, case.params)


def test_every_dimension_reaches_its_edges_across_draws():
    """Each range dimension is drawn at its lower edge (1) and at odd sizes."""
    for op in OPS:
        task = _task(op)
        space = task.spec.unseen
        drawn = [c.params for s in range(60) for c in unseen.draw(task, 6, s).cases]
        for name in space.dims:
            bounds = space.range_of(name)
            if bounds is not None:
                assert min(p[name] for p in drawn) == bounds[0], (op, name)
                assert any(p[name] % 2 for p in drawn), (op, name)  # odd sizes too


# --- matrix_power: the where rules keep the baselines inside the tolerance ----------------------


def _bf16(x: np.ndarray) -> np.ndarray:
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=F32)))


def _power_chain(a: np.ndarray, p: int, variant: str) -> np.ndarray:
    """The baselines' schedule (R2 = A*A, then R_{k+1} = R_k*A; P <= 2 gives A*A): fp32 products
    (any order: the rule does not depend on it), or, in BF16, fp32-accumulated products (here
    float64, far below a bf16 rounding) each rounded to bf16 as the baseline stores them."""
    if variant == "fp32":
        a32 = a.astype(F32)
        cur = a32 @ a32
        for _ in range(2, p):
            cur = cur @ a32
        return cur
    cur = _bf16(a @ a).astype(np.float64)
    for _ in range(2, p):
        cur = _bf16(cur @ a).astype(np.float64)
    return cur


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_matrix_power_baselines_pass_every_drawn_case(variant):
    task = _task("matrix_power")
    for seed in range(8):
        for case in unseen.draw(task, 6, seed).cases:
            inp, values = _values(task, case, variant, seed)
            got = _power_chain(values["A"], int(values["P"]), variant)
            assert _passes(task, variant, values, inp.params, {"B": got}), (seed, case.params)


def test_matrix_power_where_rules_exclude_what_the_bf16_chain_fails():
    """Without the rules, small matrices with P >= 4 fail: the bf16 rounding of early powers
    reaches B through later products, unbounded by the last product's magnitude."""
    task = _task("matrix_power")
    rng = np.random.default_rng(3)
    failures = 0
    for _ in range(60):
        a = _bf16(rng.uniform(-1, 1, (3, 3))).astype(np.float64)
        got = _power_chain(a, 9, "bf16")
        values, params = {"A": a, "N": 3, "P": 9}, {"N": 3, "P": 9}
        failures += not _passes(task, "bf16", values, params, {"B": got})
    assert failures >= 3
    space = task.spec.unseen
    assert not all(int(formula.evaluate(w, {"N": 3, "P": 9})) for w in space.where)


# --- the known-wrong implementations, emulated --------------------------------------------------


def _nan(*shape: int) -> np.ndarray:
    return np.full(shape, np.nan, dtype=F32)


def _fma(a, b, c) -> np.ndarray:
    """fmaf: the exact product plus c, rounded once (through float64: an ulp at a rare tie)."""
    wide = np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)
    return wide.astype(F32)


def dot_flush(v: dict, p: dict) -> dict:
    x, y = v["X"].astype(F32), v["Y"].astype(F32)
    n = x.size
    threads = min(-(-n // 256), 1024) * 256
    rows = -(-n // threads)
    pad = rows * threads - n
    xs = np.concatenate([x, np.zeros(pad, F32)]).reshape(rows, threads)
    ys = np.concatenate([y, np.zeros(pad, F32)]).reshape(rows, threads)
    keep = (np.abs(xs) >= F32(5e-4)) & (np.abs(ys) >= F32(5e-4))
    partial = np.zeros(threads, F32)
    for r in range(rows):  # each thread's grid-stride loop, in order
        partial = np.where(keep[r], _fma(xs[r], ys[r], partial), partial)
    loss = np.cumsum(partial, dtype=F32)[-1]  # the atomics onto the zeroed loss, in some order
    return {"loss": np.array([loss], dtype=F32)}


def vector_add_vec4(v: dict, p: dict) -> dict:
    a, b = v["A"].astype(F32), v["B"].astype(F32)
    out = _nan(a.size)
    n = a.size // 4 * 4
    out[:n] = a[:n] + b[:n]
    return {"C": out}


def matrix_mul_baked(v: dict, p: dict) -> dict:
    """C[row*2048 + col] = sum_k A[row*4096 + k] * B[k*2048 + col] for row < M, col < 2048; an
    element that reads past A or B is NaN (garbage or a fault on the GPU), writes past C are
    dropped. The tiled kernel sums in ascending k with fmaf; float32 BLAS stands in (the rule
    allows any fp32 order)."""
    bn, bk = 2048, 4096
    m, n = p["M"], p["N"]
    a, b = v["A"].astype(F32).reshape(-1), v["B"].astype(F32).reshape(-1)
    out = _nan(m * n)
    if b.size >= bk * bn:  # else every column reads past B
        rows = min(m, a.size // bk)  # rows whose 4096 A elements lie inside A
        flat = (a[: rows * bk].reshape(rows, bk) @ b[: bk * bn].reshape(bk, bn)).reshape(-1)
        out[: min(flat.size, m * n)] = flat[: m * n]
    return {"C": out}


def square_tiles(v: dict, p: dict) -> dict:
    a, b = v["A"].astype(F32), v["B"].astype(F32)
    m = a.shape[0]
    whole = m // 16 * 16
    out = _nan(m, m)
    out[:whole, :whole] = a[:whole, :whole] @ b[:whole, :whole]  # k only over whole tiles
    return {"C": out}


def matvec_vec4(v: dict, p: dict) -> dict:
    m, n = v["A"].shape
    n4 = n // 4
    a = v["A"].astype(F32).reshape(-1)[: m * n4 * 4].reshape(m, n4 * 4)  # row r from r*(N/4)*4
    x = v["x"].astype(F32)[: n4 * 4]
    return {"y": (a @ x).astype(F32) if n4 else np.zeros(m, F32)}


def power_true(v: dict, p: dict) -> dict:
    a = v["A"].astype(F32)
    q = int(p["P"])
    if q <= 0:
        return {"B": np.eye(a.shape[0], dtype=F32)}
    base, acc = a, None
    while q > 0:  # square-and-multiply over the bits of P, low bit first
        if q & 1:
            acc = base.copy() if acc is None else acc @ base
        if q > 1:
            base = base @ base
        q >>= 1
    return {"B": acc}


def contraction_square(v: dict, p: dict) -> dict:
    """The unrolled kernel with D = 16 if y > 8 else 8 standing for both x and y: C[a][b][c] =
    sum_{x,y < D} A[((a*D + x)*b + b')*D + y] * B[(x*c + c')*D + y]. The elements whose reads
    stay inside A (a prefix of the (a, b) pairs) and B (a prefix of c) are computed; the others
    read past a buffer and are NaN."""
    na, nb, nc, y = p["a"], p["b"], p["c"], p["y"]
    d = 16 if y > 8 else 8
    a, b = v["A"].astype(F32).reshape(-1), v["B"].astype(F32).reshape(-1)
    out = _nan(na * nb, nc)
    pairs = np.arange(na * nb)
    ia, ib = pairs // nb, pairs % nb
    last_a = ((ia * d + d - 1) * nb + ib) * d + d - 1
    ok_ab = int(np.count_nonzero(last_a < a.size))
    cs = np.arange(nc)
    ok_c = int(np.count_nonzero(((d - 1) * nc + cs) * d + d - 1 < b.size))
    if ok_ab and ok_c:
        xs, ys = np.arange(d)[:, None], np.arange(d)[None, :]
        a_idx = ((ia[:ok_ab, None, None] * d + xs) * nb + ib[:ok_ab, None, None]) * d + ys
        b_idx = (xs[:, None, :] * nc + cs[None, :ok_c, None]) * d + ys[:, None, :]
        got = np.einsum("kxy,xcy->kc", a[a_idx], b[b_idx], dtype=F32)
        out[:ok_ab, :ok_c] = got
    return {"C": out.reshape(na, nb, nc)}


def copy_vec4(v: dict, p: dict) -> dict:
    a = v["A"].astype(F32).reshape(-1)
    out = _nan(a.size)
    k = p["M"] * (p["N"] // 4) * 4
    out[:k] = a[:k]
    return {"B": out}


def scalar_tiles(v: dict, p: dict) -> dict:
    a = v["A"].astype(F32)
    m, n = a.shape
    r, c = m // 16 * 16, n // 16 * 16
    out = _nan(m, n)
    out[:r, :c] = a[:r, :c] * F32(v["scalar"])
    return {"B": out}


def transpose_tiles(v: dict, p: dict) -> dict:
    a = v["A"].astype(F32)
    m, n = a.shape
    r, c = m // 32 * 32, n // 32 * 32
    out = _nan(n, m)
    out[:c, :r] = a[:r, :c].T
    return {"B": out}


def reverse_blocks(v: dict, p: dict) -> dict:
    x = v["input"].astype(F32)
    whole = x.size // 256 * 256
    out = _nan(x.size)
    out[:whole] = x[:whole][::-1]  # output[j] = input[whole - 1 - j]
    return {"output": out}


Emulation = Callable[[dict, dict], dict]
# task -> (fixture, emulation, the paper cases it is checked on, what makes an unseen case catch it)
WRONG: dict[str, tuple[str, Emulation, Callable[[dict], bool], Callable[[dict], bool]]] = {
    "dot_product": (
        "dot_product__flush_small",
        dot_flush,
        lambda p: True,
        lambda p: unseen.value_kind(p) == "mixed",  # likely, not certain: see the test below
    ),
    "vector_add": (
        "vector_add__vec4_no_tail",
        vector_add_vec4,
        lambda p: True,
        lambda p: p["N"] % 4 != 0,
    ),
    "matrix_mul": (
        "matrix_mul__baked_nk",
        matrix_mul_baked,
        lambda p: p["M"] == 64,  # N and K are those of every paper case; M is an argument
        lambda p: (p["N"], p["K"]) != (2048, 4096),  # always: N, K <= 600
    ),
    "square_matrix_mul": (
        "square_matrix_mul__tile16_no_tail",
        square_tiles,
        lambda p: p["M"] <= 256,
        lambda p: p["M"] % 16 != 0,
    ),
    "matrix_vector_mul": (
        "matrix_vector_mul__vec4_row_stride",
        matvec_vec4,
        lambda p: p["N"] <= 4096,  # the same M = 2048 rows as the longer paper cases
        lambda p: p["N"] % 4 != 0 and p["M"] >= 2,  # rows after the first are shifted
    ),
    "matrix_power": (
        "matrix_power__true_power",
        power_true,
        lambda p: p["N"] == 256,  # every paper P
        lambda p: p["P"] <= 1,  # listed: every draw has P = 0 and P = 1
    ),
    "high_order_contraction": (
        "high_order_contraction__square_xy",
        contraction_square,
        lambda p: p["a"] <= 64,
        lambda p: (p["x"], p["y"]) not in ((8, 8), (16, 16)),
    ),
    "matrix_copy": (
        "matrix_copy__vec4_rows_no_tail",
        copy_vec4,
        lambda p: p["M"] <= 4096,
        lambda p: p["N"] % 4 != 0,
    ),
    "matrix_scalar_mul": (
        "matrix_scalar_mul__tiles16_no_tail",
        scalar_tiles,
        lambda p: p["M"] <= 4096,
        lambda p: p["M"] % 16 != 0 or p["N"] % 16 != 0,
    ),
    "matrix_transpose": (
        "matrix_transpose__square_tiles_no_tail",
        transpose_tiles,
        lambda p: p["M"] <= 2048 and p["N"] <= 2048,
        lambda p: p["M"] % 32 != 0 or p["N"] % 32 != 0,
    ),
    "reverse_array": (
        "reverse_array__block_multiple",
        reverse_blocks,
        lambda p: True,
        lambda p: p["N"] % 256 != 0,
    ),
}


def _verdict(task: Task, case: Case, seed: int, emulate: Emulation) -> bool:
    inp, values = _values(task, case, "fp32", seed)
    return _passes(task, "fp32", values, inp.params, emulate(values, dict(inp.params)))


def _caught(task: Task, case: Case, base_seed: int, emulate: Emulation) -> bool:
    """As the evaluator checks an unseen case: the first input set, then a fresh one."""
    return any(
        not _verdict(task, case, case_seed(task.name, "fp32", case, s, base_seed), emulate)
        for s in (0, 1)
    )


@pytest.mark.parametrize("op", sorted(WRONG))
def test_each_fixture_says_what_it_assumes_and_exports_the_fp32_entry_point(op):
    name = WRONG[op][0]
    text = (FIXTURES / f"{name}.cu").read_text()
    kind = "inputs" if op == "dot_product" else "shapes"
    assert text.splitlines()[0].startswith(f"// Known wrong (unseen {kind}): ")
    assert f'extern "C" void {_task(op).symbol("fp32")}(' in text


@pytest.mark.parametrize("op", sorted(WRONG))
def test_a_fixture_is_right_on_the_paper_suite(op):
    task = _task(op)
    _, emulate, picked, _ = WRONG[op]
    cases = [c for c in task.cases("paper") if picked(c.params)]
    assert cases
    for case in cases:
        for base_seed in (0, 1):
            seed = case_seed(task.name, "fp32", case, 0, base_seed)
            assert _verdict(task, case, seed, emulate), (op, case.params, base_seed)


@pytest.mark.parametrize("op", sorted(set(WRONG) - {"dot_product"}))
def test_a_shape_fixture_is_caught_by_every_draw_of_unseen_cases(op):
    task = _task(op)
    _, emulate, _, catches = WRONG[op]
    for seed in SEEDS:
        cases = unseen.draw(task, 6, seed).cases
        catching = [c for c in cases if catches(c.params)]
        assert catching, (op, seed)
        checked = catching if seed < 2 else catching[:1]
        for case in checked:
            assert not _verdict(task, case, case_seed(task.name, "fp32", case, 0, 0), emulate), (
                op,
                seed,
                case.params,
            )


def test_the_flush_is_caught_by_mixed_values_and_invisible_to_declared_ones():
    """The flushed terms (a factor below 5e-4) are ~0.1% of uniform(-1, 1) terms, so declared
    values at moderate N miss the fixture; with mixed magnitudes about half the factors are that
    small. Every draw has three mixed cases (the value kinds cycle), each judged on two input
    sets; the fixture escapes one only where all are tiny (N <= ~10 with every product below
    the 1e-6 atol) or unlucky: simulated, 0.1-0.3% of draws escape altogether, so this checks
    fixed draws."""
    task = _task("dot_product")
    emulate = WRONG["dot_product"][1]
    for seed in SEEDS:
        cases = unseen.draw(task, 6, seed).cases
        mixed = [c for c in cases if unseen.value_kind(c.params) == "mixed"]
        assert len(mixed) == 3
        assert any(_caught(task, c, 0, emulate) for c in mixed), seed
    declared = Case("unseen:0", 0, {"N": 4099})
    assert not _caught(task, declared, 0, emulate)
    caught = Case("unseen:0", 0, {"N": 4099, "values": 1})
    assert not any(_verdict(task, caught, s, emulate) for s in range(5))
