"""batch_norm's oracle against explicit per-feature fsum loops and numpy's two-pass variance; its
tolerances against an fp32/bf16 simulation of the baseline (sequential one-pass statistics per
feature), which must pass, and against planted bugs, which must fail."""

import math

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task

F32 = np.float32
EPS32 = float(np.float32(1e-5))


@pytest.fixture(scope="module")
def task():
    return get_task("batch_norm")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _passes(got, ref, mag, tol):
    bound = tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag
    return bool(np.all(np.abs(np.asarray(got, dtype=np.float64) - ref) <= bound))


def _oracle(task, x, g, b, variant="fp32"):
    n, c = x.shape
    inputs = {"input": x, "gamma": g, "beta": b, "epsilon": 1e-5, "N": n, "C": c}
    return task.oracle(inputs, {"N": n, "C": c}, variant)["output"]


def _inputs(n, c, seed, variant="fp32", offset=0.0):
    rng = np.random.default_rng(seed)
    x = F32(offset) + (F32(-1) + F32(2) * rng.random((n, c), dtype=np.float32))
    g, b = (F32(-1) + F32(2) * rng.random(c, dtype=np.float32) for _ in range(2))
    if variant == "bf16":
        x, g, b = _bf(x), _bf(g), _bf(b)
    return x, g, b


def _baseline(x, g, b):
    """The baseline in fp32: per feature, sequential sum and FMA sum of squares over the rows."""
    n, c = x.shape
    s = np.zeros(c, dtype=np.float32)
    sq = np.zeros(c, dtype=np.float32)
    xd = x.astype(np.float64)
    for r in range(n):
        s = s + x[r]
        sq = (sq.astype(np.float64) + xd[r] * xd[r]).astype(np.float32)  # fmaf(v, v, sq)
    mean = s / F32(n)
    var = sq / F32(n) - mean * mean
    sd = np.sqrt(var + F32(EPS32))
    return g * ((x - mean) / sd) + b


def _as64(*arrays):
    return [a.astype(np.float64) for a in arrays]


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("n,c", [(1, 1), (2, 3), (16, 5), (100, 7)])
def test_matches_loops(task, variant, n, c):
    rng = np.random.default_rng(10 * n + c)
    x = rng.uniform(-1, 1, (n, c))
    g, b = rng.uniform(-1, 1, c), rng.uniform(-1, 1, c)
    ref, mag = _oracle(task, x, g, b, variant)
    assert ref.shape == (n, c)
    for f in range(c):
        col = list(x[:, f])
        mean = math.fsum(col) / n
        var = math.fsum(v * v for v in col) / n - mean * mean
        sd = math.sqrt(var + EPS32)
        expect = [g[f] * ((v - mean) / sd) + b[f] for v in col]
        np.testing.assert_allclose(ref[:, f], expect, rtol=1e-11, atol=1e-11)
    # a two-pass variance gives the same values for centred data
    two_pass = g * (x - x.mean(axis=0)) / np.sqrt(x.var(axis=0) + EPS32) + b
    np.testing.assert_allclose(ref, two_pass, rtol=1e-11, atol=1e-11)
    assert np.all(mag >= np.abs(ref))


@pytest.mark.parametrize("n,c", [(16, 1024), (1024, 256), (4096, 64)])
def test_fp32_baseline_passes(task, n, c):
    tol = task.spec.tolerance["fp32"]
    x, g, b = _inputs(n, c, n + c)
    ref, mag = _oracle(task, *_as64(x, g, b))
    assert _passes(_baseline(x, g, b), ref, mag, tol)


def test_fp32_one_pass_with_large_mean_passes(task):
    # |mean| >> std: the fp32 one-pass variance loses digits; mag widens by E[x^2]/var
    tol = task.spec.tolerance["fp32"]
    x, g, b = _inputs(1024, 128, 5, offset=10.0)
    ref, mag = _oracle(task, *_as64(x, g, b))
    assert _passes(_baseline(x, g, b), ref, mag, tol)


@pytest.mark.parametrize("n,c", [(16, 1024), (1024, 64)])
def test_bf16_baseline_passes(task, n, c):
    tol = task.spec.tolerance["bf16"]
    x, g, b = _inputs(n, c, 7 * n + c, "bf16")
    ref, mag = _oracle(task, *_as64(x, g, b), "bf16")
    assert _passes(_bf(_baseline(x, g, b)), ref, mag, tol)


@pytest.mark.parametrize("n,c", [(16, 16), (256, 64), (1024, 1024)])
def test_planted_bugs_fail(task, n, c):
    tol = task.spec.tolerance["fp32"]
    x, g, b = _as64(*_inputs(n, c, 3 * n + c))
    ref, mag = _oracle(task, x, g, b)
    mean, var = x.mean(axis=0), x.var(axis=0)

    def norm(m, v, eps=EPS32):
        return g * (x - m) / np.sqrt(v + eps) + b

    assert _passes(norm(mean, var), ref, mag, tol)
    assert not _passes(norm(mean, var) - b, ref, mag, tol)  # beta dropped
    assert not _passes(norm(mean, var * n / (n - 1)), ref, mag, tol)  # unbiased variance
    assert not _passes(norm(mean, var, 1e-3), ref, mag, tol)  # wrong epsilon
    xs = x[:-1]  # statistics that drop the last row
    assert not _passes(norm(xs.mean(axis=0), xs.var(axis=0)), ref, mag, tol)
    # statistics over the features of each row instead of over the rows
    rows = g * (x - x.mean(axis=1, keepdims=True)) / np.sqrt(x.var(axis=1, keepdims=True) + EPS32)
    assert not _passes(rows + b, ref, mag, tol)
    assert not _passes(np.roll(ref, 1, axis=1), ref, mag, tol)
