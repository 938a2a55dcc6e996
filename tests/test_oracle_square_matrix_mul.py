"""square_matrix_mul's oracle against einsum and an exact fsum loop; its tolerances against fp32
and bf16 simulations (must pass) and against a dropped term or swapped operands (must fail)."""

import math

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("square_matrix_mul")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _oracle(task, a, b, variant="fp32"):
    m = a.shape[0]
    return task.oracle({"A": a, "B": b, "M": m}, {"M": m}, variant)["C"]


def _passes(got, ref, mag, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag))


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("m", [1, 5, 16])
def test_matches_einsum_and_loop(task, variant, m):
    rng = np.random.default_rng(m)
    a, b = rng.uniform(-1, 1, (m, m)), rng.uniform(-1, 1, (m, m))
    ref, mag = _oracle(task, a, b, variant)
    assert ref.shape == (m, m) and mag.shape == (m, m)
    np.testing.assert_allclose(ref, np.einsum("ik,kj->ij", a, b), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mag, np.einsum("ik,kj->ij", np.abs(a), np.abs(b)), rtol=1e-12)
    for i, j in [(0, 0), (m - 1, m // 2)]:
        want = math.fsum(a[i, k] * b[k, j] for k in range(m))
        assert ref[i, j] == pytest.approx(want, abs=1e-12)
    assert np.all(mag >= np.abs(ref) - 1e-12)


def _sequential_fp32(a32, b32):
    """Ascending-k fp32 accumulation as the baseline (products exact in float64)."""
    acc = np.zeros((a32.shape[0], b32.shape[1]), dtype=np.float32)
    for k in range(a32.shape[1]):
        acc = (acc + np.outer(a32[:, k].astype(np.float64), b32[k])).astype(np.float32)
    return acc


@pytest.mark.parametrize("m", [64, 256])
def test_fp32_tolerance(task, m):
    tol = task.spec.tolerance["fp32"]
    rng = np.random.default_rng(m + 1)
    a32, b32 = (rng.uniform(-1, 1, (m, m)).astype(np.float32) for _ in range(2))
    a, b = a32.astype(np.float64), b32.astype(np.float64)
    ref, mag = _oracle(task, a, b)
    assert _passes(_sequential_fp32(a32, b32).astype(np.float64), ref, mag, tol)
    assert _passes((a32 @ b32).astype(np.float64), ref, mag, tol)
    k = int(np.argmax(np.abs(a[3] * b[:, 7])))
    dropped = ref.copy()
    dropped[3, 7] -= a[3, k] * b[k, 7]  # one term of one element left out
    assert not _passes(dropped, ref, mag, tol)
    assert not _passes(b @ a, ref, mag, tol)  # operands swapped
    assert not _passes(a @ b.T, ref, mag, tol)  # B read transposed


@pytest.mark.parametrize("m", [64, 256])
def test_bf16_tolerance(task, m):
    tol = task.spec.tolerance["bf16"]
    rng = np.random.default_rng(m + 2)
    a32, b32 = (_bf(rng.uniform(-1, 1, (m, m))) for _ in range(2))
    ref, mag = _oracle(task, a32.astype(np.float64), b32.astype(np.float64), "bf16")
    got = _bf(_sequential_fp32(a32, b32)).astype(np.float64)
    assert _passes(got, ref, mag, tol)
    assert not _passes(got * (1 + 2**-6), ref, mag, tol)  # a scale error of 2 bf16 ulps
    assert not _passes(np.roll(got, 1, axis=1), ref, mag, tol)
