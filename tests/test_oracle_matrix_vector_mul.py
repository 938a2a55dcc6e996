"""matrix_vector_mul's oracle against an exact fsum loop; its tolerances against fp32/bf16
simulations of the baseline (must pass) and a dropped term or a shifted row (must fail)."""

import math

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("matrix_vector_mul")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _oracle(task, a, x, variant="fp32"):
    m, n = a.shape
    return task.oracle({"A": a, "x": x, "M": m, "N": n}, {"M": m, "N": n}, variant)["y"]


def _passes(got, ref, mag, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag))


def _sequential_fp32(a32, x32):
    acc = np.zeros(a32.shape[0], dtype=np.float32)
    for n in range(a32.shape[1]):
        acc = (acc + a32[:, n].astype(np.float64) * x32[n]).astype(np.float32)
    return acc


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize(("m", "n"), [(1, 1), (3, 7), (17, 100)])
def test_matches_loop(task, variant, m, n):
    rng = np.random.default_rng(m * 1000 + n)
    a, x = rng.uniform(-1, 1, (m, n)), rng.uniform(-1, 1, n)
    ref, mag = _oracle(task, a, x, variant)
    assert ref.shape == (m,) and mag.shape == (m,)
    for r in range(m):
        assert ref[r] == pytest.approx(math.fsum(a[r, k] * x[k] for k in range(n)), abs=1e-12)
        assert mag[r] == pytest.approx(math.fsum(abs(a[r, k] * x[k]) for k in range(n)))


@pytest.mark.parametrize("n", [256, 4096])
def test_fp32_tolerance(task, n):
    tol = task.spec.tolerance["fp32"]
    rng = np.random.default_rng(n)
    a32 = rng.uniform(-1, 1, (64, n)).astype(np.float32)
    x32 = rng.uniform(-1, 1, n).astype(np.float32)
    a, x = a32.astype(np.float64), x32.astype(np.float64)
    ref, mag = _oracle(task, a, x)
    assert _passes(_sequential_fp32(a32, x32).astype(np.float64), ref, mag, tol)
    assert _passes((a32 @ x32).astype(np.float64), ref, mag, tol)
    k = int(np.argmax(np.abs(a[5] * x)))
    dropped = ref.copy()
    dropped[5] -= a[5, k] * x[k]
    assert not _passes(dropped, ref, mag, tol)
    assert not _passes(np.roll(ref, 1), ref, mag, tol)


def test_bf16_tolerance(task):
    tol = task.spec.tolerance["bf16"]
    rng = np.random.default_rng(7)
    a32, x32 = _bf(rng.uniform(-1, 1, (64, 1024))), _bf(rng.uniform(-1, 1, 1024))
    ref, mag = _oracle(task, a32.astype(np.float64), x32.astype(np.float64), "bf16")
    got = _bf(_sequential_fp32(a32, x32)).astype(np.float64)
    assert _passes(got, ref, mag, tol)
    assert not _passes(got * (1 + 2**-6), ref, mag, tol)
    assert not _passes(np.roll(got, 1), ref, mag, tol)
