"""SwiGLU's oracle against an explicit loop and scipy's expit; its tolerances against an
fp32/bf16 simulation of the baseline (must pass) and against planted bugs (must fail)."""

import math

import numpy as np
import pytest
from scipy.special import expit

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task

F32 = np.float32


@pytest.fixture(scope="module")
def task():
    return get_task("SwiGLU")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _passes(got, ref, tol):
    got = np.asarray(got, dtype=np.float64)
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref)))


def _oracle(task, g, v, beta=1.0, variant="fp32"):
    n = g.size
    inputs = {"gate_input": g, "value_input": v, "beta": beta, "N": n}
    return task.oracle(inputs, {"N": n}, variant)["output"]


def test_scalar_values(task):
    (beta_arg,) = [a for a in task.spec.args if a.name == "beta"]
    assert float(beta_arg.value) == 1.0


@pytest.mark.parametrize("beta", [1.0, 0.5, 2.0])
@pytest.mark.parametrize("n", [1, 17, 1000])
def test_matches_loop_and_expit(task, n, beta):
    rng = np.random.default_rng(n)
    g, v = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    ref = _oracle(task, g, v, beta)
    loop = [g[i] * (1.0 / (1.0 + math.exp(-beta * g[i]))) * v[i] for i in range(n)]
    np.testing.assert_allclose(ref, loop, rtol=1e-14, atol=0)
    np.testing.assert_allclose(ref, g * expit(beta * g) * v, rtol=1e-13, atol=0)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_tolerance(task, variant):
    tol = task.spec.tolerance[variant]
    n = 1 << 16
    rng = np.random.default_rng(3)
    g, v = (F32(-1) + F32(2) * rng.random(n, dtype=np.float32) for _ in range(2))
    if variant == "bf16":
        g, v = _bf(g), _bf(v)
    got = g * (F32(1) / (F32(1) + np.exp(-F32(1) * g))) * v  # fp32, in the baseline's order
    if variant == "bf16":
        got = _bf(got)
    ref = _oracle(task, g.astype(np.float64), v.astype(np.float64), 1.0, variant)
    assert _passes(got, ref, tol)
    g64, v64 = g.astype(np.float64), v.astype(np.float64)
    assert not _passes(v64 * expit(v64) * g64, ref, tol)  # gate and value swapped
    assert not _passes(expit(g64) * v64, ref, tol)  # the leading g dropped
    assert not _passes(g64 * expit(1.702 * g64) * v64, ref, tol)  # another beta
    assert not _passes(np.roll(ref, 1), ref, tol)
