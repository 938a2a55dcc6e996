"""triangle_attention's mask generator and oracle (its Taylor-series and direct forms) against
explicit loops; its tolerances against fp32/bf16 simulations of the baseline and planted bugs."""

import math

import numpy as np
import pytest

from cudamaster.dtypes import bf16_bits_to_f32, f32_to_bf16_bits
from cudamaster.tasks import get_task

FLT_MAX = np.float32(3.4028235e38)


@pytest.fixture(scope="module")
def task():
    return get_task("triangle_attention")


def _bf(x):
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def _case(task, params, seed, variant="fp32"):
    rng = np.random.default_rng(seed)
    mask = task.generator(params, rng, variant)["attention_mask"].astype(np.float32)
    shape = (params["B"], params["H"], params["S"], params["D"])
    arrs = [rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(3)]
    if variant == "bf16":
        arrs = [_bf(a) for a in arrs]
    q, k, v = arrs
    return q, k, v, mask


def _oracle(task, q, k, v, mask, variant="fp32"):
    inputs = {"query": q, "key": k, "value": v, "attention_mask": mask}
    inputs = {n: np.asarray(a, dtype=np.float64) for n, a in inputs.items()}
    b, h, s, d = q.shape
    return task.oracle(inputs, {"B": b, "H": h, "S": s, "D": d}, variant)["output"]


def _loops(q, k, v, mask, b, h, i, d):
    """O[b,h,i,d] and its magnitude from the definition, with math.exp and fsum."""
    js = [j for j in range(i + 1) if not mask[b, i, j] > 0.5]
    if not js:
        return 0.0, 0.0
    s = [float(q[b, h, i, d]) * float(k[b, h, j, d]) / math.sqrt(q.shape[3]) for j in js]
    w = [math.exp(x - max(s)) for x in s]
    total = math.fsum(w)
    ref = math.fsum(wj / total * float(v[b, h, j, d]) for wj, j in zip(w, js, strict=True))
    mag = math.fsum(wj / total * abs(float(v[b, h, j, d])) for wj, j in zip(w, js, strict=True))
    return ref, mag


def _passes(got, ref, mag, tol):
    return bool(np.all(np.abs(got - ref) <= tol.atol + tol.rtol * np.abs(ref) + tol.mtol * mag))


def _baseline(q, k, v, mask, variant="fp32", first=0, shift=0, masked=lambda m: m > 0.5):
    """The baseline in fp32 (three passes, sequential sums); first/shift plant boundary bugs
    (j from `first`, j <= i + shift), masked plants a wrong mask test."""
    nb, nh, ns, nd = q.shape
    root = np.float32(math.sqrt(nd))
    i = np.arange(ns)[:, None]
    j = np.arange(ns)[None, :]
    out = np.zeros(q.shape, dtype=np.float32)
    for b in range(nb):
        allowed = ((j <= i + shift) & (j >= first) & ~masked(mask[b]))[:, :, None]
        for h in range(nh):
            sc = ((q[b, h][:, None, :] * k[b, h][None, :, :]) / root).astype(np.float32)
            sc = np.where(allowed, sc, -FLT_MAX)
            m = sc.max(axis=1, keepdims=True)
            e = np.where(allowed, np.exp(sc - m), 0).astype(np.float32)
            total = np.cumsum(e, axis=1, dtype=np.float32)[:, -1:, :]
            with np.errstate(invalid="ignore", divide="ignore"):
                w = np.where(total > 0, e / total, 0).astype(np.float32)
            acc = np.zeros((ns, nd), dtype=np.float32)
            for jj in range(ns):
                acc = (acc + w[:, jj, :].astype(np.float64) * v[b, h, jj]).astype(np.float32)
            out[b, h] = acc
    return (_bf(out) if variant == "bf16" else out).astype(np.float64)


def test_generated_masks(task):
    rng = np.random.default_rng(0)
    fixed = task.generator({"B": 2, "S": 5}, rng, "fp32")["attention_mask"]
    assert fixed.shape == (2, 5, 5)
    np.testing.assert_array_equal(fixed[1], np.triu(np.ones((5, 5)), k=1))
    rand = task.generator({"B": 3, "S": 200, "random_mask": 1}, rng, "fp32")["attention_mask"]
    upper = np.triu(np.ones((200, 200), dtype=bool), k=1)
    assert np.all(rand[:, upper] == 1.0)
    low = rand[:, ~upper]
    assert low.min() >= 0.0 and low.max() < 1.0
    assert 0.45 < np.mean(low > 0.5) < 0.55


@pytest.mark.parametrize("random_mask", [0, 1])
def test_matches_loops(task, random_mask):
    params = {"B": 2, "H": 2, "S": 9, "D": 3, "random_mask": random_mask}
    q, k, v, mask = _case(task, params, 5 + random_mask)
    if random_mask:
        mask[1, 4, :5] = 0.75  # one row with every j excluded
    ref, mag = _oracle(task, q, k, v, mask)
    assert ref.shape == mag.shape == q.shape
    for idx in np.ndindex(q.shape):
        r, m = _loops(q, k, v, mask, *idx)
        assert ref[idx] == pytest.approx(r, rel=1e-12, abs=1e-15)
        assert mag[idx] == pytest.approx(m, rel=1e-12, abs=1e-15)
    assert np.all(mag >= np.abs(ref))
    if random_mask:
        assert np.all(ref[1, :, 4] == 0) and np.all(mag[1, :, 4] == 0)


def test_series_and_direct_forms_agree(task):
    ref = task.reference
    rng = np.random.default_rng(1)
    s, m = 40, 6
    x, k, v = (rng.uniform(-1, 1, (s, m)) for _ in range(3))
    x *= 0.3
    tril = ref._allowed(np.triu(np.ones((s, s)), k=1))
    rand = ref._allowed(np.where(np.triu(np.ones((s, s)), k=1) > 0, 1.0, rng.random((s, s))))
    for allowed in (tril, rand):
        a, b = ref._series(x, k, v, allowed), ref._direct(x, k, v, allowed)
        ok = a[:, 0] > 0
        for t in (1, 2):  # the forms differ by a common factor per (i, feature): compare ratios
            np.testing.assert_allclose(
                a[:, t][ok] / a[:, 0][ok], b[:, t][ok] / b[:, 0][ok], rtol=1e-12, atol=1e-14
            )
    # scores beyond the series' range take the direct form
    big = ref.sums(x * 20, k, v, tril)
    np.testing.assert_allclose(big, ref._direct(x * 20, k, v, tril))


def test_per_feature_not_dot_product(task):
    """O[..., d] depends on q, k, v at feature d only."""
    params = {"B": 1, "H": 2, "S": 16, "D": 4}
    q, k, v, mask = _case(task, params, 2)
    ref, _ = _oracle(task, q, k, v, mask)
    k2, q2 = k.copy(), q.copy()
    k2[..., 1:] = -k2[..., 1:]
    q2[..., 1:] *= 0.5
    ref2, _ = _oracle(task, q2, k2, v, mask)
    np.testing.assert_allclose(ref2[..., 0], ref[..., 0], rtol=1e-13, atol=1e-15)
    assert not np.allclose(ref2[..., 1:], ref[..., 1:])
    # the first row attends to itself only: O[..., 0, :] = v[..., 0, :]
    np.testing.assert_allclose(ref[:, :, 0], v[:, :, 0], rtol=1e-15)


@pytest.mark.parametrize("random_mask", [0, 1])
def test_fp32_tolerance(task, random_mask):
    tol = task.spec.tolerance["fp32"]
    params = {"B": 1, "H": 2, "S": 96, "D": 128, "random_mask": random_mask}
    q, k, v, mask = _case(task, params, 3)
    ref, mag = _oracle(task, q, k, v, mask)
    assert _passes(_baseline(q, k, v, mask), ref, mag, tol)
    assert not _passes(_baseline(q, k, v, mask, first=1), ref, mag, tol)  # drops key 0
    assert not _passes(_baseline(q, k, v, mask, shift=-1), ref, mag, tol)  # drops the diagonal
    if random_mask:
        assert not _passes(_baseline(q, k, v, mask, masked=lambda m: m >= 0.25), ref, mag, tol)
        transposed = mask.transpose(0, 2, 1).copy()
        assert not _passes(_baseline(q, k, v, transposed, shift=96), ref, mag, tol)
    else:
        assert not _passes(_baseline(q, k, v, mask, shift=1, masked=lambda m: m > 2), ref, mag, tol)


def test_bf16_tolerance(task):
    tol = task.spec.tolerance["bf16"]
    params = {"B": 1, "H": 2, "S": 96, "D": 128, "random_mask": 1}
    q, k, v, mask = _case(task, params, 4, "bf16")
    ref, mag = _oracle(task, q, k, v, mask, "bf16")
    got = _baseline(q, k, v, mask, "bf16")
    assert _passes(got, ref, mag, tol)
    assert not _passes(np.roll(got, 1, axis=3), ref, mag, tol)
    assert not _passes(_baseline(q, k, v, mask, "bf16", shift=-1), ref, mag, tol)
