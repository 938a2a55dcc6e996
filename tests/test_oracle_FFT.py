"""FFT's oracle against an explicit DFT; its tolerances against fp32/bf16 simulations of the
baseline's radix-2 algorithm and scipy's float32 FFT (must pass) and planted bugs (must fail)."""

import cmath
import math

import numpy as np
import pytest
import scipy.fft

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("FFT")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _oracle(task, re, im, variant="fp32"):
    n = re.size
    out = task.oracle({"input_real": re, "input_img": im, "N": n}, {"N": n}, variant)
    (xr, mag), (xi, mag_i) = out["output_real"], out["output_img"]
    assert mag is mag_i or np.array_equal(mag, mag_i)
    return xr, xi, mag


def _passes(got, ref, mag, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag))


def _bitrev(log2n):
    idx = np.arange(1 << log2n)
    rev = np.zeros_like(idx)
    for b in range(log2n):
        rev |= ((idx >> b) & 1) << (log2n - 1 - b)
    return rev


def _radix2(re, im, bf16=False, sign=-1.0, permute=True, twiddle_shift=0):
    """The baseline's algorithm in float32 (FMA for the first product of t), bf16 rounding of the
    twiddles and of every stage's outputs if asked; the other arguments plant bugs."""
    n = re.size
    log2n = n.bit_length() - 1
    k = np.arange(n // 2)
    theta = (sign * 2.0 * np.pi * k / n).astype(np.float32).astype(np.float64)
    w_re, w_im = np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)
    if bf16:
        w_re, w_im = _bf(w_re), _bf(w_im)
    order = _bitrev(log2n) if permute else np.arange(n)
    ar, ai = re.astype(np.float32)[order], im.astype(np.float32)[order]
    for s in range(1, log2n + 1):
        half = 1 << (s - 1)
        ar, ai = ar.reshape(-1, 2, half), ai.reshape(-1, 2, half)
        idx = np.arange(half) * (n >> s)
        if s == log2n:
            idx = np.minimum(idx + twiddle_shift, n // 2 - 1)
        wr, wi = w_re[idx], w_im[idx]
        x1r, x1i, x2r, x2i = ar[:, 0], ai[:, 0], ar[:, 1], ai[:, 1]
        tr = (wr.astype(np.float64) * x2r - wi * x2i).astype(np.float32)
        ti = (wr.astype(np.float64) * x2i + wi * x2r).astype(np.float32)
        outs = [x1r + tr, x1r - tr, x1i + ti, x1i - ti]
        if bf16:
            outs = [_bf(v) for v in outs]
        ar = np.stack([outs[0], outs[1]], axis=1).reshape(-1)
        ai = np.stack([outs[2], outs[3]], axis=1).reshape(-1)
    return ar.astype(np.float64), ai.astype(np.float64)


def _signal(n, seed, bf16=False):
    rng = np.random.default_rng(seed)
    re = rng.uniform(-1, 1, n).astype(np.float32)
    im = rng.uniform(-1, 1, n).astype(np.float32)
    if bf16:
        re, im = _bf(re), _bf(im)
    return re.astype(np.float64), im.astype(np.float64)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("n", [1, 2, 4, 8, 32, 64])
def test_matches_explicit_dft(task, variant, n):
    re, im = _signal(n, n)
    xr, xi, mag = _oracle(task, re, im, variant)
    x = re + 1j * im
    kk, nn = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    dft = np.exp(-2j * np.pi * kk * nn / n) @ x
    np.testing.assert_allclose(xr, dft.real, rtol=0, atol=1e-12)
    np.testing.assert_allclose(xi, dft.imag, rtol=0, atol=1e-12)
    k = n // 3
    want = sum(x[j] * cmath.exp(-2j * math.pi * k * j / n) for j in range(n))
    assert abs(complex(xr[k], xi[k]) - want) < 1e-12
    stages = max(n.bit_length() - 1, 1)
    np.testing.assert_allclose(mag, math.sqrt(stages) * np.linalg.norm(x), rtol=1e-14)
    assert mag.shape == (n,)


def test_known_transforms(task):
    n = 16
    impulse = np.zeros(n)
    impulse[3] = 1.0
    xr, xi, _ = _oracle(task, impulse, np.zeros(n))
    k = np.arange(n)
    np.testing.assert_allclose(xr + 1j * xi, np.exp(-2j * np.pi * 3 * k / n), atol=1e-14)
    xr, xi, _ = _oracle(task, np.ones(n), np.zeros(n))  # unnormalised: DC = N
    np.testing.assert_allclose(xr, np.eye(n)[0] * n, atol=1e-12)
    np.testing.assert_allclose(xi, 0.0, atol=1e-12)


@pytest.mark.parametrize("n", [1024, 16384])
def test_fp32_tolerance(task, n):
    tol = task.spec.tolerance["fp32"]
    re, im = _signal(n, 7)
    xr, xi, mag = _oracle(task, re, im)
    for got_r, got_i in (_radix2(re, im), _float32_pocketfft(re, im)):
        assert _passes(got_r, xr, mag, tol) and _passes(got_i, xi, mag, tol)
    bugs = {
        "conjugated": _radix2(re, im, sign=1.0),
        "no bit reversal": _radix2(re, im, permute=False),
        "twiddle off by one": _radix2(re, im, twiddle_shift=1),
        "dropped input": _radix2(np.where(np.arange(n) == 5, 0.0, re), im),
        "normalised": tuple(v / n for v in _radix2(re, im)),
    }
    for name, (got_r, got_i) in bugs.items():
        assert not (_passes(got_r, xr, mag, tol) and _passes(got_i, xi, mag, tol)), name


def _float32_pocketfft(re, im):
    z = scipy.fft.fft((re + 1j * im).astype(np.complex64))
    assert z.dtype == np.complex64
    return z.real.astype(np.float64), z.imag.astype(np.float64)


@pytest.mark.parametrize("n", [1024, 4096])
def test_bf16_tolerance(task, n):
    tol = task.spec.tolerance["bf16"]
    re, im = _signal(n, 11, bf16=True)
    xr, xi, mag = _oracle(task, re, im, "bf16")
    got_r, got_i = _radix2(re, im, bf16=True)
    assert _passes(got_r, xr, mag, tol) and _passes(got_i, xi, mag, tol)
    # one rounding of the exact result, the fp32 route's rounding, passes too
    assert _passes(_bf(xr).astype(np.float64), xr, mag, tol)
    bugs = {
        "conjugated": _radix2(re, im, bf16=True, sign=1.0),
        "no bit reversal": _radix2(re, im, bf16=True, permute=False),
        "scaled 3%": (got_r * 1.03, got_i * 1.03),
    }
    for name, (br, bi) in bugs.items():
        assert not (_passes(br, xr, mag, tol) and _passes(bi, xi, mag, tol)), name


def test_the_four_step_transform_of_large_sizes_matches_numpy():
    task = get_task("FFT")
    rng = np.random.default_rng(5)
    n = 1 << 21  # above FOUR_STEP_MIN: the threaded path
    re, im = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    xr, xi, _ = _oracle(task, re, im)
    direct = np.fft.fft(re + 1j * im)
    scale = np.sqrt(np.sum(re**2 + im**2))
    assert np.max(np.abs(xr + 1j * xi - direct)) <= 1e-12 * scale
