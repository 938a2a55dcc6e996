"""gelu's oracle (its own erf: a series and a continued fraction) against math.erf and scipy's
normal CDF, tails included; its tolerances against fp32/bf16 simulations of the baseline (with
erff pushed 2 ulp off, which must pass) and against the tanh approximation and planted bugs
(which must fail)."""

import math

import numpy as np
import pytest
from scipy.special import erf, ndtr

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("gelu")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _passes(got, ref, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref)))


def _oracle(task, x, variant="fp32"):
    n = x.size
    return task.oracle({"input": x, "N": n}, {"N": n}, variant)["output"]


def test_matches_math_erf_loop(task):
    x = np.random.default_rng(1).uniform(-4, 4, 501)
    ref = _oracle(task, x)
    assert ref.shape == x.shape
    loop = [0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x]
    # math.erf's 1 + erf cancels for x << 0; the oracle uses erfc there
    np.testing.assert_allclose(ref, loop, rtol=1e-10, atol=1e-15)


def test_matches_scipy_normal_cdf_including_tails(task):
    x = np.concatenate([np.linspace(-37, 37, 20001), [-1e-300, 1e-300, 0.0]])
    ref = _oracle(task, x)
    want = x * ndtr(x)
    np.testing.assert_allclose(ref, want, rtol=1e-10, atol=0)
    assert ref[0] < 0 and abs(ref[0]) < 1e-290  # the far left tail keeps its relative accuracy


def test_chunked_large_input(task):
    x = np.random.default_rng(2).uniform(-1, 1, (1 << 20) + 3)
    np.testing.assert_allclose(_oracle(task, x), x * ndtr(x), rtol=1e-13, atol=0)


def _baseline(x32, ulps=0):
    """The baseline: erff in fp32 (pushed ulps off), 0.5*x*(1 + erf) in double, rounded to
    float."""
    e = erf(x32 * np.float32(0.70710678118654752)).astype(np.float32)
    for _ in range(abs(ulps)):
        e = np.nextafter(e, np.float32(np.sign(ulps) * 2))
    s = np.float32(1) + e
    return (0.5 * x32.astype(np.float64) * s.astype(np.float64)).astype(np.float32)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("ulps", [0, 2, -2])
def test_tolerance_passes_the_baseline(task, variant, ulps):
    tol = task.spec.tolerance[variant]
    x = np.random.default_rng(7).uniform(-1, 1, 1 << 14).astype(np.float32)
    x[:2] = [-1.0, -0.99999994]  # where 1 + erf is smallest on (-1, 1)
    if variant == "bf16":
        x = _bf(x)
    got = _baseline(x, ulps)
    if variant == "bf16":
        got = _bf(got)
    assert _passes(got.astype(np.float64), _oracle(task, x.astype(np.float64)), tol)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_tolerance_fails_planted_bugs(task, variant):
    tol = task.spec.tolerance[variant]
    x = np.random.default_rng(8).uniform(-1, 1, 4096).astype(np.float32)
    if variant == "bf16":
        x = _bf(x)
    xd = x.astype(np.float64)
    ref = _oracle(task, xd)
    good = _baseline(x).astype(np.float64)
    bugs = {
        "sigmoid approximation": xd / (1 + np.exp(-1.702 * xd)),
        "erf(x) for erf(x/sqrt(2))": 0.5 * xd * (1 + erf(xd)),
        "no factor 0.5": xd * (1 + erf(xd / np.sqrt(2))),
        "shifted element": np.roll(good, 1),
    }
    if variant == "fp32":  # the tanh form is within ~1e-3: under one bf16 rounding
        inner = np.sqrt(2 / np.pi) * (xd + 0.044715 * xd**3)
        bugs["tanh approximation"] = 0.5 * xd * (1 + np.tanh(inner))
    for name, bad in bugs.items():
        bad = _bf(bad) if variant == "bf16" else bad
        assert not _passes(np.asarray(bad, dtype=np.float64), ref, tol), name
