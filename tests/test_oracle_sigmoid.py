"""sigmoid's oracle against an explicit loop and scipy's expit, tails included; its tolerances
against fp32/bf16 simulations of the baseline (with expf pushed a few ulp off, which must pass)
and against planted bugs (which must fail)."""

import math

import numpy as np
import pytest
from scipy.special import expit

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("sigmoid")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _passes(got, ref, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref)))


def _oracle(task, x, variant="fp32"):
    n = x.size
    return task.oracle({"input": x, "N": n}, {"N": n}, variant)["out"]


def test_matches_loop_and_expit(task):
    x = np.random.default_rng(1).uniform(-20, 20, 501)
    ref = _oracle(task, x)
    assert ref.shape == x.shape
    np.testing.assert_allclose(ref, [1.0 / (1.0 + math.exp(-v)) for v in x], rtol=1e-14, atol=0)
    tails = np.array([-700.0, -100.0, -40.0, 40.0, 800.0])  # relative accuracy in both tails
    np.testing.assert_allclose(_oracle(task, tails), expit(tails), rtol=1e-14, atol=0)


def _baseline(x32, ulps=0):
    """The baseline in fp32: 1/(1 + expf(-x)), expf pushed ulps off."""
    e = np.exp(-x32).astype(np.float32)
    for _ in range(abs(ulps)):
        e = np.nextafter(e, np.float32(np.sign(ulps) * np.inf))
    return np.float32(1) / (np.float32(1) + e)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("ulps", [0, 3, -3])
def test_tolerance_passes_the_baseline(task, variant, ulps):
    tol = task.spec.tolerance[variant]
    x = np.random.default_rng(7).uniform(-1, 1, 1 << 14).astype(np.float32)
    if variant == "bf16":
        x = _bf(x)
    got = _baseline(x, ulps)
    if variant == "bf16":
        got = _bf(got)
    assert _passes(got.astype(np.float64), _oracle(task, x.astype(np.float64)), tol)
    # the tanh form is a correct alternative
    alt = np.float32(0.5) + np.float32(0.5) * np.tanh(np.float32(0.5) * x)
    alt = _bf(alt) if variant == "bf16" else alt
    assert _passes(alt.astype(np.float64), _oracle(task, x.astype(np.float64)), tol)


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
        "flipped sign": 1 / (1 + np.exp(xd)),
        "tanh for sigmoid": np.tanh(xd),
        "shifted element": np.roll(good, 1),
        "first element unwritten": np.concatenate([[np.nan], good[1:]]),
    }
    for name, bad in bugs.items():
        assert not _passes(np.asarray(bad, dtype=np.float64), ref, tol), name
