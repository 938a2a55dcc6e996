"""stencil_3d's oracle against explicit loops and scipy.ndimage; its tolerance against an fp32
simulation of the baseline and against a dropped neighbour, an uncopied face or swapped axes."""

import numpy as np
import pytest
from scipy import ndimage

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("stencil_3d")


def _passes(got, ref, mag, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag))


def _oracle(task, u, r=0.25, variant="fp32"):
    nx, ny, nz = u.shape
    inputs = {"u_old": u, "r": r, "nx": nx, "ny": ny, "nz": nz}
    return task.oracle(inputs, {"nx": nx, "ny": ny, "nz": nz}, variant)["u_new"]


@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 4, 5), (3, 3, 3), (4, 5, 6)])
@pytest.mark.parametrize("r", [0.25, 0.1])
def test_matches_loops(task, shape, r):
    u = np.random.default_rng(int(np.prod(shape))).uniform(-1, 1, shape)
    ref, mag = _oracle(task, u, r)
    nx, ny, nz = shape
    for i in range(nx):
        for j in range(ny):
            for k in range(nz):
                c = u[i, j, k]
                if i in (0, nx - 1) or j in (0, ny - 1) or k in (0, nz - 1):
                    want = c
                else:
                    s = u[i - 1, j, k] + u[i + 1, j, k] + u[i, j + 1, k] + u[i, j - 1, k]
                    s += u[i, j, k + 1] + u[i, j, k - 1]
                    want = c + r * (s - 6 * c)
                assert abs(ref[i, j, k] - want) <= 1e-15
    assert np.all(mag >= np.abs(ref) - 1e-15)


def test_matches_ndimage(task):
    r = 0.2
    u = np.random.default_rng(3).uniform(-1, 1, (7, 9, 11))
    ref, _ = _oracle(task, u, r)
    k = np.zeros((3, 3, 3))
    for axis in range(3):
        for side in (0, 2):
            idx = [1, 1, 1]
            idx[axis] = side
            k[tuple(idx)] = r
    k[1, 1, 1] = 1 - 6 * r
    inner = ndimage.correlate(u, k, mode="constant")[1:-1, 1:-1, 1:-1]
    np.testing.assert_allclose(ref[1:-1, 1:-1, 1:-1], inner, rtol=0, atol=1e-14)
    edge = np.ones_like(u, dtype=bool)
    edge[1:-1, 1:-1, 1:-1] = False
    np.testing.assert_array_equal(ref[edge], u[edge])


def _fp32_step(u, variant):
    """The baseline's arithmetic in float32 (numpy does not fuse; any order is within tolerance)."""
    r = np.float32(0.25)
    c = u[1:-1, 1:-1, 1:-1]
    s = u[:-2, 1:-1, 1:-1] + u[2:, 1:-1, 1:-1] + u[1:-1, 2:, 1:-1] + u[1:-1, :-2, 1:-1]
    s = s + u[1:-1, 1:-1, 2:] + u[1:-1, 1:-1, :-2]
    got = u.copy()
    got[1:-1, 1:-1, 1:-1] = c + r * (s - np.float32(6) * c)
    if variant == "bf16":
        got = bf16_bits_to_f32(f32_to_bf16_bits(got))
    return got.astype(np.float64)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_tolerance(task, variant):
    tol = task.spec.tolerance[variant]
    u = np.random.default_rng(11).uniform(-1, 1, (12, 16, 20)).astype(np.float32)
    if variant == "bf16":
        u = bf16_bits_to_f32(f32_to_bf16_bits(u))
    ref, mag = _oracle(task, u.astype(np.float64), 0.25, variant)
    got = _fp32_step(u, variant)
    assert _passes(got, ref, mag, tol)

    dropped = got.copy()
    dropped[1:-1, 1:-1, 1:-1] -= 0.25 * u[1:-1, 1:-1, :-2]  # the k-1 neighbour left out
    assert not _passes(dropped, ref, mag, tol)

    for axis in range(3):
        for face in (0, -1):
            nocopy = got.copy()
            idx = [slice(None)] * 3
            idx[axis] = face
            nocopy[tuple(idx)] = 0.0  # one face not copied
            assert not _passes(nocopy, ref, mag, tol)


def test_swapped_axes_fail(task):
    """Reading the i and k neighbours with each other's stride (a transposed layout) is caught."""
    tol = task.spec.tolerance["fp32"]
    u = np.random.default_rng(5).uniform(-1, 1, (6, 8, 10))
    ref, mag = _oracle(task, u)
    flat = u.reshape(-1)
    nx, ny, nz = u.shape
    got = u.copy()
    for i in range(1, nx - 1):
        for j in range(1, ny - 1):
            for k in range(1, nz - 1):
                p = (i * ny + j) * nz + k
                c = flat[p]
                s = flat[p - 1] + flat[p + 1] + flat[p + nz] + flat[p - nz]
                s += flat[p + ny * nz] + flat[p - ny * nz]
                got[i, j, k] = c + 0.25 * (s - 6 * c)
    # the same neighbours in another order: passes (the sum is commutative) ...
    assert _passes(got, ref, mag, tol)
    wrong = u.copy()
    for i in range(1, nx - 1):
        for j in range(1, ny - 1):
            for k in range(1, nz - 1):
                p = (i * nz + j) * ny + k  # strides of a (nx, nz, ny) layout
                q = (i * ny + j) * nz + k
                c = flat[q]
                s = flat[p - 1] + flat[p + 1] + flat[p + ny] + flat[p - ny]
                s += flat[p + nz * ny] + flat[p - nz * ny]
                wrong[i, j, k] = c + 0.25 * (s - 6 * c)
    assert not _passes(wrong, ref, mag, tol)
