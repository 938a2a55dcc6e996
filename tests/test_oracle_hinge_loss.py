"""hinge_loss's oracle against an explicit loop, and its tolerances against fp32/bf16 versions of
the baseline (must pass) and planted bugs (must fail)."""

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("hinge_loss")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _inputs(n, seed, variant="fp32"):
    rng = np.random.default_rng(seed)
    p = (np.float32(-2) + np.float32(4) * rng.random(n, dtype=np.float32)).astype(np.float32)
    t = rng.integers(0, 1, n, endpoint=True, dtype=np.int32)
    return (_bf(p) if variant == "bf16" else p), t


def _oracle(task, p, t, variant="fp32"):
    inputs = {"predictions": p.astype(np.float64), "targets": t.astype(np.int64), "N": len(p)}
    return task.oracle(inputs, {"N": len(p)}, variant)["loss"]


def _passes(got, ref, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref)))


def test_matches_loop(task):
    p = np.array([0.5, 0.5, -1.5, 2.0, 1.0, -1.0, 0.0])
    t = np.array([1, 0, 1, 0, 1, 0, 3])  # any target other than 1 means y = -1
    ref = _oracle(task, p, t)
    expect = [max(0.0, 1.0 - (1.0 if ti == 1 else -1.0) * pi) for pi, ti in zip(p, t, strict=True)]
    np.testing.assert_array_equal(ref, expect)
    assert ref.shape == (7,) and ref[4] == 0.0 and ref[5] == 0.0


def test_generated_inputs_cover_both_branches(task):
    args = {a.name: a for a in task.spec.args}
    assert args["predictions"].distribution() == ("uniform", -2.0, 2.0)
    assert args["targets"].distribution() == ("randint", 0.0, 1.0)
    p, t = _inputs(4096, 0)
    ref = _oracle(task, p, t)
    assert set(np.unique(t)) == {0, 1}
    assert 0.2 < np.mean(ref == 0) < 0.3  # y*p > 1 for a quarter of the elements


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_tolerance(task, variant):
    tol = task.spec.tolerance[variant]
    p, t = _inputs(65536, 1, variant)
    ref = _oracle(task, p, t, variant)
    y = np.where(t == 1, np.float32(1), np.float32(-1))
    got = np.maximum(np.float32(0), np.float32(1) - y * p).astype(np.float32)
    if variant == "bf16":
        got = _bf(got)
    assert _passes(got.astype(np.float64), ref, tol)
    bad = got.astype(np.float64).copy()
    bad[1024:] = np.nan  # the original BF16 baseline's partial write
    assert not _passes(bad, ref, tol)
    t01 = t.astype(np.float32)  # y = targets instead of +-1
    assert not _passes(np.maximum(0, 1 - t01 * p).astype(np.float64), ref, tol)
    assert not _passes((1 - y * p).astype(np.float64), ref, tol)  # no clamp at 0
