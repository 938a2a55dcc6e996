"""Mask generator and float64 oracle for triangle_attention.

Per feature d (a scalar product, not a dot product over D), for every (b, h, i, d):
    w_j = exp(q_i k_j / sqrt(D)) over the allowed j (j <= i and mask[b][i][j] <= 0.5),
    O = sum_j w_j v_j / sum_j w_j, and O = 0 where no j is allowed.
"""

import math

import numpy as np

SERIES_MAX_SCORE = 4.0  # above this |score| the Taylor form loses digits: use the direct form
SERIES_REL_TOL = 1e-15  # truncation, relative to the smallest weight


def generate(params, rng, variant):
    """mask[b][i][j] = 1.0 for j > i. With random_mask = 1 the entries with j <= i are U(0, 1),
    so about half are excluded (> 0.5) and the 0.5 threshold matters; random_mask = 2 (unseen
    cases) draws the same and excludes the diagonal j = i too, so that row 0 has no allowed key
    (O = 0 there) whatever the draw; else they are 0.0."""
    b, s = int(params["B"]), int(params["S"])
    upper = np.triu(np.ones((s, s)), k=1)
    mode = int(params.get("random_mask", 0))
    if mode:
        mask = np.where(upper > 0, 1.0, rng.random((b, s, s)))
        if mode == 2:
            diagonal = np.arange(s)
            mask[:, diagonal, diagonal] = 1.0
    else:
        mask = np.broadcast_to(upper, (b, s, s)).copy()
    return {"attention_mask": mask}


def _allowed(mask):
    s = mask.shape[-1]
    return np.tril(np.ones((s, s), dtype=bool)) & ~(mask > 0.5)


def _prefix_rows(t):
    """In-place running sum over axis 0 (row by row: much faster than np.cumsum on axis 0)."""
    for i in range(1, t.shape[0]):
        np.add(t[i], t[i - 1], out=t[i])
    return t


def _series(x, k, v, allowed):
    """Sums over the allowed j of exp(x_i k_j) * (1, v_j, |v_j|), as (S, 3, M) for x, k, v of
    shape (S, M) (M independent features), via exp(x k) = sum_n x^n k^n / n!.

    The inner sums over j are running sums when the allowed set is exactly j <= i, else a product
    with the 0/1 matrix of allowed pairs."""
    smax = float(np.abs(x).max(initial=0.0) * np.abs(k).max(initial=0.0))
    tril = bool(np.array_equal(allowed, np.tril(np.ones_like(allowed))))
    a = None if tril else allowed.astype(np.float64)
    base = np.stack([np.ones_like(v), v, np.abs(v)], axis=1)  # (S, 3, M)
    total = np.zeros_like(base)
    terms = np.empty_like(base)
    xn = np.ones_like(x)[:, None, :]  # x^n / n!
    kn = np.ones_like(k)[:, None, :]  # k^n
    n = 0
    while True:
        np.multiply(base, kn, out=terms)
        if tril:
            _prefix_rows(terms)
        else:
            terms = (a @ terms.reshape(len(terms), -1)).reshape(base.shape)
        terms *= xn
        total += terms
        n += 1
        if smax**n / math.factorial(n) * math.exp(2 * smax) < SERIES_REL_TOL:
            return total
        xn *= x[:, None, :] / n
        kn *= k[:, None, :]


def _direct(x, k, v, allowed):
    """The same sums (up to a common factor per (i, feature)) by explicit exponentials with the
    max subtracted, one query row at a time."""
    out = np.zeros((x.shape[0], 3, x.shape[1]))
    for i in range(x.shape[0]):
        js = np.flatnonzero(allowed[i])
        if js.size == 0:
            continue
        s = x[i] * k[js]  # (J, M)
        w = np.exp(s - s.max(axis=0))
        out[i, 0] = w.sum(axis=0)
        out[i, 1] = (w * v[js]).sum(axis=0)
        out[i, 2] = (w * np.abs(v[js])).sum(axis=0)
    return out


def sums(x, k, v, allowed):
    """(S, 3, M): [sum w, sum w*v, sum w*|v|] over the allowed j, w = exp(x_i k_j) (up to a
    common factor per row and feature)."""
    if float(np.abs(x).max(initial=0.0) * np.abs(k).max(initial=0.0)) <= SERIES_MAX_SCORE:
        return _series(x, k, v, allowed)
    return _direct(x, k, v, allowed)


def oracle(inputs, params, variant):
    q = np.asarray(inputs["query"], dtype=np.float64)
    k = np.asarray(inputs["key"], dtype=np.float64)
    v = np.asarray(inputs["value"], dtype=np.float64)
    mask = np.asarray(inputs["attention_mask"], dtype=np.float64)
    nb, nh, ns, nd = q.shape
    scale = 1.0 / math.sqrt(nd)
    ref = np.zeros_like(q)
    mag = np.zeros_like(q)

    def rows(a):  # (H, S, D) -> (S, H*D): one row per query position
        return a.transpose(1, 0, 2).reshape(ns, nh * nd)

    def back(a):  # (S, H*D) -> (H, S, D)
        return a.reshape(ns, nh, nd).transpose(1, 0, 2)

    for b in range(nb):
        t = sums(rows(q[b]) * scale, rows(k[b]), rows(v[b]), _allowed(mask[b]))
        den = t[:, 0]
        safe = np.where(den > 0, den, 1.0)  # no allowed j: O = 0
        ref[b] = back(np.where(den > 0, t[:, 1] / safe, 0.0))
        mag[b] = back(np.where(den > 0, t[:, 2] / safe, 0.0))
    return {"output": (ref, mag)}
