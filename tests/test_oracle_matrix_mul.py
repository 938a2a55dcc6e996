"""matrix_mul's oracle against einsum and an explicit triple loop."""

import math

import numpy as np
import pytest

from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("matrix_mul")


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize(("m", "n", "k"), [(1, 1, 1), (3, 5, 7), (16, 8, 33)])
def test_matches_einsum(task, variant, m, n, k):
    rng = np.random.default_rng(m * 100 + n * 10 + k)
    a, b = rng.uniform(-1, 1, (m, k)), rng.uniform(-1, 1, (k, n))
    params = {"M": m, "N": n, "K": k}
    ref, mag = task.oracle({"A": a, "B": b, **params}, params, variant)["C"]
    assert ref.shape == (m, n) and mag.shape == (m, n)
    np.testing.assert_allclose(ref, np.einsum("mk,kn->mn", a, b), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mag, np.einsum("mk,kn->mn", np.abs(a), np.abs(b)), rtol=1e-12)
    assert np.all(mag >= np.abs(ref))
    i, j = m - 1, n // 2
    assert ref[i, j] == pytest.approx(math.fsum(a[i, t] * b[t, j] for t in range(k)), abs=1e-12)
