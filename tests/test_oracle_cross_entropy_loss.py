"""cross_entropy_loss's generator (the spec's normalised distributions) and oracle against
explicit loops; its tolerance against a simulation of the baseline's atomic chain (must pass)
and planted bugs (must fail)."""

import math

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task

FLOOR = np.float32(1e-8)


@pytest.fixture(scope="module")
def task():
    return get_task("cross_entropy_loss")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _generate(task, c, seed, variant="fp32"):
    g = task.generator({"C": c}, np.random.default_rng(seed), variant)
    x, y = g["X"], g["Y"]
    return (_bf(x), _bf(y)) if variant == "bf16" else (x, y)


def _oracle(task, x, y, start=None, variant="fp32"):
    inputs = {"X": np.asarray(x, np.float64), "Y": np.asarray(y, np.float64), "C": len(x)}
    if start is not None:
        inputs["loss"] = np.array([start])
    return task.oracle(inputs, {"C": len(x)}, variant)["loss"]


def _passes(got, ref, mag, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag))


def _atomic_chain(x, y, rng, floor=FLOOR):
    """The baseline: fp32 per-thread partials (<= 1024 x 256 threads, grid-stride), added to a
    zero loss one at a time in a random order."""
    c = len(x)
    with np.errstate(divide="ignore"):
        t = np.where(y != 0, -y * np.log(np.fmax(x, floor)).astype(np.float32), 0)
    t = t.astype(np.float32)
    threads = min(1024, (c + 255) // 256) * 256
    part = np.zeros(threads, dtype=np.float32)
    for s in range(0, c, threads):
        chunk = t[s : s + threads]
        part[: len(chunk)] = (part[: len(chunk)] + chunk).astype(np.float32)
    return np.cumsum(part[rng.permutation(threads)], dtype=np.float32)[-1]


def test_generator_follows_the_spec(task):
    c = 1000
    x, y = _generate(task, c, 7)
    assert x.dtype == y.dtype == np.float32 and x.shape == y.shape == (c,)
    # an independent replay: interleaved fp32 draws, Python-loop sequential fp32 sums
    uv = np.random.default_rng(7).random(2 * c, dtype=np.float32)
    su = sv = np.float32(0.0)
    for i in range(c):
        su = np.float32(su + uv[2 * i])
        sv = np.float32(sv + uv[2 * i + 1])
    np.testing.assert_array_equal(x, uv[0::2] / su)
    np.testing.assert_array_equal(y, uv[1::2] / sv)
    assert abs(math.fsum(x.astype(np.float64)) - 1) < 1e-5 and x.min() >= 0
    big_x, _ = _generate(task, 1 << 22, 1)
    assert 0.015 < np.mean(big_x < FLOOR) < 0.03  # the clamp matters at the largest size


def test_matches_loop(task):
    x = np.array([0.5, 0.25, 0.0, 1e-9, 0.25, np.nan])
    y = np.array([0.25, 0.0, 0.25, 0.25, 0.25, 0.0])  # Y == 0 terms are skipped
    ref, mag = _oracle(task, x, y)
    floor = float(FLOOR)
    expect = math.fsum(-b * math.log(max(a, floor)) for a, b in zip(x, y, strict=True) if b != 0)
    assert ref[0] == pytest.approx(expect, rel=1e-14) and mag[0] == pytest.approx(expect, rel=1e-14)
    assert floor != 1e-8  # the fp32 constant, not the double one
    ref, mag = _oracle(task, x, y, start=-2.0)
    assert ref[0] == pytest.approx(expect - 2.0) and mag[0] == pytest.approx(expect + 2.0)


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize("c", [16384, 262144, 1048576])
def test_tolerance(task, variant, c):
    tol = task.spec.tolerance[variant]
    x, y = _generate(task, c, c, variant)
    ref, mag = _oracle(task, x, y, variant=variant)
    assert abs(ref[0] - (math.log(c) + 1 - math.log(2))) < 0.05
    rng = np.random.default_rng(0)
    for _ in range(3):
        assert _passes(_atomic_chain(x, y, rng), ref, mag, tol)
    assert not _passes(2 * ref, ref, mag, tol)  # a second call without zeroing
    assert not _passes(ref / c, ref, mag, tol)  # a mean instead of a sum
    assert not _passes(_atomic_chain(x, y, rng, floor=np.float32(1e-7)), ref, mag, tol)
    if c >= 1 << 20:
        assert not _passes(_atomic_chain(x, y, rng, floor=np.float32(0)), ref, mag, tol)
