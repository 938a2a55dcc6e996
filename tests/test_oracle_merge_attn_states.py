"""merge_attn_states' oracle against an explicit loop (and its infinity rules); its tolerances
against fp32/bf16 simulations of the baseline and of other correct formulations with 2-ulp
exp/log errors (must pass), and against layout and weighting bugs (must fail)."""

import math

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task

F32 = np.float32
FLT_MAX = float(np.finfo(np.float32).max)


@pytest.fixture(scope="module")
def task():
    return get_task("merge_attn_states")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _passes(got, ref_mag, tol):
    ref, mag = ref_mag
    got = np.asarray(got, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        bound = tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag
        return bool(np.all((got == ref) | (np.abs(got - ref) <= bound)))


def _oracle(task, va, pa, vb, pb, variant="fp32"):
    t, h, s = va.shape
    params = {"T": t, "H": h, "S": s}
    inputs = {"V_a": va, "lse_a": pa, "V_b": vb, "lse_b": pb, **params}
    out = task.oracle(inputs, params, variant)
    return out["V_out"], out["LSE_out"]


def _inputs(t, h, s, seed, variant="fp32"):
    rng = np.random.default_rng(seed)

    def u(*shape):
        return F32(-1) + F32(2) * rng.random(shape, dtype=np.float32)

    va, vb, pa, pb = u(t, h, s), u(t, h, s), u(h, t), u(h, t)
    if variant == "bf16":
        va, vb, pa, pb = (_bf(a) for a in (va, vb, pa, pb))
    return va, pa, vb, pb


def _fp32_merge(va, pa, vb, pb, form, rng, ulps=2):
    """fp32 merge in one of three correct formulations; exp/log results off by up to `ulps`."""

    def fuzz(a):
        k = rng.integers(-ulps, ulps + 1, size=np.shape(a)).astype(np.float64)
        return (a * (1.0 + k * 2.0**-23)).astype(np.float32)

    m = np.maximum(pa, pb)
    if form == "baseline":
        ea, eb = fuzz(np.exp(pa - m)), fuzz(np.exp(pb - m))
        total = ea + eb
        wa, wb = ea / total, eb / total
        lse = fuzz(np.log(total)) + m
    elif form == "sigmoid":
        wa = F32(1) / (F32(1) + fuzz(np.exp(pb - pa)))
        wb = F32(1) / (F32(1) + fuzz(np.exp(pa - pb)))
        lse = m + fuzz(np.log1p(fuzz(np.exp(-np.abs(pa - pb)))))
    else:  # "direct": no max subtraction (fine for |lse| <= 1)
        ea, eb = fuzz(np.exp(pa)), fuzz(np.exp(pb))
        total = ea + eb
        wa, wb = ea / total, eb / total
        lse = fuzz(np.log(total))
    v = va * wa.T[:, :, None] + vb * wb.T[:, :, None]
    return v, lse


def test_matches_loop(task):
    t, h, s = 5, 3, 4
    rng = np.random.default_rng(0)
    va, vb = rng.uniform(-1, 1, (t, h, s)), rng.uniform(-1, 1, (t, h, s))
    pa, pb = rng.uniform(-3, 3, (h, t)), rng.uniform(-3, 3, (h, t))
    (v, vmag), (lse, lmag) = _oracle(task, va, pa, vb, pb)
    assert v.shape == (t, h, s) and lse.shape == (h, t)
    for i in range(t):
        for j in range(h):
            a, b = math.exp(pa[j, i]), math.exp(pb[j, i])
            assert lse[j, i] == pytest.approx(math.log(a + b), rel=1e-13, abs=1e-13)
            for k in range(s):
                expect = (va[i, j, k] * a + vb[i, j, k] * b) / (a + b)
                assert v[i, j, k] == pytest.approx(expect, rel=1e-12, abs=1e-13)
    assert np.all(vmag >= np.abs(v)) and np.all(lmag >= np.abs(lse))


def test_infinities(task):
    # per head-major (h, t): (+inf, 0.3), (-inf, -inf), (+inf, -inf), (0.2, -inf)
    va = np.arange(8, dtype=np.float64).reshape(4, 1, 2) / 10.0
    vb = -np.arange(8, dtype=np.float64).reshape(4, 1, 2) / 7.0
    pa = np.array([[np.inf, -np.inf, np.inf, 0.2]])
    pb = np.array([[0.3, -np.inf, -np.inf, -np.inf]])
    (v, _), (lse, _) = _oracle(task, va, pa, vb, pb)
    np.testing.assert_allclose(v[0], vb[0])  # +inf counts as -inf: only b
    np.testing.assert_allclose(lse[0, 0], 0.3)
    np.testing.assert_allclose(v[1], (va[1] + vb[1]) / 2)  # both infinite: the average
    np.testing.assert_allclose(v[2], (va[2] + vb[2]) / 2)
    assert lse[0, 1] == -FLT_MAX and lse[0, 2] == -FLT_MAX
    np.testing.assert_allclose(v[3], va[3])
    np.testing.assert_allclose(lse[0, 3], 0.2)
    (_, _), (lse16, _) = _oracle(task, va, pa, vb, pb, "bf16")
    assert lse16[0, 1] == -np.inf and lse16[0, 2] == -np.inf and lse16[0, 0] == lse[0, 0]


@pytest.mark.parametrize("form", ["baseline", "sigmoid", "direct"])
def test_fp32_formulations_pass(task, form):
    tol = task.spec.tolerance["fp32"]
    va, pa, vb, pb = _inputs(256, 8, 64, 1)
    ref_v, ref_l = _oracle(task, *(a.astype(np.float64) for a in (va, pa, vb, pb)))
    v, lse = _fp32_merge(va, pa, vb, pb, form, np.random.default_rng(2))
    assert _passes(v, ref_v, tol)
    assert _passes(lse, ref_l, tol)


def test_bf16_baseline_passes(task):
    tol = task.spec.tolerance["bf16"]
    va, pa, vb, pb = _inputs(128, 8, 128, 3, "bf16")
    ref_v, ref_l = _oracle(task, *(a.astype(np.float64) for a in (va, pa, vb, pb)), "bf16")
    v, lse = _fp32_merge(va, pa, vb, pb, "baseline", np.random.default_rng(4))
    assert _passes(_bf(v), ref_v, tol)
    assert _passes(_bf(lse), ref_l, tol)


def test_bugs_fail(task):
    tol = task.spec.tolerance["fp32"]
    t, h, s = 64, 8, 32
    va, pa, vb, pb = (a.astype(np.float64) for a in _inputs(t, h, s, 5))
    ref_v, ref_l = _oracle(task, va, pa, vb, pb)
    # weights swapped
    (swapped, _), _ = _oracle(task, vb, pa, va, pb)
    assert not _passes(swapped, ref_v, tol)
    # LSEs read token-major: element (t, h) taken from index t*H + h of the [H][T] arrays
    pa_tm, pb_tm = pa.reshape(-1).reshape(t, h).T, pb.reshape(-1).reshape(t, h).T
    (v_tm, _), (l_tm, _) = _oracle(task, va, pa_tm, vb, pb_tm)
    assert not _passes(v_tm, ref_v, tol)
    assert not _passes(l_tm, ref_l, tol)
    # LSE_out without the max added back
    m = np.maximum(pa, pb)
    assert not _passes(ref_l[0] - m, ref_l, tol)
    # the plain average, ignoring the LSEs
    assert not _passes((va + vb) / 2, ref_v, tol)
    assert not _passes(np.roll(ref_v[0], 1, axis=2), ref_v, tol)
