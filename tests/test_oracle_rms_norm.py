"""rms_norm's oracle against an explicit per-element loop."""

import math

import numpy as np
import pytest

from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("rms_norm")


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("n", [1, 64, 1000])
def test_matches_loop(task, variant, n):
    rng = np.random.default_rng(n)
    x, w, b = (rng.uniform(-1, 1, n) for _ in range(3))
    eps = 1e-5
    inputs = {"input": x, "weight": w, "bias": b, "epsilon": eps, "N": n, "output": np.zeros(n)}
    ref, mag = task.oracle(inputs, {"N": n}, variant)["output"]
    eps32 = float(np.float32(eps))
    rms = math.sqrt(math.fsum(v * v for v in x) / n + eps32)
    expect = [w[i] * (x[i] / rms) + b[i] for i in range(n)]
    np.testing.assert_allclose(ref, expect, rtol=1e-12, atol=1e-12)
    assert np.all(mag >= np.abs(ref))


def test_bias_added_and_divides_by_rms(task):
    x = np.array([3.0, 4.0])
    inputs = {
        "input": x,
        "weight": np.ones(2),
        "bias": np.array([1.0, -1.0]),
        "epsilon": 0.0,
        "N": 2,
        "output": np.zeros(2),
    }
    ref, _ = task.oracle(inputs, {"N": 2}, "fp32")["output"]
    rms = math.sqrt(12.5)
    np.testing.assert_allclose(ref, [3.0 / rms + 1.0, 4.0 / rms - 1.0], rtol=1e-14)
