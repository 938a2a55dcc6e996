"""Oracles split over row blocks on all cores give exactly what one block gives."""

import numpy as np
import pytest

from cudamaster import parallel
from cudamaster.tasks import get_task


def test_row_blocks_cover_every_row_once():
    seen = np.zeros(1000, dtype=int)

    def mark(lo, hi):
        seen[lo:hi] += 1

    parallel.over_rows(3, 1000, 1 << 16, mark)
    assert seen[:3].sum() == 0 and (seen[3:] == 1).all()


@pytest.mark.parametrize(
    ("op", "shape"), [("stencil_2d", (1500, 700)), ("stencil_3d", (90, 80, 70))]
)
def test_a_stencil_oracle_in_blocks_equals_the_oracle_in_one_block(op, shape, monkeypatch):
    task = get_task(op)
    u = np.random.default_rng(1).uniform(-1, 1, shape)
    inputs = {"u_old": u, "r": 0.2}
    blocked = task.oracle(inputs, {}, "fp32")["u_new"]
    monkeypatch.setattr(parallel, "MIN_BLOCK", 1 << 40)  # one block
    whole = task.oracle(inputs, {}, "fp32")["u_new"]
    assert np.array_equal(blocked[0], whole[0]) and np.array_equal(blocked[1], whole[1])
