"""dot_product's oracle against an explicit fsum formulation."""

import math

import numpy as np
import pytest

from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("dot_product")


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("n", [1, 7, 1000])
def test_matches_fsum(task, variant, n):
    rng = np.random.default_rng(n)
    x, y = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    ref, mag = task.oracle({"loss": np.zeros(1), "X": x, "Y": y, "N": n}, {"N": n}, variant)["loss"]
    assert ref.shape == (1,) and mag.shape == (1,)
    assert ref[0] == pytest.approx(
        math.fsum(a * b for a, b in zip(x, y, strict=True)), rel=1e-12, abs=1e-12
    )
    assert mag[0] == pytest.approx(
        math.fsum(abs(a * b) for a, b in zip(x, y, strict=True)), rel=1e-12
    )
    assert mag[0] >= abs(ref[0])


def test_accumulates_onto_loss(task):
    x, y = np.array([0.5, -0.25]), np.array([2.0, 4.0])
    inputs = {"loss": np.array([3.0]), "X": x, "Y": y, "N": 2}
    ref, mag = task.oracle(inputs, {"N": 2}, "fp32")["loss"]
    assert ref[0] == pytest.approx(3.0) and mag[0] >= abs(ref[0])


def test_fp32_skips_zero_y(task):
    x, y = np.array([np.inf, 1.0]), np.array([0.0, 2.0])
    inputs = {"loss": np.zeros(1), "X": x, "Y": y, "N": 2}
    assert task.oracle(inputs, {"N": 2}, "fp32")["loss"][0][0] == 2.0
    with np.errstate(invalid="ignore"):
        assert np.isnan(task.oracle(inputs, {"N": 2}, "bf16")["loss"][0][0])
