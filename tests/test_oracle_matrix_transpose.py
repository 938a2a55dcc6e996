"""matrix_transpose's oracle against an explicit loop; its exact tolerance rejects a reshape in
place of the transpose and a single swapped pair."""

import numpy as np
import pytest

from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("matrix_transpose")


def _oracle(task, a, variant="fp32"):
    m, n = a.shape
    params = {"M": m, "N": n}
    return task.oracle({"A": a, **params}, params, variant)["B"]


def _passes(got, ref, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref)))


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize(("m", "n"), [(1, 1), (1, 7), (5, 3), (17, 32)])
def test_matches_loop(task, variant, m, n):
    a = np.random.default_rng(m * 100 + n).uniform(-1, 1, (m, n))
    ref = _oracle(task, a, variant)
    assert ref.shape == (n, m) and ref.flags.c_contiguous
    flat = a.reshape(-1)
    want = [[flat[r * n + c] for r in range(m)] for c in range(n)]  # B[c][r] = A[r][c]
    np.testing.assert_array_equal(ref, want)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_exact_tolerance(task, variant):
    tol = task.spec.tolerance[variant]
    assert tol.rtol == 0 and tol.atol == 0 and tol.mtol == 0
    a = np.random.default_rng(1).uniform(-1, 1, (24, 40))
    ref = _oracle(task, a, variant)
    assert _passes(a.T.copy(), ref, tol)
    assert not _passes(a.reshape(40, 24), ref, tol)  # same bytes, not transposed
    swapped = ref.copy()
    swapped[[3, 4], 7] = swapped[[4, 3], 7]
    assert not _passes(swapped, ref, tol)
    square = np.random.default_rng(2).uniform(-1, 1, (16, 16))
    assert not _passes(square, _oracle(task, square, variant), tol)  # a plain copy
