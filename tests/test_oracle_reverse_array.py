"""reverse_array's oracle against an explicit loop; its exact tolerance rejects an off-by-one
reversal, and an odd N keeps its middle element."""

import numpy as np
import pytest

from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("reverse_array")


def _oracle(task, x, variant="fp32"):
    return task.oracle({"input": x, "N": x.size}, {"N": x.size}, variant)["output"]


def _passes(got, ref, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref)))


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("n", [1, 2, 5, 1000, 1001])
def test_matches_loop(task, variant, n):
    x = np.random.default_rng(n).uniform(-1, 1, n)
    ref = _oracle(task, x, variant)
    np.testing.assert_array_equal(ref, [x[n - 1 - i] for i in range(n)])
    if n % 2:
        assert ref[n // 2] == x[n // 2]


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_exact_tolerance(task, variant):
    tol = task.spec.tolerance[variant]
    x = np.random.default_rng(3).uniform(-1, 1, 257)
    ref = _oracle(task, x, variant)
    assert _passes(x[::-1].copy(), ref, tol)
    assert not _passes(np.roll(x[::-1], 1), ref, tol)  # output[i] = input[N - i]
    assert not _passes(x, ref, tol)  # a copy
    half = x[::-1].copy()
    half[len(x) // 2 + 1 :] = x[len(x) // 2 + 1 :]  # only the first half written
    assert not _passes(half, ref, tol)
