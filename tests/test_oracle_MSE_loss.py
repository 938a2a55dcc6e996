"""MSE_loss's oracle against an explicit fsum, its accumulate contract, and its tolerance against
a simulation of the baseline's atomic chain (must pass) and planted bugs (must fail)."""

import math

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("MSE_loss")


def _oracle(task, x, y, start=None, variant="fp32"):
    inputs = {"X": x, "Y": y, "N": len(x)}
    if start is not None:
        inputs["loss"] = np.array([start])
    return task.oracle(inputs, {"N": len(x)}, variant)["loss"]


def _passes(got, ref, mag, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag))


def _inputs(n, seed, variant="fp32"):
    rng = np.random.default_rng(seed)
    x, y = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2))
    if variant == "bf16":
        x, y = (bf16_bits_to_f32(f32_to_bf16_bits(a)) for a in (x, y))
    return x, y


def _atomic_chain(x, y, rng):
    """The baseline: per-thread fp32 partials over a grid-stride loop (<= 1024 x 256 threads),
    added to a zero loss one by one in a random order, then divided by N in fp32."""
    n = len(x)
    threads = min(1024, (n + 255) // 256) * 256
    d = (x - y).astype(np.float32)
    t = (d * d).astype(np.float32)
    part = np.zeros(threads, dtype=np.float32)
    for s in range(0, n, threads):
        c = t[s : s + threads]
        part[: len(c)] = (part[: len(c)] + c).astype(np.float32)
    total = np.cumsum(part[rng.permutation(threads)], dtype=np.float32)[-1]
    return np.float32(total) / np.float32(n)


@pytest.mark.parametrize("n", [1, 7, 1000])
def test_matches_fsum(task, n):
    x, y = (a.astype(np.float64) for a in _inputs(n, n))
    ref, mag = _oracle(task, x, y)
    assert ref.shape == mag.shape == (1,)
    expect = math.fsum((a - b) ** 2 for a, b in zip(x, y, strict=True)) / n
    assert ref[0] == pytest.approx(expect, rel=1e-13) and mag[0] == pytest.approx(expect, rel=1e-13)


def test_accumulate_contract(task):
    x, y = np.array([1.0, 0.0, -1.0, 0.5]), np.array([0.0, 0.0, 1.0, 0.5])
    ref, mag = _oracle(task, x, y, start=3.0)
    assert ref[0] == pytest.approx((3.0 + 1.0 + 4.0) / 4) and mag[0] >= abs(ref[0])
    ref, _ = _oracle(task, x, y)
    assert ref[0] == pytest.approx(5.0 / 4)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("n", [1024, 65536, 262144])
def test_tolerance(task, variant, n):
    tol = task.spec.tolerance[variant]
    x, y = _inputs(n, n + 1, variant)
    ref, mag = _oracle(task, x.astype(np.float64), y.astype(np.float64), variant=variant)
    rng = np.random.default_rng(0)
    for _ in range(3):
        assert _passes(_atomic_chain(x, y, rng), ref, mag, tol)
    s = ref[0] * n
    assert not _passes(s, ref, mag, tol)  # no division
    assert not _passes(2 * ref, ref, mag, tol)  # a second call without zeroing
    assert not _passes(ref * 0.999, ref, mag, tol)  # a 0.1% error
    if n <= 2048:
        assert not _passes(s / (n - 1), ref, mag, tol)  # the original harness's fixed point
