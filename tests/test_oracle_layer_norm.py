"""layer_norm's oracle against an explicit fsum loop; its tolerances against an fp32/bf16
simulation of the baseline (per-thread partials, shuffled atomics, host divisions), which must
pass, and against planted bugs, which must fail."""

import math

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task

F32 = np.float32


@pytest.fixture(scope="module")
def task():
    return get_task("layer_norm")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _passes(got, ref, mag, tol):
    bound = tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag
    return bool(np.all(np.abs(np.asarray(got, dtype=np.float64) - ref) <= bound))


def _oracle(task, x, w, b, variant="fp32", eps=1e-5):
    n = x.size
    inputs = {"input": x, "weight": w, "bias": b, "epsilon": eps, "N": n}
    return task.oracle(inputs, {"N": n}, variant)["output"]


def _inputs(n, seed, variant="fp32"):
    rng = np.random.default_rng(seed)
    x, w, b = (F32(-1) + F32(2) * rng.random(n, dtype=np.float32) for _ in range(3))
    if variant == "bf16":
        x, w, b = _bf(x), _bf(w), _bf(b)
    return x, w, b


def _atomic_sum(terms, threads, rng):
    """Per-thread sequential fp32 partials over a grid-stride loop, then one fp32 atomic per
    nonzero partial in a random order."""
    n = terms.size
    per = -(-n // threads)
    pad = np.zeros(per * threads, dtype=np.float32)
    pad[:n] = terms
    partials = np.cumsum(pad.reshape(per, threads), axis=0, dtype=np.float32)[-1]
    partials = partials[partials != 0]
    rng.shuffle(partials)
    return np.cumsum(partials, dtype=np.float32)[-1]


def _baseline(x, w, b, seed=0, eps=1e-5):
    """The baseline in fp32: grid of min(ceil(N/256), 1024) x 256 threads."""
    rng = np.random.default_rng(seed)
    n = x.size
    threads = min(-(-n // 256), 1024) * 256
    mean = _atomic_sum(x, threads, rng) / F32(n)
    d = x - mean
    var = _atomic_sum(d * d, threads, rng) / F32(n)
    sd = np.sqrt(var + F32(eps))
    return w * ((x - mean) / sd) + b


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("n", [1, 2, 64, 1000])
def test_matches_loop(task, variant, n):
    rng = np.random.default_rng(n)
    x, w, b = (rng.uniform(-1, 1, n) for _ in range(3))
    ref, mag = _oracle(task, x, w, b, variant)
    eps32 = float(np.float32(1e-5))
    mean = math.fsum(x) / n
    var = math.fsum((v - mean) ** 2 for v in x) / n
    sd = math.sqrt(var + eps32)
    expect = [w[i] * ((x[i] - mean) / sd) + b[i] for i in range(n)]
    np.testing.assert_allclose(ref, expect, rtol=1e-12, atol=1e-12)
    assert np.all(mag >= np.abs(ref))


def test_constant_vector_gives_bias(task):
    x = np.full(8, 0.75)
    w = np.linspace(-1, 1, 8)
    b = np.linspace(0.5, -0.5, 8)
    ref, _ = _oracle(task, x, w, b)
    np.testing.assert_allclose(ref, b, rtol=0, atol=1e-15)


@pytest.mark.parametrize("n", [64, 1024, 1 << 20])
def test_fp32_baseline_passes(task, n):
    tol = task.spec.tolerance["fp32"]
    x, w, b = _inputs(n, n)
    ref, mag = _oracle(task, x.astype(np.float64), w.astype(np.float64), b.astype(np.float64))
    for seed in range(2):
        assert _passes(_baseline(x, w, b, seed), ref, mag, tol)


@pytest.mark.parametrize("n", [64, 1024])
def test_bf16_baseline_passes(task, n):
    tol = task.spec.tolerance["bf16"]
    x, w, b = _inputs(n, n + 1, "bf16")
    ref, mag = _oracle(
        task, x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), "bf16"
    )
    assert _passes(_bf(_baseline(x, w, b)), ref, mag, tol)


@pytest.mark.parametrize("n", [64, 256, 1024])
def test_planted_bugs_fail(task, n):
    tol = task.spec.tolerance["fp32"]
    x, w, b = (v.astype(np.float64) for v in _inputs(n, 3 * n))
    ref, mag = _oracle(task, x, w, b)
    eps = float(np.float32(1e-5))
    mean, var = x.mean(), x.var()
    xhat = (x - mean) / np.sqrt(var + eps)
    assert not _passes(w * xhat, ref, mag, tol)  # bias dropped
    unbiased = w * (x - mean) / np.sqrt(var * n / (n - 1) + eps) + b
    assert not _passes(unbiased, ref, mag, tol)
    assert not _passes(w * (x - mean) / np.sqrt(var + 1e-3) + b, ref, mag, tol)  # wrong eps
    xs = x[:-1]  # statistics that drop the last element
    dropped = w * (x - xs.mean()) / np.sqrt(xs.var() + eps) + b
    assert not _passes(dropped, ref, mag, tol)
    assert not _passes(np.roll(ref, 1), ref, mag, tol)
