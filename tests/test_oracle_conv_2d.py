"""conv_2d's oracle against scipy.signal.correlate2d and an explicit loop; its tolerances against
fp32/bf16 simulations of the baseline and of a float32 FFT convolution (must pass) and of planted
bugs: a dropped term, a one-pixel shift, a flipped kernel, TF32 inputs (must fail)."""

import math

import numpy as np
import pytest
import scipy.fft
from scipy.signal import correlate2d

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("conv_2d")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _tf32(x):
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def _oracle(task, x, ker, variant="fp32"):
    (h, w), (kh, kw) = x.shape, ker.shape
    inputs = {"input": x, "kernel": ker, "input_rows": h, "input_cols": w}
    inputs |= {"kernel_rows": kh, "kernel_cols": kw}
    return task.oracle(inputs, {"H": h, "W": w, "k": kh}, variant)["output"]


def _passes(got, ref, mag, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag))


def _sequential(x, ker, skip_last=False, shift=0):
    """The baseline's fp32 FMA chain, m outer and n inner (planted bugs: the last term dropped,
    the window shifted one column)."""
    (h, w), (kh, kw) = x.shape, ker.shape
    ho, wo = h - kh + 1, w - kw + 1
    x32 = np.pad(x, ((0, 0), (0, shift))).astype(np.float32)
    acc = np.zeros((ho, wo), dtype=np.float32)
    for m in range(kh):
        for n in range(kw):
            if skip_last and (m, n) == (kh - 1, kw - 1):
                continue
            window = x32[m : m + ho, n + shift : n + shift + wo].astype(np.float64)
            acc = (acc.astype(np.float64) + window * float(np.float32(ker[m, n]))).astype(
                np.float32
            )
    return acc.astype(np.float64)


def _fft32(x, ker, tile=64):
    """Overlap-save on tile x tile blocks in float32 FFTs, another correct computation order."""
    (h, w), (kh, kw) = x.shape, ker.shape
    ho, wo = h - kh + 1, w - kw + 1
    step_r, step_c = tile - kh + 1, tile - kw + 1
    padded = np.zeros((tile, tile), dtype=np.float32)
    padded[:kh, :kw] = ker
    spectrum = np.conj(scipy.fft.rfft2(padded))
    out = np.empty((ho, wo), dtype=np.float32)
    for r in range(0, ho, step_r):
        for c in range(0, wo, step_c):
            block = np.zeros((tile, tile), dtype=np.float32)
            part = x[r : r + tile, c : c + tile].astype(np.float32)
            block[: part.shape[0], : part.shape[1]] = part
            y = scipy.fft.irfft2(scipy.fft.rfft2(block) * spectrum, s=(tile, tile))
            assert y.dtype == np.float32
            nr, nc = min(step_r, ho - r), min(step_c, wo - c)
            out[r : r + nr, c : c + nc] = y[:nr, :nc]
    return out.astype(np.float64)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize(
    ("h", "w", "kh", "kw"), [(1, 1, 1, 1), (4, 6, 1, 1), (5, 5, 5, 5), (9, 7, 3, 2), (40, 50, 8, 8)]
)
def test_matches_correlate2d(task, variant, h, w, kh, kw):
    rng = np.random.default_rng(h * w + kh)
    x, ker = rng.uniform(-1, 1, (h, w)), rng.uniform(-1, 1, (kh, kw))
    ref, mag = _oracle(task, x, ker, variant)
    assert ref.shape == (h - kh + 1, w - kw + 1) and mag.shape == ref.shape
    np.testing.assert_allclose(ref, correlate2d(x, ker, "valid"), rtol=0, atol=1e-12)
    np.testing.assert_allclose(mag, correlate2d(np.abs(x), np.abs(ker), "valid"), atol=1e-12)
    r, c = ref.shape[0] - 1, ref.shape[1] // 2
    terms = [x[r + m, c + n] * ker[m, n] for m in range(kh) for n in range(kw)]
    assert ref[r, c] == pytest.approx(math.fsum(terms), abs=1e-12)
    assert mag[r, c] == pytest.approx(math.fsum(abs(v) for v in terms), abs=1e-12)


def test_large_image_bands(task):
    """More than one FFT band of rows (the large-suite path) still matches correlate2d."""
    rng = np.random.default_rng(5)
    x, ker = rng.uniform(-1, 1, (1200, 4000)), rng.uniform(-1, 1, (16, 16))
    ref, _ = _oracle(task, x, ker)
    # output rows 1000..1099 straddle the first band's end (1048 input rows, 1033 output rows)
    want = correlate2d(x[1000:1115], ker, "valid")
    np.testing.assert_allclose(ref[1000:1100], want, rtol=0, atol=1e-11)


def test_no_flip(task):
    x = np.arange(9.0).reshape(3, 3)
    ker = np.array([[1.0, 0.0], [0.0, 0.0]])  # picks the top-left pixel of each window
    ref, _ = _oracle(task, x, ker)
    np.testing.assert_array_equal(ref, x[:2, :2])


@pytest.mark.parametrize("k", [8, 32])
def test_fp32_tolerance(task, k):
    tol = task.spec.tolerance["fp32"]
    rng = np.random.default_rng(k)
    x = rng.uniform(-1, 1, (160, 192)).astype(np.float32).astype(np.float64)
    ker = rng.uniform(-1, 1, (k, k)).astype(np.float32).astype(np.float64)
    ref, mag = _oracle(task, x, ker)
    assert _passes(_sequential(x, ker), ref, mag, tol)
    assert _passes(_fft32(x, ker, tile=2 * k if k > 8 else 64), ref, mag, tol)
    assert not _passes(_sequential(x, ker, skip_last=True), ref, mag, tol)
    assert not _passes(_sequential(x, ker, shift=1), ref, mag, tol)
    assert not _passes(_sequential(x, ker[::-1, ::-1].copy()), ref, mag, tol)
    tf32 = _sequential(_tf32(x).astype(np.float64), _tf32(ker).astype(np.float64))
    assert not _passes(tf32, ref, mag, tol)


@pytest.mark.parametrize("k", [8, 32])
def test_bf16_tolerance(task, k):
    tol = task.spec.tolerance["bf16"]
    rng = np.random.default_rng(k + 1)
    x = _bf(rng.uniform(-1, 1, (128, 160))).astype(np.float64)
    ker = _bf(rng.uniform(-1, 1, (k, k))).astype(np.float64)
    ref, mag = _oracle(task, x, ker, "bf16")
    assert _passes(_bf(_sequential(x, ker)).astype(np.float64), ref, mag, tol)
    assert _passes(_bf(ref).astype(np.float64), ref, mag, tol)
    for bug in (_sequential(x, ker, skip_last=True), _sequential(x, ker, shift=1)):
        assert not _passes(_bf(bug).astype(np.float64), ref, mag, tol)
