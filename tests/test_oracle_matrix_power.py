"""matrix_power's oracle against exact rational arithmetic and a repeated-product loop (P <= 2
giving A*A); its tolerances against fp32 and bf16 simulations of the baseline's chain (must
pass) and against a wrong product count, a transposed result, a wrong element or a dropped term
(must fail)."""

from fractions import Fraction

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("matrix_power")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _oracle(task, a, p, variant="fp32"):
    n = a.shape[0]
    return task.oracle({"A": a, "N": n, "P": p}, {"N": n, "P": p}, variant)["B"]


def _passes(got, ref, mag, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag))


def _exact_power(a, p):
    """A^max(p, 2) in exact rationals, by the operator's chain."""
    n = a.shape[0]
    m = [[Fraction(float(v)) for v in row] for row in a]
    r = m
    for _ in range(max(p, 2) - 1):
        r = [[sum(r[i][k] * m[k][j] for k in range(n)) for j in range(n)] for i in range(n)]
    return np.array([[float(v) for v in row] for row in r])


@pytest.mark.parametrize("p", [0, 1, 2, 3, 5])
def test_matches_exact_rationals(task, p):
    a = np.random.default_rng(p).uniform(-1, 1, (4, 4))
    ref, mag = _oracle(task, a, p)
    np.testing.assert_allclose(ref, _exact_power(a, p), rtol=1e-13, atol=1e-15)
    assert np.all(mag >= np.abs(ref) * (1 - 1e-12))


def test_small_powers_are_a_squared(task):
    a = np.random.default_rng(9).uniform(-1, 1, (6, 6))
    want = _oracle(task, a, 2)
    for p in (0, 1):
        ref, mag = _oracle(task, a, p)
        np.testing.assert_array_equal(ref, want[0])
        np.testing.assert_array_equal(mag, want[1])


@pytest.mark.parametrize("p", [2, 7, 16])
def test_matches_repeated_products(task, p):
    a = np.random.default_rng(p + 10).uniform(-1, 1, (32, 32))
    r = a @ a
    for _ in range(p - 2):
        r = r @ a
    prev = np.linalg.multi_dot([a] * (p - 1)) if p > 2 else a
    ref, mag = _oracle(task, a, p)
    np.testing.assert_allclose(ref, r, rtol=1e-10, atol=1e-10 * np.abs(r).max())
    np.testing.assert_allclose(mag, np.abs(prev) @ np.abs(a), rtol=1e-10)


def _sequential_fp32(x32, a32):
    acc = np.zeros((x32.shape[0], a32.shape[1]), dtype=np.float32)
    for k in range(x32.shape[1]):
        acc = (acc + np.outer(x32[:, k].astype(np.float64), a32[k])).astype(np.float32)
    return acc


def _chain(a32, p, product, rounding=None):
    """The baseline's schedule: R2 = A*A, then R_{k+1} = R_k*A; optional rounding of each R_k."""
    r = product(a32, a32)
    if rounding:
        r = rounding(r)
    for _ in range(max(p, 2) - 2):
        r = product(r, a32)
        if rounding:
            r = rounding(r)
    return r.astype(np.float64)


def _bugs(got, ref, a, p):
    """Wrong results a candidate might produce."""
    worst = np.unravel_index(np.argmax(np.abs(ref)), ref.shape)
    zeroed = got.copy()
    zeroed[worst] = 0.0
    short = np.linalg.matrix_power(a, p - 1)
    return {"one product short": short, "transposed": got.T, "largest element zeroed": zeroed}


@pytest.mark.parametrize(("n", "p"), [(64, 2), (128, 5), (128, 16)])
def test_fp32_tolerance(task, n, p):
    tol = task.spec.tolerance["fp32"]
    a32 = np.random.default_rng(n + p).uniform(-1, 1, (n, n)).astype(np.float32)
    a = a32.astype(np.float64)
    ref, mag = _oracle(task, a, p)
    assert _passes(_chain(a32, p, _sequential_fp32), ref, mag, tol)
    assert _passes(_chain(a32, p, np.matmul), ref, mag, tol)
    for name, bad in _bugs(ref, ref, a, p).items():
        assert not _passes(bad, ref, mag, tol), name
    # one term of the last product left out of one element
    prev = np.linalg.matrix_power(a, p - 1)
    k = int(np.argmax(np.abs(prev[3] * a[:, 5])))
    dropped = ref.copy()
    dropped[3, 5] -= prev[3, k] * a[k, 5]
    assert not _passes(dropped, ref, mag, tol)


@pytest.mark.parametrize(("n", "p"), [(128, 2), (128, 8), (256, 16)])
def test_bf16_tolerance(task, n, p):
    tol = task.spec.tolerance["bf16"]
    a32 = _bf(np.random.default_rng(n * p).uniform(-1, 1, (n, n)))
    a = a32.astype(np.float64)
    ref, mag = _oracle(task, a, p, "bf16")
    got = _chain(a32, p, np.matmul, _bf)  # every R_k rounded to bf16, as the baseline
    assert _passes(got, ref, mag, tol)
    assert _passes(_bf(ref).astype(np.float64), ref, mag, tol)  # exact, rounded once
    for name, bad in _bugs(got, ref, a, p).items():
        assert not _passes(bad, ref, mag, tol), name


def test_abs_power_magnitude_would_be_vacuous(task):
    """Why mag is not |A|^P: with it, a result one product short would pass at P = 16."""
    tol = task.spec.tolerance["fp32"]
    a = np.random.default_rng(3).uniform(-1, 1, (256, 256))
    ref, mag = _oracle(task, a, 16)
    short = np.linalg.matrix_power(a, 15)
    assert _passes(short, ref, np.linalg.matrix_power(np.abs(a), 16), tol)
    assert not _passes(short, ref, mag, tol)
