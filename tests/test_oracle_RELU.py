"""RELU's oracle against an explicit loop; its exact tolerance passes an fp32/bf16 simulation of
the baseline and rejects a leaky slope or a missed clamp."""

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("RELU")


def _oracle(task, x, variant="fp32"):
    return task.oracle({"input": x, "N": x.size}, {"N": x.size}, variant)["output"]


def _passes(got, ref, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref)))


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("n", [1, 7, 1000])
def test_matches_loop(task, variant, n):
    x = np.random.default_rng(n).uniform(-1, 1, n)
    ref = _oracle(task, x, variant)
    np.testing.assert_array_equal(ref, [v if v > 0 else 0.0 for v in x])


def test_zero_and_signs(task):
    ref = _oracle(task, np.array([-2.0, -0.0, 0.0, 3.0]))
    np.testing.assert_array_equal(ref, [0.0, 0.0, 0.0, 3.0])


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_exact_tolerance(task, variant):
    tol = task.spec.tolerance[variant]
    assert tol.rtol == 0 and tol.atol == 0
    x = np.random.default_rng(5).uniform(-1, 1, 4096).astype(np.float32)
    if variant == "bf16":
        x = bf16_bits_to_f32(f32_to_bf16_bits(x))
    ref = _oracle(task, x.astype(np.float64), variant)
    assert _passes(np.maximum(np.float32(0), x).astype(np.float64), ref, tol)
    leaky = np.where(x < 0, np.float32(0.01) * x, x).astype(np.float64)
    assert not _passes(leaky, ref, tol)
    assert not _passes(x.astype(np.float64), ref, tol)
