"""row_tanh's oracle against an explicit loop and an exp formulation; its tolerances against
fp32/bf16 simulations of the baseline and of an exp-based tanh (which must pass) and against
tanh.approx-sized errors and planted bugs (which must fail)."""

import math

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("row_tanh")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _passes(got, ref, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref)))


def _oracle(task, x, variant="fp32"):
    n = x.size
    return task.oracle({"input": x, "N": n}, {"N": n}, variant)["out"]


def test_matches_loop_and_exp_form(task):
    x = np.random.default_rng(1).uniform(-5, 5, 501)
    ref = _oracle(task, x)
    assert ref.shape == x.shape
    np.testing.assert_allclose(ref, [math.tanh(v) for v in x], rtol=1e-15, atol=0)
    e = np.exp(-2 * np.abs(x))
    np.testing.assert_allclose(ref, np.sign(x) * (1 - e) / (1 + e), rtol=1e-12, atol=1e-16)
    np.testing.assert_array_equal(_oracle(task, np.array([0.0, 30.0, -30.0])), [0.0, 1.0, -1.0])


def _inputs(seed, n, variant):
    x = np.random.default_rng(seed).uniform(-1, 1, n).astype(np.float32)
    x[:64] = np.float32(np.random.default_rng(seed + 1).uniform(-1e-5, 1e-5, 64))
    return _bf(x) if variant == "bf16" else x


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_tolerance_passes_correct_versions(task, variant):
    tol = task.spec.tolerance[variant]
    x = _inputs(7, 1 << 14, variant)
    ref = _oracle(task, x.astype(np.float64))
    t = np.tanh(x).astype(np.float32)
    e = np.exp(np.float32(-2) * np.abs(x)).astype(np.float32)
    versions = {
        "tanhf": t,
        "tanhf 2 ulp off": np.nextafter(np.nextafter(t, np.float32(2)), np.float32(2)),
        "exp form": np.sign(x) * ((np.float32(1) - e) / (np.float32(1) + e)),
    }
    for name, got in versions.items():
        got = _bf(got) if variant == "bf16" else got
        assert _passes(got.astype(np.float64), ref, tol), name


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
def test_tolerance_fails_planted_bugs(task, variant):
    tol = task.spec.tolerance[variant]
    x = _inputs(8, 4096, variant)
    xd = x.astype(np.float64)
    ref = _oracle(task, xd)
    bugs = {
        "sigmoid for tanh": 1 / (1 + np.exp(-xd)),
        "sign error": -ref,
        "shifted element": np.roll(ref, 1),
        "tail unwritten": np.concatenate([ref[:-5], np.full(5, np.nan)]),
    }
    if variant == "fp32":  # tanh.approx's relative error (~2^-11) is under one bf16 rounding
        bugs["tanh.approx-sized error"] = ref * (1 + 5e-4)
    for name, bad in bugs.items():
        assert not _passes(np.asarray(bad, dtype=np.float64), ref, tol), name
