"""Generator of the two normalised distributions and float64 oracle for cross_entropy_loss:
*loss += sum over Y_i != 0 of -Y_i * ln(max(X_i, 1e-8f)), a sum over the C classes.

The suites' cases are the paper's two dense distributions; unseen cases (task.toml's [unseen])
also name a ``structure`` (STRUCTURES)."""

import numpy as np

FLOOR = float(np.float32(1e-8))  # the clamp is the fp32 constant 1e-8f
CHUNK = 1 << 20
#: The ``structure`` codes of unseen cases: the paper's dense X and Y; a one-hot target on the
#: first class, on the last class; uniform targets (all Y equal); predictions with exact zeros on
#: a random half of the classes (the clamp binds); sparse targets (Y = 0 on ~90% of the classes).
STRUCTURES = ("dense", "first", "last", "uniform", "zero_x", "sparse_y")


def sequential_sum(a):
    """Left-to-right fp32 sum (in chunks, each continuing from the running total)."""
    total = np.float32(0.0)
    for start in range(0, len(a), CHUNK):
        part = np.concatenate((np.array([total], dtype=np.float32), a[start : start + CHUNK]))
        total = np.cumsum(part, dtype=np.float32)[-1]
    return total


def generate(params, rng, variant):
    """u_i, v_i ~ U[0, 1) drawn interleaved in fp32; X = u / sum(u), Y = v / sum(v), each sum a
    sequential fp32 accumulation and each quotient an fp32 division (the harness then rounds
    to bf16 in BF16). Returned as float32, their exact values.

    An unseen case's ``structure`` reshapes X or Y as STRUCTURES says (a suite's case has none
    and draws the same bytes as before); a masked u or v always keeps one random class, at least
    2^-24 so that its sum is never 0, and is normalised the same way."""
    c = int(params["C"])
    uv = rng.random(2 * c, dtype=np.float32)
    u, v = uv[0::2], uv[1::2]
    structure = STRUCTURES[int(params.get("structure", 0))]
    if structure == "zero_x":
        u = _masked(rng, u, 0.5)
    elif structure == "sparse_y":
        v = _masked(rng, v, 0.1)
    x, y = u / sequential_sum(u), v / sequential_sum(v)
    if structure in ("first", "last"):
        y = np.zeros(c, dtype=np.float32)
        y[0 if structure == "first" else c - 1] = 1
    elif structure == "uniform":
        y = np.full(c, np.float32(1) / np.float32(c), dtype=np.float32)
    return {"X": x, "Y": y}


def _masked(rng, a, fraction):
    """``a`` with all but about ``fraction`` of its entries set to 0; one random entry is always
    kept (raised to at least 2^-24)."""
    keep = rng.random(a.size) < fraction
    kept = int(rng.integers(a.size))
    keep[kept] = True
    out = np.where(keep, a, np.float32(0))
    out[kept] = max(out[kept], np.float32(2.0**-24))
    return out


def oracle(inputs, params, variant):
    x = np.asarray(inputs["X"], dtype=np.float64)
    y = np.asarray(inputs["Y"], dtype=np.float64)
    logs = np.log(np.fmax(x, FLOOR))  # fmax, as fmaxf, ignores a NaN
    terms = np.where(y != 0.0, -y * logs, 0.0)
    start = np.asarray(inputs.get("loss", np.zeros(1)), dtype=np.float64).reshape(1)
    return {"loss": (start + np.sum(terms), np.abs(start) + np.sum(np.abs(terms)))}
