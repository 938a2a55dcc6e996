"""conv_1d's oracle against np.correlate and an explicit loop; its tolerances against fp32/bf16
simulations of the baseline and of a float32 FFT convolution (must pass) and of planted bugs:
a dropped term, a shift, a flipped kernel, TF32 inputs (must fail)."""

import math

import numpy as np
import pytest
import scipy.fft

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("conv_1d")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _tf32(x):
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def _oracle(task, x, ker, variant="fp32"):
    params = {"L": x.size, "k": ker.size}
    inputs = {"input": x, "kernel": ker, "input_size": x.size, "kernel_size": ker.size}
    return task.oracle(inputs, params, variant)["output"]


def _passes(got, ref, mag, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag))


def _sequential(x, ker, terms=None, shift=0):
    """The baseline's fp32 FMA chain over ascending t (planted bugs: fewer terms, a shift)."""
    k = ker.size
    n_out = x.size - k + 1
    x32 = np.concatenate([x, np.zeros(shift)]).astype(np.float32)
    acc = np.zeros(n_out, dtype=np.float32)
    for t in range(k if terms is None else terms):
        term = x32[t + shift : t + shift + n_out].astype(np.float64) * float(np.float32(ker[t]))
        acc = (acc.astype(np.float64) + term).astype(np.float32)
    return acc.astype(np.float64)


def _fft32(x, ker, block=512):
    """Overlap-save in float32 FFTs, a different but correct computation order."""
    k, n_out = ker.size, x.size - ker.size + 1
    step = block - k + 1
    spectrum = np.conj(scipy.fft.rfft(ker.astype(np.float32), block))
    out = np.empty(n_out, dtype=np.float32)
    for i in range(0, n_out, step):
        seg = np.zeros(block, dtype=np.float32)
        part = x[i : i + block].astype(np.float32)
        seg[: part.size] = part
        y = scipy.fft.irfft(scipy.fft.rfft(seg) * spectrum, block)
        assert y.dtype == np.float32
        out[i : i + step] = y[: min(step, n_out - i)]
    return out.astype(np.float64)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize(("n", "k"), [(1, 1), (6, 1), (6, 6), (40, 7), (1024, 256), (3000, 32)])
def test_matches_correlate(task, variant, n, k):
    rng = np.random.default_rng(n + k)
    x, ker = rng.uniform(-1, 1, n), rng.uniform(-1, 1, k)
    ref, mag = _oracle(task, x, ker, variant)
    assert ref.shape == (n - k + 1,) and mag.shape == ref.shape
    np.testing.assert_allclose(ref, np.correlate(x, ker, "valid"), rtol=0, atol=1e-12)
    np.testing.assert_allclose(mag, np.correlate(np.abs(x), np.abs(ker), "valid"), atol=1e-12)
    for i in (0, (n - k) // 2, n - k):
        terms = [x[i + t] * ker[t] for t in range(k)]
        assert ref[i] == pytest.approx(math.fsum(terms), abs=1e-12)
        assert mag[i] == pytest.approx(math.fsum(abs(v) for v in terms), abs=1e-12)


def test_no_flip(task):
    x = np.array([1.0, 2.0, 3.0, 4.0])
    ref, _ = _oracle(task, x, np.array([1.0, 0.0, -1.0]))
    np.testing.assert_array_equal(ref, [1.0 - 3.0, 2.0 - 4.0])


@pytest.mark.parametrize("k", [32, 256])
def test_fp32_tolerance(task, k):
    tol = task.spec.tolerance["fp32"]
    rng = np.random.default_rng(k)
    x = rng.uniform(-1, 1, 20000).astype(np.float32).astype(np.float64)
    ker = rng.uniform(-1, 1, k).astype(np.float32).astype(np.float64)
    ref, mag = _oracle(task, x, ker)
    assert _passes(_sequential(x, ker), ref, mag, tol)
    assert _passes(_fft32(x, ker), ref, mag, tol)
    assert not _passes(_sequential(x, ker, terms=k - 1), ref, mag, tol)
    assert not _passes(_sequential(x, ker, shift=1), ref, mag, tol)
    assert not _passes(_sequential(x, ker[::-1].copy()), ref, mag, tol)
    tf32 = _sequential(_tf32(x).astype(np.float64), _tf32(ker).astype(np.float64))
    assert not _passes(tf32, ref, mag, tol)


@pytest.mark.parametrize("k", [32, 256])
def test_bf16_tolerance(task, k):
    tol = task.spec.tolerance["bf16"]
    rng = np.random.default_rng(k + 1)
    x = _bf(rng.uniform(-1, 1, 20000)).astype(np.float64)
    ker = _bf(rng.uniform(-1, 1, k)).astype(np.float64)
    ref, mag = _oracle(task, x, ker, "bf16")
    assert _passes(_bf(_sequential(x, ker)).astype(np.float64), ref, mag, tol)
    assert _passes(_bf(ref).astype(np.float64), ref, mag, tol)
    for bug in (_sequential(x, ker, terms=k - 1), _sequential(x, ker, shift=1)):
        assert not _passes(_bf(bug).astype(np.float64), ref, mag, tol)
