"""sorting's oracle against Python's sorted(); its exact tolerance rejects any misplaced value."""

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("sorting")


def _oracle(task, x, variant="fp32"):
    return task.oracle({"data": x, "N": x.size}, {"N": x.size}, variant)["data"]


@pytest.mark.parametrize("n", [1, 2, 255, 1000])
def test_matches_sorted(task, n):
    x = np.random.default_rng(n).uniform(-1, 1, n)
    np.testing.assert_array_equal(_oracle(task, x), sorted(x.tolist()))


def test_bf16_ties(task):
    x = bf16_bits_to_f32(f32_to_bf16_bits(np.random.default_rng(1).uniform(-1, 1, 4096)))
    x = x.astype(np.float64)
    assert np.unique(x).size < x.size  # bf16 inputs repeat
    ref = _oracle(task, x, "bf16")
    np.testing.assert_array_equal(ref, sorted(x.tolist()))
    assert np.all(np.diff(ref) >= 0)


def test_exact_tolerance(task):
    tol = task.spec.tolerance["fp32"]
    assert tol.rtol == 0 and tol.atol == 0 and tol.mtol == 0
    x = np.random.default_rng(2).uniform(-1, 1, 64)
    ref = _oracle(task, x)
    swapped = ref.copy()
    swapped[[10, 11]] = swapped[[11, 10]]
    assert np.any(np.abs(swapped - ref) > tol.atol + tol.rtol * np.abs(ref))
