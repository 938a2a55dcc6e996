"""elu's oracle against an explicit loop; its tolerances against fp32/bf16 simulations of the
baseline (with expf pushed a few ulp off, which must pass) and against planted bugs (which must
fail)."""

import math

import numpy as np
import pytest

from cudamaster import formula
from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("elu")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _passes(got, ref, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref)))


def _alpha(task):
    (arg,) = [a for a in task.spec.args if a.name == "alpha"]
    return float(np.float32(formula.evaluate(arg.value, {})))


def _oracle(task, x, alpha, variant="fp32"):
    n = x.size
    return task.oracle({"input": x, "N": n, "alpha": alpha}, {"N": n}, variant)["output"]


def _inputs(seed, n, variant):
    x = np.random.default_rng(seed).uniform(-1, 1, n).astype(np.float32)
    # a few inputs next to zero, where exp(x) - 1 cancels
    x[:64] = np.float32(np.random.default_rng(seed + 1).uniform(-1e-5, 1e-5, 64))
    return _bf(x) if variant == "bf16" else x


def test_harness_passes_the_default_alpha(task):
    assert _alpha(task) == 1.0


@pytest.mark.parametrize("alpha", [1.0, 0.5, 2.5])
def test_matches_loop(task, alpha):
    x = np.random.default_rng(3).uniform(-3, 3, 257)
    ref = _oracle(task, x, alpha)
    assert ref.shape == x.shape
    loop = [alpha * (math.exp(v) - 1.0) if v < 0 else v for v in x]
    np.testing.assert_allclose(ref, loop, rtol=1e-12, atol=1e-15)
    assert _oracle(task, np.array([-0.0, 0.0, 2.0]), alpha).tolist() == [0.0, 0.0, 2.0]


def _baseline(x32, alpha, ulps=0):
    """The baseline in fp32; ulps pushes expf that many ulp off (the worse direction: up)."""
    e = np.exp(np.minimum(x32, 0)).astype(np.float32)
    for _ in range(ulps):
        e = np.nextafter(e, np.float32(2))
    neg = np.float32(alpha) * (e - np.float32(1))
    return np.where(x32 < 0, neg, x32)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("ulps", [0, 3])
def test_tolerance_passes_the_baseline(task, variant, ulps):
    tol, alpha = task.spec.tolerance[variant], _alpha(task)
    x = _inputs(5 + ulps, 1 << 14, variant)
    got = _baseline(x, alpha, ulps)
    if variant == "bf16":
        got = _bf(got)
    assert _passes(got.astype(np.float64), _oracle(task, x.astype(np.float64), alpha), tol)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_tolerance_fails_planted_bugs(task, variant):
    tol, alpha = task.spec.tolerance[variant], _alpha(task)
    x = _inputs(9, 4096, variant)
    ref = _oracle(task, x.astype(np.float64), alpha)
    good = _baseline(x, alpha).astype(np.float64)
    bugs = {
        "no minus one": np.where(x < 0, alpha * np.exp(x), x),
        "negative branch everywhere": alpha * np.expm1(x),
        "shifted element": np.roll(good, 1),
        "last element unwritten": np.concatenate([good[:-1], [np.nan]]),
    }
    for name, bad in bugs.items():
        assert not _passes(np.asarray(bad, dtype=np.float64), ref, tol), name
