"""simpson_int's oracle against explicit panel loops and scipy's Simpson rule (the last interval
dropped for even N); its tolerance against fp32 simulations and planted bugs; the limits."""

import math

import numpy as np
import pytest
from scipy import integrate

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("simpson_int")


def _oracle(task, y, a, b, variant="fp32"):
    inputs = {"y_samples": y, "a": a, "b": b, "N": y.size}
    ref, mag = task.oracle(inputs, {"N": y.size}, variant)["result"]
    assert ref.shape == (1,) and mag.shape == (1,)
    return ref[0], mag[0]


def _case(task, n, seed, variant="fp32"):
    rng = np.random.default_rng(seed)
    a, b = task.reference.limits(rng)
    y = np.float32(-10) + np.float32(20) * rng.random(n, dtype=np.float32)
    if variant == "bf16":
        y = bf16_bits_to_f32(f32_to_bf16_bits(y))
    return y, np.float32(a), np.float32(b)


def _passes(got, ref, mag, tol):
    return abs(got - ref) <= tol.atol + tol.rtol * abs(ref) + tol.mtol * mag


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 10, 101, 1000])
def test_matches_panel_loop(task, n):
    rng = np.random.default_rng(n)
    y = rng.uniform(-10, 10, n)
    a, b = -3.5, 7.25
    ref, mag = _oracle(task, y, a, b)
    want, want_mag = [], []
    if n > 1:
        h = (b - a) / (n - 1)
        for i in range(0, n - 2, 2):  # even i with i + 2 <= n - 1
            want.append(h / 3 * (y[i] + 4 * y[i + 1] + y[i + 2]))
            want_mag.append(abs(h) / 3 * (abs(y[i]) + 4 * abs(y[i + 1]) + abs(y[i + 2])))
    assert ref == pytest.approx(math.fsum(want), rel=1e-12, abs=1e-12)
    assert mag == pytest.approx(math.fsum(want_mag), rel=1e-12, abs=1e-12)
    assert mag >= abs(ref)


@pytest.mark.parametrize("n", [5, 64, 1001, 4096])
def test_matches_scipy_simpson(task, n):
    y = np.random.default_rng(n).uniform(-10, 10, n)
    a, b = -200.0, 650.0
    h = (b - a) / (n - 1)
    used = n if n % 2 else n - 1  # even N: the last interval (and y[N-1]) is dropped
    want = integrate.simpson(y[:used], dx=h)
    assert _oracle(task, y, a, b)[0] == pytest.approx(want, rel=1e-12)
    # y[N-1] matters only for odd N
    y2 = y.copy()
    y2[-1] += 100.0
    assert (_oracle(task, y2, a, b)[0] == _oracle(task, y, a, b)[0]) == (n % 2 == 0)


def test_exact_on_a_cubic(task):
    n = 2001  # odd: Simpson integrates cubics exactly
    a, b = -2.0, 3.0
    x = np.linspace(a, b, n)
    y = x**3 - 2 * x + 1
    want = (b**4 - a**4) / 4 - (b**2 - a**2) + (b - a)
    assert _oracle(task, y, a, b)[0] == pytest.approx(want, rel=1e-12)


def test_fp32_accumulates_and_bf16_overwrites(task):
    y = np.ones(5)
    inputs = {"y_samples": y, "a": 0.0, "b": 4.0, "N": 5, "result": np.array([10.0])}
    assert task.oracle(inputs, {"N": 5}, "fp32")["result"][0][0] == pytest.approx(14.0)
    assert task.oracle(inputs, {"N": 5}, "bf16")["result"][0][0] == pytest.approx(4.0)


def test_generate_draws_ordered_fp32_limits(task):
    seen = set()
    for seed in range(20):
        out = task.generator({"N": 16}, np.random.default_rng(seed), "fp32")
        a, b = out["a"], out["b"]
        assert -1000 <= a <= b <= 1000
        assert float(np.float32(a)) == a and float(np.float32(b)) == b
        seen.add((a, b))
    assert len(seen) == 20


def _fp32_terms(y, a, b):
    n = y.size
    h3 = np.float32(np.float32(b - a) / np.float32(n - 1)) / np.float32(3)
    m = (n - 1) // 2
    y0, y1, y2 = y[0 : 2 * m : 2], y[1 : 2 * m : 2], y[2 : 2 * m + 1 : 2]
    return np.float32(h3) * ((y0 + np.float32(4) * y1) + y2)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("n", [16384, 262144])
def test_tolerance(task, variant, n):
    tol = task.spec.tolerance[variant]
    y, a, b = _case(task, n, n + 1, variant)
    ref, mag = _oracle(task, y.astype(np.float64), float(a), float(b), variant)
    terms = _fp32_terms(y, a, b)
    rng = np.random.default_rng(0)
    sums = [np.cumsum(terms)[-1], np.cumsum(rng.permutation(terms))[-1], np.sum(terms)]
    for s in sums:  # sequential atomics in index or random order, and a tree
        got = float(s)
        if variant == "bf16":
            got = float(bf16_bits_to_f32(f32_to_bf16_bits(np.array([s], np.float32)))[0])
        assert _passes(got, ref, mag, tol)
    s = float(np.cumsum(terms)[-1])
    assert not _passes(s - float(terms[n // 4]), ref, mag, tol)  # a dropped panel
    if variant == "fp32":
        h = (float(b) - float(a)) / (n - 1)
        last = h / 2 * (float(y[-2]) + float(y[-1]))  # the last interval included (trapezoid)
        assert not _passes(s + last, ref, mag, tol)
        shifted = _fp32_terms(y[1:], a, b)  # panels starting at y[1] (off by one)
        assert not _passes(float(np.sum(shifted)), ref, mag, tol)
