"""leaky_RELU's oracle against an explicit loop; alpha reaches it as fp32 0.01; its tolerances
pass an fp32/bf16 simulation of the baseline and reject a wrong slope, a slope on the positive
side, or a plain ReLU."""

import numpy as np
import pytest

from cudamaster.bench.inputs import make_inputs
from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task

ALPHA = float(np.float32(0.01))


@pytest.fixture(scope="module")
def task():
    return get_task("leaky_RELU")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _oracle(task, x, variant="fp32", alpha=ALPHA):
    inputs = {"input": x, "N": x.size, "alpha": alpha}
    return task.oracle(inputs, {"N": x.size}, variant)["output"]


def _passes(got, ref, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref)))


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("n", [1, 7, 1000])
def test_matches_loop(task, variant, n):
    x = np.random.default_rng(n).uniform(-1, 1, n)
    ref = _oracle(task, x, variant)
    np.testing.assert_array_equal(ref, [ALPHA * v if v < 0 else v for v in x])


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_alpha_is_fp32_001(task, variant):
    inp = make_inputs(task, task.cases("paper")[0], variant, 1)
    assert inp.scalars["alpha"] == ALPHA
    assert inp.call_scalars[-1] == ALPHA


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_tolerance(task, variant):
    tol = task.spec.tolerance[variant]
    x = np.random.default_rng(9).uniform(-1, 1, 1 << 14).astype(np.float32)
    if variant == "bf16":
        x = _bf(x)
    ref = _oracle(task, x.astype(np.float64), variant)
    a32 = np.float32(ALPHA)
    scaled = a32 * x  # fp32 product, as the baseline
    if variant == "bf16":
        scaled = _bf(scaled)  # the second rounding; x >= 0 keeps its bits
    got = np.where(x < 0, scaled, x)
    assert _passes(got.astype(np.float64), ref, tol)
    wrong_slope = np.where(x < 0, np.float32(0.1) * x, x)
    assert not _passes(wrong_slope.astype(np.float64), ref, tol)
    both_sides = a32 * x
    assert not _passes(both_sides.astype(np.float64), ref, tol)
    relu = np.maximum(np.float32(0), x)
    assert not _passes(relu.astype(np.float64), ref, tol)
