"""silu_and_mul's oracle against an explicit loop and scipy's expit; its tolerances against an
fp32/bf16 simulation of the baseline and against swapped halves."""

import math

import numpy as np
import pytest
from scipy.special import expit

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("silu_and_mul")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _passes(got, ref, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref)))


def _oracle(task, v, variant="fp32"):
    b, d2 = v.shape
    params = {"B": b, "D": d2 // 2}
    return task.oracle({"in": v, **params}, params, variant)["out"]


@pytest.mark.parametrize("b,d", [(1, 1), (3, 5), (4, 130)])
def test_matches_loop_and_expit(task, b, d):
    v = np.random.default_rng(d).uniform(-1, 1, (b, 2 * d))
    ref = _oracle(task, v)
    assert ref.shape == (b, d)
    loop = [
        [v[i, j] / (1.0 + math.exp(-v[i, j])) * v[i, d + j] for j in range(d)] for i in range(b)
    ]
    np.testing.assert_allclose(ref, loop, rtol=1e-14, atol=0)
    np.testing.assert_allclose(ref, v[:, :d] * expit(v[:, :d]) * v[:, d:], rtol=1e-13, atol=0)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_tolerance(task, variant):
    tol = task.spec.tolerance[variant]
    d = 4096
    v = np.random.default_rng(7).uniform(-1, 1, (4, 2 * d)).astype(np.float32)
    if variant == "bf16":
        v = _bf(v)
    x, g = v[:, :d], v[:, d:]
    got = x / (np.float32(1) + np.exp(-x)) * g  # fp32, as the baseline
    if variant == "bf16":
        got = _bf(got)
    ref = _oracle(task, v.astype(np.float64), variant)
    assert _passes(got.astype(np.float64), ref, tol)
    swapped = (g / (1 + np.exp(-g)) * x).astype(np.float64)  # gate and input swapped
    assert not _passes(swapped, ref, tol)
    assert not _passes(np.roll(got, 1, axis=1).astype(np.float64), ref, tol)
