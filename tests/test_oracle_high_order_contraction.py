"""high_order_contraction's oracle against explicit loops and a sum of per-x GEMMs; its
tolerances against fp32/bf16 simulations of the baseline's x-outer, y-inner chain (must pass)
and against a dropped x slice, a dropped y term or a misread B layout (must fail)."""

import math

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("high_order_contraction")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _inputs(rng, dims, dtype=np.float64):
    a, b, c, x, y = dims
    return (
        rng.uniform(-1, 1, (a, x, b, y)).astype(dtype),
        rng.uniform(-1, 1, (x, c, y)).astype(dtype),
    )


def _oracle(task, av, bv, variant="fp32"):
    a, x, b, y = av.shape
    c = bv.shape[1]
    params = {"a": a, "b": b, "c": c, "x": x, "y": y}
    scalars = {"a_dim": a, "b_dim": b, "c_dim": c, "x_dim": x, "y_dim": y}
    return task.oracle({"A": av, "B": bv, **scalars}, params, variant)["C"]


def _passes(got, ref, mag, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag))


def _sum_of_gemms(av, bv):
    return sum(av[:, x] @ bv[x].T for x in range(av.shape[1]))


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("dims", [(1, 1, 1, 1, 1), (2, 3, 4, 2, 5), (3, 2, 5, 4, 3)])
def test_matches_loops(task, variant, dims):
    av, bv = _inputs(np.random.default_rng(sum(dims)), dims)
    ref, mag = _oracle(task, av, bv, variant)
    a, b, c, x, y = dims
    assert ref.shape == (a, b, c) and mag.shape == (a, b, c)
    np.testing.assert_allclose(ref, _sum_of_gemms(av, bv), rtol=1e-12, atol=1e-12)
    for i in range(a):
        for j in range(b):
            for k in range(c):
                terms = [av[i, s, j, t] * bv[s, k, t] for s in range(x) for t in range(y)]
                assert ref[i, j, k] == pytest.approx(math.fsum(terms), abs=1e-12)
                assert mag[i, j, k] == pytest.approx(math.fsum(abs(v) for v in terms))


def _sequential_fp32(av, bv):
    """The baseline's order: x outer, y inner, one fp32 accumulator per output."""
    acc = np.zeros((av.shape[0], av.shape[2], bv.shape[1]), dtype=np.float32)
    for x in range(av.shape[1]):
        for y in range(av.shape[3]):
            term = av[:, x, :, y].astype(np.float64)[:, :, None] * bv[x, :, y][None, None, :]
            acc = (acc + term).astype(np.float32)
    return acc.astype(np.float64)


def _bugs(got, av, bv):
    x, y = av.shape[1], av.shape[3]
    no_last_x = got - av[:, x - 1] @ bv[x - 1].T
    no_last_y = got - av[:, 0, :, y - 1][:, :, None] * bv[0, :, y - 1][None, None, :]
    b_misread = np.einsum("axby,xcy->abc", av, bv.reshape(x, y, -1).transpose(0, 2, 1))
    return {
        "last x dropped": no_last_x,
        "last y term of x = 0 dropped": no_last_y,
        "B read as [x][y][c]": b_misread,
    }


@pytest.mark.parametrize("dims", [(4, 8, 8, 8, 8), (2, 16, 12, 16, 16)])
def test_fp32_tolerance(task, dims):
    tol = task.spec.tolerance["fp32"]
    av32, bv32 = _inputs(np.random.default_rng(1), dims, np.float32)
    av, bv = av32.astype(np.float64), bv32.astype(np.float64)
    ref, mag = _oracle(task, av, bv)
    assert _passes(_sequential_fp32(av32, bv32), ref, mag, tol)
    per_x = np.zeros(ref.shape, dtype=np.float32)  # the library's order: per-x GEMMs, summed
    for x in range(dims[3]):
        per_x = per_x + (av32[:, x] @ bv32[x].T)
    assert _passes(per_x.astype(np.float64), ref, mag, tol)
    for name, bad in _bugs(ref, av, bv).items():
        assert not _passes(bad, ref, mag, tol), name


def test_bf16_tolerance(task):
    tol = task.spec.tolerance["bf16"]
    av32, bv32 = (_bf(v) for v in _inputs(np.random.default_rng(2), (4, 16, 12, 16, 16)))
    av, bv = av32.astype(np.float64), bv32.astype(np.float64)
    ref, mag = _oracle(task, av, bv, "bf16")
    got = _bf(_sequential_fp32(av32, bv32)).astype(np.float64)
    assert _passes(got, ref, mag, tol)
    for name, bad in _bugs(got, av, bv).items():
        assert not _passes(bad, ref, mag, tol), name
