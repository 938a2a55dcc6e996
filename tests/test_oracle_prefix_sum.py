"""prefix_sum's oracle against an exact loop; its tolerance against a sequential fp32 scan (must
pass) and an exclusive scan or a dropped term (must fail)."""

import math

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("prefix_sum")


def _passes(got, ref, mag, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag))


def _oracle(task, x, variant="fp32"):
    n = x.size
    return task.oracle({"input": x, "N": n}, {"N": n}, variant)["output"]


@pytest.mark.parametrize("n", [1, 2, 17, 1000])
def test_matches_loop(task, n):
    x = np.random.default_rng(n).uniform(-1, 1, n)
    ref, mag = _oracle(task, x)
    want = [math.fsum(x[: i + 1]) for i in range(n)]
    want_mag = [math.fsum(abs(v) for v in x[: i + 1]) for i in range(n)]
    np.testing.assert_allclose(ref, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mag, want_mag, rtol=1e-12)
    assert np.all(mag >= np.abs(ref) - 1e-12)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_tolerance(task, variant):
    tol = task.spec.tolerance[variant]
    x = np.random.default_rng(5).uniform(-1, 1, 1 << 16).astype(np.float32)
    if variant == "bf16":
        x = bf16_bits_to_f32(f32_to_bf16_bits(x))
    ref, mag = _oracle(task, x.astype(np.float64), variant)
    seq = np.cumsum(x, dtype=np.float32)  # sequential fp32, as the baseline
    if variant == "bf16":
        seq = bf16_bits_to_f32(f32_to_bf16_bits(seq))
    assert _passes(seq.astype(np.float64), ref, mag, tol)
    exclusive = np.concatenate([[0.0], ref[:-1]])
    assert not _passes(exclusive, ref, mag, tol)
    dropped = ref.copy()
    dropped[100:] -= x[100]  # one term left out of every later sum
    assert not _passes(dropped, ref, mag, tol)
