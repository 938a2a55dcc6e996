"""max_pooling_2d's oracle against explicit loops and a sliding-window formulation, including
padding, strides and empty windows; planted bugs (zero padding, a window one cell short, a
truncating Ho) must differ from it, since the tolerance is exact."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from cudamaster import formula
from cudamaster.tasks import get_task

FLT_MAX = float(np.finfo(np.float32).max)


@pytest.fixture(scope="module")
def task():
    return get_task("max_pooling_2d")


def _oracle(task, x, k, s, p, variant="fp32"):
    n, c, h, w = x.shape
    params = {"N": n, "C": c, "H": h, "W": w, "k": k, "s": s, "p": p}
    inputs = {"input": x, "N": n, "C": c, "H": h, "W": w}
    inputs |= {"kernel_size": k, "stride": s, "padding": p}
    return task.oracle(inputs, params, variant)["output"]


def _loops(x, k, s, p, empty=-FLT_MAX, pad_value=None, short=0):
    n, c, h, w = x.shape
    ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    out = np.empty((n, c, ho, wo))
    for a in range(n):
        for b in range(c):
            for i in range(ho):
                for j in range(wo):
                    best = None
                    for hh in range(i * s - p, i * s - p + k - short):
                        for ww in range(j * s - p, j * s - p + k - short):
                            inside = 0 <= hh < h and 0 <= ww < w
                            if not inside and pad_value is None:
                                continue
                            v = x[a, b, hh, ww] if inside else pad_value
                            best = v if best is None else max(best, v)
                    out[a, b, i, j] = empty if best is None else best
    return out


@pytest.mark.parametrize("variant", ["fp32", "bf16"])
@pytest.mark.parametrize(("k", "s", "p"), [(2, 1, 0), (2, 1, 1), (3, 1, 1), (4, 2, 1), (3, 2, 0)])
@pytest.mark.parametrize("shape", [(2, 3, 7, 9), (1, 1, 5, 4)])
def test_matches_loops(task, variant, k, s, p, shape):
    x = np.random.default_rng(k * 10 + s + p).uniform(-1, 1, shape)
    ref = _oracle(task, x, k, s, p, variant)
    np.testing.assert_array_equal(ref, _loops(x, k, s, p))
    # declared output shape matches
    names = {"N": shape[0], "C": shape[1], "H": shape[2], "W": shape[3], "k": k, "s": s, "p": p}
    out_shape = next(a.shape for a in task.spec.args if a.name == "output")
    assert ref.shape == formula.evaluate_shape(out_shape, names)


def test_matches_sliding_windows(task):
    x = np.random.default_rng(3).uniform(-1, 1, (2, 2, 31, 17))
    k, s, p = 4, 2, 1
    padded = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf)
    windows = sliding_window_view(padded, (k, k), axis=(2, 3))[:, :, ::s, ::s]
    want = windows.max(axis=(-2, -1))
    ref = _oracle(task, x, k, s, p)
    np.testing.assert_array_equal(ref, want[:, :, : ref.shape[2], : ref.shape[3]])


def test_padding_is_ignored_not_zero(task):
    x = -np.random.default_rng(4).uniform(0.1, 1, (1, 2, 6, 6))  # all negative
    ref = _oracle(task, x, 3, 1, 1)
    assert np.all(ref < 0)
    zero_padded = _loops(x, 3, 1, 1, pad_value=0.0)
    assert not np.array_equal(ref, zero_padded)
    assert not np.array_equal(ref, _loops(x, 3, 1, 1, short=1))


@pytest.mark.parametrize(("variant", "empty"), [("fp32", -FLT_MAX), ("bf16", -np.inf)])
def test_empty_windows(task, variant, empty):
    x = np.random.default_rng(5).uniform(-1, 1, (1, 1, 3, 3))
    ref = _oracle(task, x, 2, 2, 2, variant)  # windows lying entirely in the padding
    np.testing.assert_array_equal(ref, _loops(x, 2, 2, 2, empty=empty))
    assert np.any(ref == empty) and np.any(ref > -1.0)


def test_paper_shapes_match_spec_table(task):
    cases = task.cases("paper")
    assert len(cases) == 24
    names = cases[21].params  # (4, 1, 2048, 196), k = 3, s = 1, p = 1
    out_shape = next(a.shape for a in task.spec.args if a.name == "output")
    assert formula.evaluate_shape(out_shape, names) == (4, 1, 2048, 196)
    assert formula.evaluate_shape(out_shape, cases[5].params) == (8, 3, 256, 256)
