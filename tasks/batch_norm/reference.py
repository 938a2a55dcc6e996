"""Float64 oracle for batch_norm: per feature c over the N rows, mean and the one-pass biased
variance E[x^2] - mean^2, out = gamma * (x - mean) / sqrt(var + eps) + beta."""

import numpy as np

from cudamaster.parallel import over_rows


def oracle(inputs, params, variant):
    x = np.asarray(inputs["input"], dtype=np.float64)  # [N][C]
    g = np.asarray(inputs["gamma"], dtype=np.float64)
    b = np.asarray(inputs["beta"], dtype=np.float64)
    eps = float(np.float32(inputs["epsilon"]))
    n, c = x.shape
    sums: dict[int, tuple] = {}  # per block of rows: sum x, sum x^2, sum |x|

    def partial(lo: int, hi: int) -> None:
        part = x[lo:hi]
        sums[lo] = (part.sum(axis=0), np.square(part).sum(axis=0), np.abs(part).sum(axis=0))

    over_rows(0, n, c, partial)  # on all cores; the blocks are added in row order below
    total = [sum(sums[lo][i] for lo in sorted(sums)) for i in range(3)]
    mean, ex2, mean_abs = (t / n for t in total)
    var = ex2 - mean * mean  # the semantics' one-pass formula (exact enough in float64)
    sd = np.sqrt(var + eps)
    # mag: the bias; the normalised term scaled by E[x^2]/(var + eps), which is how much an fp32
    # one-pass variance amplifies the relative error of the sum of squares (~1 for centred data,
    # large when |mean| >> std); and |gamma|/sd times mean|x|, the scale of the mean sum's error
    amp = ex2 / (var + eps)
    out, mag = np.empty_like(x), np.empty_like(x)

    def rows(lo: int, hi: int) -> None:
        xhat = (x[lo:hi] - mean) / sd
        out[lo:hi] = g * xhat + b
        mag[lo:hi] = np.abs(b) + np.abs(g) * (np.abs(xhat) * amp + mean_abs / sd)

    over_rows(0, n, c, rows)
    return {"output": (out, mag)}
