"""stencil_2d's oracle against explicit loops and scipy.ndimage; its tolerance against an fp32
simulation of the baseline and against a dropped neighbour or a missing boundary copy."""

import numpy as np
import pytest
from scipy import ndimage

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("stencil_2d")


def _passes(got, ref, mag, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag))


def _oracle(task, u, r=0.25, variant="fp32"):
    nx, ny = u.shape
    inputs = {"u_old": u, "r": r, "nx": nx, "ny": ny}
    return task.oracle(inputs, {"nx": nx, "ny": ny}, variant)["u_new"]


@pytest.mark.parametrize("nx,ny", [(1, 1), (2, 5), (3, 3), (6, 9)])
@pytest.mark.parametrize("r", [0.25, 0.1])
def test_matches_loops(task, nx, ny, r):
    u = np.random.default_rng(nx * ny).uniform(-1, 1, (nx, ny))
    ref, mag = _oracle(task, u, r)
    for i in range(nx):
        for j in range(ny):
            if i in (0, nx - 1) or j in (0, ny - 1):
                want = u[i, j]
            else:
                c = u[i, j]
                want = c + r * (u[i, j - 1] + u[i, j + 1] + u[i + 1, j] + u[i - 1, j] - 4 * c)
            assert abs(ref[i, j] - want) <= 1e-15
    assert np.all(mag >= np.abs(ref) - 1e-15)


def test_matches_ndimage(task):
    r = 0.2
    u = np.random.default_rng(3).uniform(-1, 1, (17, 23))
    ref, _ = _oracle(task, u, r)
    k = np.array([[0, r, 0], [r, 1 - 4 * r, r], [0, r, 0]])
    inner = ndimage.correlate(u, k, mode="constant")[1:-1, 1:-1]
    np.testing.assert_allclose(ref[1:-1, 1:-1], inner, rtol=0, atol=1e-14)
    edge = np.ones_like(u, dtype=bool)
    edge[1:-1, 1:-1] = False
    np.testing.assert_array_equal(ref[edge], u[edge])


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_tolerance(task, variant):
    tol = task.spec.tolerance[variant]
    u = np.random.default_rng(11).uniform(-1, 1, (64, 96)).astype(np.float32)
    if variant == "bf16":
        u = bf16_bits_to_f32(f32_to_bf16_bits(u))
    r = np.float32(0.25)
    c = u[1:-1, 1:-1]
    got = u.copy()
    got[1:-1, 1:-1] = c + r * (u[1:-1, :-2] + u[1:-1, 2:] + u[2:, 1:-1] + u[:-2, 1:-1] - 4 * c)
    if variant == "bf16":
        got = bf16_bits_to_f32(f32_to_bf16_bits(got))
    ref, mag = _oracle(task, u.astype(np.float64), 0.25, variant)
    assert _passes(got.astype(np.float64), ref, mag, tol)
    dropped = got.astype(np.float64)
    dropped[1:-1, 1:-1] -= 0.25 * u[:-2, 1:-1]  # the north neighbour left out
    assert not _passes(dropped, ref, mag, tol)
    nocopy = got.astype(np.float64)
    nocopy[0, :] = 0.0  # first row not copied
    assert not _passes(nocopy, ref, mag, tol)
