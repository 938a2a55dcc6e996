"""rope's oracle against explicit loops (complex rotation, math.pow with fp32 rounding); its
tolerances against fp32/bf16 simulations (the baseline's order; a powf off by a few ulp; an
angle kept in float64), which must pass, and against layout and position bugs, which must
fail."""

import cmath
import math
import struct

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task

F32 = np.float32
BASE = 10000.0


@pytest.fixture(scope="module")
def task():
    return get_task("rope")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def _passes(got, ref, mag, tol):
    bound = tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag
    return bool(np.all(np.abs(np.asarray(got, dtype=np.float64) - ref) <= bound))


def _oracle(task, x, variant="fp32", base=BASE):
    m, d = x.shape
    inputs = {"input": x, "base": base, "M": m, "D": d}
    return task.oracle(inputs, {"M": m, "D": d}, variant)["output"]


def _rotate(x, theta32):
    """fp32 rotation of adjacent pairs with the given fp32 theta per pair."""
    m = np.arange(x.shape[0], dtype=np.float32)
    phi = m[:, None] * theta32[None, :]
    c, s = np.cos(phi), np.sin(phi)
    x0, x1 = x[:, 0::2], x[:, 1::2]
    out = np.empty_like(x)
    out[:, 0::2] = x0 * c - x1 * s
    out[:, 1::2] = x0 * s + x1 * c
    return out


def _theta32(d, ulps=0):
    p = np.arange(d // 2, dtype=np.float32)
    expo = (F32(-2.0) * p) / F32(d)
    theta = np.power(BASE, expo.astype(np.float64)).astype(np.float32)
    for _ in range(abs(ulps)):
        theta = np.nextafter(theta, F32(np.inf) if ulps > 0 else F32(0))
    return theta


def test_scalar_values(task):
    (base_arg,) = [a for a in task.spec.args if a.name == "base"]
    assert float(base_arg.value) == BASE


@pytest.mark.parametrize("m,d", [(1, 2), (3, 8), (7, 64)])
def test_matches_loop(task, m, d):
    x = np.random.default_rng(d).uniform(-1, 1, (m, d))
    ref, mag = _oracle(task, x)
    assert ref.shape == (m, d) and mag.shape == (m, d)
    for r in range(m):
        for p in range(d // 2):
            expo = _f32(_f32(-2.0 * p) / d)
            theta = _f32(math.pow(BASE, expo))
            phi = _f32(r * theta)
            z = complex(x[r, 2 * p], x[r, 2 * p + 1]) * cmath.exp(1j * phi)
            assert ref[r, 2 * p] == pytest.approx(z.real, rel=1e-12, abs=1e-14)
            assert ref[r, 2 * p + 1] == pytest.approx(z.imag, rel=1e-12, abs=1e-14)
    assert np.all(mag >= np.abs(ref))
    # a rotation keeps each pair's length
    np.testing.assert_allclose(
        np.hypot(ref[:, 0::2], ref[:, 1::2]), np.hypot(x[:, 0::2], x[:, 1::2]), rtol=1e-13
    )


def test_row_zero_is_identity(task):
    x = np.random.default_rng(1).uniform(-1, 1, (2, 16))
    ref, _ = _oracle(task, x)
    np.testing.assert_array_equal(ref[0], x[0])


@pytest.mark.parametrize("m,d", [(128, 256), (4096, 64)])
def test_fp32_tolerance(task, m, d):
    tol = task.spec.tolerance["fp32"]
    x = F32(-1) + F32(2) * np.random.default_rng(m).random((m, d), dtype=np.float32)
    ref, mag = _oracle(task, x.astype(np.float64))
    assert _passes(_rotate(x, _theta32(d)), ref, mag, tol)
    # powf off by 4 ulp either way (phi up to ~m)
    assert _passes(_rotate(x, _theta32(d, 4)), ref, mag, tol)
    assert _passes(_rotate(x, _theta32(d, -4)), ref, mag, tol)
    # the angle kept in float64 (no fp32 rounding of m*theta)
    phi64 = np.arange(m)[:, None] * _theta32(d).astype(np.float64)[None, :]
    x64 = x.astype(np.float64)
    c, s = np.cos(phi64), np.sin(phi64)
    alt = np.empty_like(x64)
    alt[:, 0::2] = x64[:, 0::2] * c - x64[:, 1::2] * s
    alt[:, 1::2] = x64[:, 0::2] * s + x64[:, 1::2] * c
    assert _passes(alt, ref, mag, tol)


@pytest.mark.parametrize("m,d", [(16, 256), (128, 16384)])
def test_bugs_fail(task, m, d):
    tol = task.spec.tolerance["fp32"]
    x = F32(-1) + F32(2) * np.random.default_rng(d).random((m, d), dtype=np.float32)
    x64 = x.astype(np.float64)
    ref, mag = _oracle(task, x64)
    theta = _theta32(d)
    # NeoX half-split pairing (i, i + D/2) instead of adjacent pairs
    half = d // 2
    phi = np.arange(m)[:, None] * theta.astype(np.float64)[None, :]
    c, s = np.cos(phi), np.sin(phi)
    neox = np.empty_like(x64)
    neox[:, :half] = x64[:, :half] * c - x64[:, half:] * s
    neox[:, half:] = x64[:, :half] * s + x64[:, half:] * c
    assert not _passes(neox, ref, mag, tol)
    # positions shifted by one row (m + 1)
    shifted = _rotate(np.vstack([np.zeros((1, d), np.float32), x]), theta)[1:]
    assert not _passes(shifted, ref, mag, tol)
    # rotation the other way (sin sign flipped)
    xr = x.copy()
    xr[:, 1::2] *= -1
    back = _rotate(xr, theta)
    back[:, 1::2] *= -1
    assert not _passes(back, ref, mag, tol)
    # exponent -p/D instead of -2p/D
    wrong = np.power(BASE, (-np.arange(half) / d)).astype(np.float32)
    assert not _passes(_rotate(x, wrong), ref, mag, tol)


@pytest.mark.parametrize("m,d", [(64, 1024), (4096, 64)])
def test_bf16_tolerance(task, m, d):
    tol = task.spec.tolerance["bf16"]
    x = _bf(F32(-1) + F32(2) * np.random.default_rng(m + d).random((m, d), dtype=np.float32))
    ref, mag = _oracle(task, x.astype(np.float64), "bf16")
    assert _passes(_bf(_rotate(x, _theta32(d))), ref, mag, tol)
    assert _passes(_bf(_rotate(x, _theta32(d, 4))), ref, mag, tol)
    assert not _passes(np.roll(ref, 1, axis=1), ref, mag, tol)
