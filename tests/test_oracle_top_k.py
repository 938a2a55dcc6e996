"""top_k's oracle against Python's sorted() on (-value, index) keys, with BF16 ties; its exact
tolerance rejects a wrong tie order and a wrong value."""

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("top_k")


def _oracle(task, x, k, variant="fp32"):
    out = task.oracle({"input": x, "N": x.size, "k": k}, {"N": x.size, "k": k}, variant)
    return out["top_k_values"], out["top_k_indices"]


def _bf16(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32))).astype(np.float64)


def _loops(x, k):
    order = sorted(range(x.size), key=lambda i: (-x[i], i))[:k]
    return [x[i] for i in order], order


def _passes(got, ref, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref)))


@pytest.mark.parametrize(("n", "k"), [(1, 1), (5, 5), (256, 32), (1000, 128), (4096, 64)])
def test_matches_sorted(task, n, k):
    x = np.random.default_rng(n).uniform(-1, 1, n)
    values, indices = _oracle(task, x, k)
    want_v, want_i = _loops(x, k)
    np.testing.assert_array_equal(values, want_v)
    np.testing.assert_array_equal(indices, want_i)
    assert indices.dtype.kind == "i"


@pytest.mark.parametrize("n", [256, 4096, 65536])
def test_bf16_ties_by_ascending_index(task, n):
    x = _bf16(np.random.default_rng(7).uniform(-1, 1, n))
    k = 128
    values, indices = _oracle(task, x, k, "bf16")
    want_v, want_i = _loops(x, k)
    np.testing.assert_array_equal(values, want_v)
    np.testing.assert_array_equal(indices, want_i)
    # ties occur inside the top k at these sizes, so the tie rule is exercised
    tied = np.flatnonzero(np.diff(values) == 0)
    assert tied.size > 0
    assert np.all(indices[tied] < indices[tied + 1])


def test_signed_zeros_are_equal_values(task):
    x = np.array([-1.0, -0.0, 0.5, 0.0, -0.0, 0.0])
    values, indices = _oracle(task, x, 6)
    np.testing.assert_array_equal(indices, [2, 1, 3, 4, 5, 0])
    assert values[0] == 0.5 and np.all(values[1:5] == 0)


def test_k_equal_to_n_is_a_full_descending_sort(task):
    x = np.random.default_rng(3).uniform(-1, 1, 300)
    values, indices = _oracle(task, x, 300)
    np.testing.assert_array_equal(values, np.sort(x)[::-1])
    np.testing.assert_array_equal(np.sort(indices), np.arange(300))


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_exact_tolerance_catches_a_wrong_tie_order(task, variant):
    tol = task.spec.tolerance[variant]
    assert tol.rtol == 0 and tol.atol == 0 and tol.mtol == 0
    x = _bf16(np.random.default_rng(11).uniform(-1, 1, 16384))
    k = 128
    values, indices = _oracle(task, x, k, variant)
    # an unstable (descending-index) tie order: same values, other positions
    flipped = np.lexsort((-np.arange(x.size), -x))[:k]
    np.testing.assert_array_equal(x[flipped], values)
    assert _passes(x[flipped], values, tol)
    assert not _passes(flipped.astype(np.float64), indices.astype(np.float64), tol)
    # an ascending top k (the smallest values) is wrong too
    assert not _passes(np.sort(x)[:k], values, tol)
