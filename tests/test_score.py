import math

import pytest

from cudamaster.bench.score import (
    Scored,
    geometric_mean,
    speed_of_light_ms,
    success_table,
    weighted_score,
)
from cudamaster.tasks import discover


def test_weighted_score_uses_exact_complexities():
    # the spmm_csr T values the original printed as int32 (1202589696, 515395584) are really:
    t = [5497556992, 21990232064]
    p = weighted_score(t, [2.0, 4.0])
    assert p == pytest.approx((5497556992 * 2 + 21990232064 * 4) / (5497556992 + 21990232064))
    wrapped = weighted_score([1202589696, 515395584], [2.0, 4.0])
    assert abs(p - wrapped) > 0.5  # the wrapped weights would give a very different score


def test_weighted_score_rejects_overflowing_or_bad_weights():
    with pytest.raises(ValueError):
        weighted_score([2**63], [1.0])
    with pytest.raises(ValueError):
        weighted_score([0], [1.0])
    with pytest.raises(ValueError):
        weighted_score([1, 2], [1.0])


def test_geomean_and_speed_of_light():
    assert geometric_mean([1.0, 4.0]) == pytest.approx(2.0)
    # 4 GB at 4000 GB/s = 1 ms, beats 1 GFLOP at 1000 GFLOP/s = 1 ms: equal, so 1 ms
    assert speed_of_light_ms(4e9, 1e9, 4000, 1000) == pytest.approx(1.0)
    assert speed_of_light_ms(4e9, 1e12, 4000, 1000) == pytest.approx(1000.0)


def test_success_table_is_cumulative():
    rows = success_table([None, *(Scored(p, 0.02) for p in (0.9, 1.5, 3.0, 9.0))])
    assert [(r.tau, r.solved) for r in rows] == [(0, 4), (1, 3), (2, 2), (4, 1), (8, 1)]
    assert rows[0].rate == pytest.approx(0.8)


def test_tau_1_counts_only_kernels_faster_than_the_baseline_beyond_the_noise():
    resubmitted_baseline = Scored(1.00, 0.03)
    within_noise = Scored(1.02, 0.03)
    clearly_faster = Scored(1.10, 0.03)
    rows = success_table([resubmitted_baseline, within_noise, clearly_faster])
    assert {r.tau: r.solved for r in rows}[1] == 1
    assert {r.tau: r.solved for r in rows}[0] == 3
    assert not Scored(2.01, 0.05).solves(2) and Scored(2.1, 0.05).solves(2)


def test_every_task_complexity_fits_int64_and_is_positive():
    for task in discover().values():
        for suite in ("paper", "large"):
            for case in task.cases(suite):
                if task.generator is None:
                    t = task.complexity(case.params)
                    assert 0 < t < 2**63 and isinstance(t, int)
                    assert math.isfinite(float(t))
