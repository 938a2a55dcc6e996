"""matrix_copy's oracle returns A itself (a fresh array); its exact tolerance rejects a single
wrong element, a transposed copy and a row shifted by one."""

import numpy as np
import pytest

from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("matrix_copy")


def _oracle(task, a, variant="fp32"):
    m, n = a.shape
    return task.oracle({"A": a, "M": m, "N": n}, {"M": m, "N": n}, variant)["B"]


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize(("m", "n"), [(1, 1), (3, 5), (16, 127)])
def test_is_the_input(task, variant, m, n):
    a = np.random.default_rng(m * n).uniform(-1, 1, (m, n))
    ref = _oracle(task, a, variant)
    assert ref.shape == (m, n)
    for i in range(m):
        for j in range(n):
            assert ref[i, j] == a[i, j]
    assert not np.shares_memory(ref, a)


def test_exact_tolerance(task):
    for variant in ("fp32", "bf16"):
        tol = task.spec.tolerance[variant]
        assert tol.rtol == 0 and tol.atol == 0 and tol.mtol == 0
    a = np.random.default_rng(4).uniform(-1, 1, (8, 8))
    ref = _oracle(task, a)
    one_ulp = ref.copy()
    one_ulp[2, 3] = np.nextafter(np.float32(ref[2, 3]), np.float32(2.0))
    for bad in (one_ulp, ref.T, np.roll(ref, 1, axis=1)):
        assert np.any(np.abs(bad - ref) > tol.atol + tol.rtol * np.abs(ref))
