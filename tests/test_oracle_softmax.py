"""softmax's oracle against scipy and an explicit loop; its tolerances against fp32/bf16
simulations of the baseline (which must pass) and of common bugs (which must fail)."""

import math

import numpy as np
import pytest
from scipy.special import softmax as scipy_softmax

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("softmax")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _passes(got, ref, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref)))


def _oracle(task, x, variant="fp32"):
    n, c = x.shape
    return task.oracle({"input": x, "N": n, "C": c}, {"N": n, "C": c}, variant)["out"]


def _baseline_fp32(x32):
    """The baseline's order: e_j stored, sequential fp32 sum, then out = e_j / sum."""
    e = np.exp(x32 - x32.max(axis=1, keepdims=True))
    s = np.cumsum(e, axis=1, dtype=np.float32)[:, -1:]
    return (e / s).astype(np.float64)


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (5, 64), (2, 1000)])
def test_matches_scipy_and_loop(task, shape):
    x = np.random.default_rng(shape[1]).uniform(-1, 1, shape)
    ref = _oracle(task, x)
    np.testing.assert_allclose(ref, scipy_softmax(x, axis=1), rtol=1e-13, atol=0)
    for r in range(shape[0]):
        row = [math.exp(v) for v in x[r]]
        total = math.fsum(row)
        np.testing.assert_allclose(ref[r], [v / total for v in row], rtol=1e-13, atol=0)


def test_shift_invariant_and_normalised(task):
    x = np.random.default_rng(0).uniform(-1, 1, (4, 33))
    ref = _oracle(task, x)
    np.testing.assert_allclose(_oracle(task, x + 50.0), ref, rtol=1e-12)
    np.testing.assert_allclose(ref.sum(axis=1), 1.0, rtol=1e-14)


@pytest.mark.parametrize("c", [256, 4096])
def test_fp32_tolerance(task, c):
    tol = task.spec.tolerance["fp32"]
    x32 = np.random.default_rng(c).uniform(-1, 1, (8, c)).astype(np.float32)
    ref = _oracle(task, x32.astype(np.float64))
    assert _passes(_baseline_fp32(x32), ref, tol)
    # a sum that drops its last term, or a row shifted by one column, must fail
    e = np.exp(x32 - x32.max(axis=1, keepdims=True))
    dropped = e / np.cumsum(e[:, :-1], axis=1, dtype=np.float32)[:, -1:]
    assert not _passes(dropped.astype(np.float64), ref, tol)
    assert not _passes(np.roll(ref, 1, axis=1), ref, tol)


@pytest.mark.parametrize("c", [256, 4096])
def test_bf16_tolerance(task, c):
    tol = task.spec.tolerance["bf16"]
    x = _bf(np.random.default_rng(c + 1).uniform(-1, 1, (8, c)))
    ref = _oracle(task, x.astype(np.float64), "bf16")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    inv = np.float32(1.0) / np.cumsum(e, axis=1, dtype=np.float32)[:, -1:]
    got = _bf(_bf(e) * inv).astype(np.float64)  # the baseline's two roundings
    assert _passes(got, ref, tol)
    assert not _passes(np.roll(got, 1, axis=1), ref, tol)
    assert not _passes(got * 1.02, ref, tol)  # a 2% scale error (e.g. a wrong sum)
