"""monte_carlo_int's oracle against an fsum formulation; its tolerance against fp32 simulations of
both forms and planted bugs; generate()'s limits."""

import math

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("monte_carlo_int")


def _oracle(task, y, a, b, variant="fp32"):
    inputs = {"y_samples": y, "a": a, "b": b, "N": y.size}
    ref, mag = task.oracle(inputs, {"N": y.size}, variant)["result"]
    assert ref.shape == (1,) and mag.shape == (1,)
    return ref[0], mag[0]


def _bf16(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _passes(got, ref, mag, tol):
    return abs(got - ref) <= tol.atol + tol.rtol * abs(ref) + tol.mtol * mag


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("n", [1, 7, 1000])
def test_matches_fsum(task, variant, n):
    y = np.random.default_rng(n).uniform(-10, 10, n)
    a, b = -312.5, 811.0
    ref, mag = _oracle(task, y, a, b, variant)
    assert ref == pytest.approx(math.fsum((b - a) * v / n for v in y), rel=1e-12, abs=1e-12)
    assert mag == pytest.approx(math.fsum(abs((b - a) * v / n) for v in y), rel=1e-12)
    assert mag >= abs(ref)


def test_fp32_accumulates_and_bf16_overwrites(task):
    y = np.array([1.0, 3.0])
    inputs = {"y_samples": y, "a": 1.0, "b": 3.0, "N": 2, "result": np.array([10.0])}
    assert task.oracle(inputs, {"N": 2}, "fp32")["result"][0][0] == pytest.approx(14.0)
    assert task.oracle(inputs, {"N": 2}, "bf16")["result"][0][0] == pytest.approx(4.0)


def test_generate_draws_ordered_fp32_limits(task):
    seen = set()
    for seed in range(20):
        out = task.generator({"N": 16}, np.random.default_rng(seed), "bf16")
        a, b = out["a"], out["b"]
        assert -1000 <= a <= b <= 1000
        assert float(np.float32(a)) == a and float(np.float32(b)) == b
        seen.add((a, b))
    assert len(seen) == 20


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("n", [16384, 262144])
def test_tolerance(task, variant, n):
    tol = task.spec.tolerance[variant]
    rng = np.random.default_rng(n + 3)
    a, b = (np.float32(v) for v in task.reference.limits(rng))
    y = np.float32(-10) + np.float32(20) * rng.random(n, dtype=np.float32)
    if variant == "bf16":
        y = _bf16(y)
    ref, mag = _oracle(task, y.astype(np.float64), float(a), float(b), variant)
    width = np.float32(b - a)
    order = rng.permutation(n)
    if variant == "fp32":
        terms = width * y / np.float32(n)  # fl(fl(b-a)*y_i/N)
        sums = [np.cumsum(terms)[-1], np.cumsum(terms[order])[-1], np.sum(terms)]
        for s in sums:  # N atomics in index or random order, and a tree
            assert _passes(float(s), ref, mag, tol)
        s = float(sums[0])
        assert not _passes(s - float(terms[n // 3]), ref, mag, tol)  # a dropped sample
        assert not _passes(s + float(terms[-1]), ref, mag, tol)  # a sample counted twice
        wrong = np.float32(b + a) * y / np.float32(n)
        assert not _passes(float(np.sum(wrong)), ref, mag, tol)  # b + a for the width
    else:
        for s in (np.cumsum(y)[-1], np.cumsum(y[order])[-1], np.sum(y)):
            got = _bf16([width * np.float32(s / np.float32(n))])[0]
            assert _passes(float(got), ref, mag, tol)
        s = np.cumsum(y)[-1] - y[np.argmax(np.abs(y))]  # the largest sample dropped
        got = _bf16([width * np.float32(s / np.float32(n))])[0]
        if n == 16384:  # ~0.2 against an allowance of ~0.03 (4e-3*|ref| dominates in BF16)
            assert not _passes(float(got), ref, mag, tol)
