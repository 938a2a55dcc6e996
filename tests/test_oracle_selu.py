"""selu's oracle against an explicit loop; its constants (the original's non-standard 1.67 and
1.0); its tolerances against fp32/bf16 simulations of the baseline (with expf pushed a few ulp
off, which must pass) and against the standard SELU constants and planted bugs (which must
fail)."""

import math

import numpy as np
import pytest

from cudamaster import formula
from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task

STANDARD_ALPHA, STANDARD_LAMBDA = 1.6732632423543772, 1.0507009873554805


@pytest.fixture(scope="module")
def task():
    return get_task("selu")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _passes(got, ref, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref)))


def _constants(task):
    """alpha and lambda as the harness passes them (float32 values of the task's formulas)."""
    values = {
        a.name: float(np.float32(formula.evaluate(a.value, {})))
        for a in task.spec.args
        if a.role == "scalar" and a.dtype == "f32"
    }
    return values["alpha"], values["lambda"]


def _oracle(task, x, alpha, lam, variant="fp32"):
    n = x.size
    inputs = {"input": x, "N": n, "alpha": alpha, "lambda": lam}
    return task.oracle(inputs, {"N": n}, variant)["output"]


def _inputs(seed, n, variant):
    x = np.random.default_rng(seed).uniform(-1, 1, n).astype(np.float32)
    x[:64] = np.float32(np.random.default_rng(seed + 1).uniform(-1e-5, 1e-5, 64))
    return _bf(x) if variant == "bf16" else x


def test_constants_are_the_originals(task):
    assert _constants(task) == (float(np.float32(1.67)), 1.0)


@pytest.mark.parametrize("alpha,lam", [(1.67, 1.0), (STANDARD_ALPHA, STANDARD_LAMBDA), (0.5, 2.0)])
def test_matches_loop(task, alpha, lam):
    x = np.random.default_rng(4).uniform(-3, 3, 257)
    ref = _oracle(task, x, alpha, lam)
    assert ref.shape == x.shape
    loop = [lam * alpha * (math.exp(v) - 1.0) if v < 0 else lam * v for v in x]
    np.testing.assert_allclose(ref, loop, rtol=1e-12, atol=1e-15)


def _baseline(x32, alpha, lam, ulps=0):
    """The baseline in fp32: (lambda*alpha)*(expf(x) - 1) or lambda*x; ulps pushes expf off."""
    e = np.exp(np.minimum(x32, 0)).astype(np.float32)
    for _ in range(ulps):
        e = np.nextafter(e, np.float32(2))
    neg = (np.float32(lam) * np.float32(alpha)) * (e - np.float32(1))
    return np.where(x32 < 0, neg, np.float32(lam) * x32)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("ulps", [0, 3])
def test_tolerance_passes_the_baseline(task, variant, ulps):
    tol, (alpha, lam) = task.spec.tolerance[variant], _constants(task)
    x = _inputs(6 + ulps, 1 << 14, variant)
    got = _baseline(x, alpha, lam, ulps)
    if variant == "bf16":
        got = _bf(got)
    assert _passes(got.astype(np.float64), _oracle(task, x.astype(np.float64), alpha, lam), tol)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_tolerance_fails_wrong_constants_and_bugs(task, variant):
    tol, (alpha, lam) = task.spec.tolerance[variant], _constants(task)
    x = _inputs(10, 4096, variant)
    ref = _oracle(task, x.astype(np.float64), alpha, lam)
    good = _baseline(x, alpha, lam).astype(np.float64)

    def out(bad):
        return _bf(bad) if variant == "bf16" else bad

    bugs = {
        "standard SELU constants": out(_baseline(x, STANDARD_ALPHA, STANDARD_LAMBDA)),
        "the BF16 kernel's default lambda 1.05": out(_baseline(x, alpha, 1.05)),
        "alpha on the positive side": out(_baseline(x, alpha, lam) * np.where(x < 0, 1, alpha)),
        "shifted element": np.roll(good, 1),
    }
    if variant == "fp32":  # alpha 1.6733 vs 1.67 is 2e-3: under one bf16 rounding
        bugs["standard alpha only"] = _baseline(x, STANDARD_ALPHA, lam)
    for name, bad in bugs.items():
        assert not _passes(np.asarray(bad, dtype=np.float64), ref, tol), name
