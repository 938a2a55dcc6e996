"""softmax_attention's oracle against explicit loops and scipy; its tolerances against fp32/bf16
simulations of the baseline (which must pass) and of planted bugs (which must fail)."""

import math

import numpy as np
import pytest
from scipy.special import softmax as scipy_softmax

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("softmax_attention")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _oracle(task, q, k, v, variant="fp32"):
    inputs = {"Q": q, "K": k, "V": v}
    params = {"q": q.shape[0], "kv": k.shape[0], "dqk": q.shape[1], "dv": v.shape[1]}
    return task.oracle(inputs, params, variant)["Y"]


def _passes(got, ref, mag, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag))


def _inputs(shape, seed, variant="fp32"):
    nq, nkv, dqk, dv = shape
    rng = np.random.default_rng(seed)
    arrs = [rng.uniform(-1, 1, s).astype(np.float32) for s in [(nq, dqk), (nkv, dqk), (nkv, dv)]]
    return [_bf(a) if variant == "bf16" else a for a in arrs]


def _fma_chain(a, b):
    """a @ b by ascending-k fp32 accumulation (each step rounded once to fp32)."""
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for k in range(a.shape[1]):
        acc = (acc + np.outer(a[:, k].astype(np.float64), b[k].astype(np.float64))).astype(
            np.float32
        )
    return acc


def _baseline(q, k, v, variant, scale=None, drop_last=False):
    """The baseline's order and, in BF16, its rounding points (S, e, P, Y)."""
    bf = _bf if variant == "bf16" else (lambda x: np.asarray(x, dtype=np.float32))
    if drop_last:
        k, v = k[:-1], v[:-1]
    s = bf(_fma_chain(q, k.T) * np.float32(scale or 1.0 / math.sqrt(q.shape[1])))
    e = np.exp(s - s.max(axis=1, keepdims=True)).astype(np.float32)
    inv = np.float32(1.0) / np.cumsum(e, axis=1, dtype=np.float32)[:, -1:]
    p = bf(bf(e) * inv)
    return bf(_fma_chain(p, v)).astype(np.float64)


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (3, 5, 4, 2), (7, 33, 16, 9)])
def test_matches_loops_and_scipy(task, shape):
    q, k, v = (a.astype(np.float64) for a in _inputs(shape, sum(shape)))
    ref, mag = _oracle(task, q, k, v)
    assert ref.shape == mag.shape == (shape[0], shape[3])
    p = scipy_softmax(q @ k.T / math.sqrt(shape[2]), axis=1)
    np.testing.assert_allclose(ref, p @ v, rtol=1e-12, atol=1e-14)
    for i in range(shape[0]):
        s = [
            math.fsum(q[i, d] * k[j, d] for d in range(shape[2])) / math.sqrt(shape[2])
            for j in range(shape[1])
        ]
        w = [math.exp(x - max(s)) for x in s]
        total = math.fsum(w)
        for c in range(shape[3]):
            expect = math.fsum(w[j] / total * v[j, c] for j in range(shape[1]))
            size = math.fsum(w[j] / total * abs(v[j, c]) for j in range(shape[1]))
            assert ref[i, c] == pytest.approx(expect, rel=1e-12, abs=1e-14)
            assert mag[i, c] == pytest.approx(size, rel=1e-12)
            assert mag[i, c] >= abs(ref[i, c])


def test_key_order_and_uniform_scores(task):
    q, k, v = (a.astype(np.float64) for a in _inputs((4, 6, 8, 3), 1))
    ref, mag = _oracle(task, q, k, v)
    perm = np.random.default_rng(2).permutation(6)  # permuting the keys with their values
    ref2, mag2 = _oracle(task, q, k[perm], v[perm])
    np.testing.assert_allclose(ref2, ref, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(mag2, mag, rtol=1e-13)
    # zero queries give uniform weights: Y is the mean of V's rows
    ref3, _ = _oracle(task, np.zeros((2, 8)), k, v)
    np.testing.assert_allclose(ref3, np.tile(v.mean(axis=0), (2, 1)), rtol=1e-13)


@pytest.mark.parametrize("shape", [(16, 256, 512, 64), (8, 512, 1024, 32)])
def test_fp32_tolerance(task, shape):
    tol = task.spec.tolerance["fp32"]
    q, k, v = _inputs(shape, 3)
    ref, mag = _oracle(task, *(a.astype(np.float64) for a in (q, k, v)))
    assert _passes(_baseline(q, k, v, "fp32"), ref, mag, tol)
    assert not _passes(_baseline(q, k, v, "fp32", drop_last=True), ref, mag, tol)
    assert not _passes(_baseline(q, k, v, "fp32", scale=1.0 / shape[2]), ref, mag, tol)
    assert not _passes(np.roll(ref, 1, axis=1), ref, mag, tol)


@pytest.mark.parametrize("shape", [(16, 256, 512, 64), (8, 512, 1024, 32)])
def test_bf16_tolerance(task, shape):
    tol = task.spec.tolerance["bf16"]
    q, k, v = _inputs(shape, 4, "bf16")
    ref, mag = _oracle(task, *(a.astype(np.float64) for a in (q, k, v)), "bf16")
    assert _passes(_baseline(q, k, v, "bf16"), ref, mag, tol)
    # without the intermediate roundings (a flash-style kernel) it passes too
    assert _passes(_bf(ref), ref, mag, tol)
    assert not _passes(np.roll(_baseline(q, k, v, "bf16"), 1, axis=1), ref, mag, tol)
    assert not _passes(_baseline(q, k, v, "bf16", scale=1.0 / shape[2]), ref, mag, tol)
