"""`compare --measure`: two optimizer runs' best kernels timed again in one session per task,
so that B/A compares kernels and not the days, rounds or GPUs the runs measured them on. The
runs are made by the real runner with a replayed model and the fake backend; the re-measuring
backend reports every kernel 10% slower than the runs saw it, so a number that came from a
run directory instead of the new session would show."""

from __future__ import annotations

import pytest

from cudamaster.agents.remeasure import KEPT_BASELINE, remeasure
from cudamaster.agents.rundir import RunDir
from cudamaster.compare import BETTER, ONLY_B, SAME
from cudamaster.errors import UserError
from optimizer_fakes import FakeBackend, finished_run


class SlowerNow(FakeBackend):
    """The fake backend on a machine 10% slower than the runs': every P is 0.9 of the runs'."""

    def __init__(self, sessions: list) -> None:
        super().__init__()
        self.sessions_seen = sessions

    def evaluate(self, subs):
        self.sessions_seen.append([s.name for s in subs])
        out = super().evaluate(subs)
        for s, o in zip(subs, out, strict=True):
            if s.name != "baseline" and o.score is not None:
                o.score, o.noise = 0.9 * o.score, 0.9 * (o.noise or 0.0)
        return out


def test_each_shared_task_is_one_session_with_both_bests_and_the_numbers_are_new(tmp_path):
    a = finished_run(tmp_path, "a", {"vector_add-fp32": "P 2.0", "RELU-fp32": "P 1.0"})
    b = finished_run(tmp_path, "b", {"vector_add-fp32": "P 3.0", "RELU-fp32": "P 1.5",
                               "softmax-bf16": "P 2.0"})  # fmt: skip
    sessions: list[list[str]] = []
    heard = []
    result, measured = remeasure(a, b, lambda task, variant, suite: SlowerNow(sessions),
                                 heard.append)  # fmt: skip
    # one session per shared task: the baseline and each run's best, named by run
    assert sessions == [["baseline", "a-round1-c1", "b-round1-c1"],
                        ["baseline", "b-round1-c1"]]  # fmt: skip
    assert heard == measured and result.a_device == result.b_device == "test GPU"
    rows = {r.op: r for r in result.rows}
    assert rows["vector_add"].impl == "round1-c1"
    assert rows["vector_add"].a == pytest.approx(1.8) and rows["vector_add"].b == pytest.approx(2.7)
    assert rows["vector_add"].ratio == pytest.approx(1.5) and rows["vector_add"].status == BETTER
    # A's RELU candidate was no faster, so A kept the baseline: P 1 exactly in this session
    assert rows["RELU"].impl == f"{KEPT_BASELINE} -> round1-c1"
    assert (rows["RELU"].a, rows["RELU"].a_noise) == (1.0, 0.0)
    assert rows["RELU"].ratio == pytest.approx(1.35) and rows["RELU"].status == BETTER
    assert rows["softmax"].status == ONLY_B and rows["softmax"].b is None  # never measured
    assert result.totals.compared == 2 and result.totals.geomean == pytest.approx(
        (1.5 * 1.35) ** 0.5
    )
    said = measured[1].line()
    assert said == "RELU fp32 paper: A's baseline (kept) P 1 ± 0, B's round1-c1 P 1.35 ± 0.019"


def test_two_runs_with_one_best_compare_within_noise(tmp_path):
    a = finished_run(tmp_path, "a", {"vector_add-fp32": "P 2.0"})
    b = finished_run(tmp_path, "b", {"vector_add-fp32": "P 2.0"})
    result, _ = remeasure(a, b, lambda task, variant, suite: SlowerNow([]))
    (row,) = result.rows
    assert row.ratio == pytest.approx(1.0) and row.status == SAME


def test_runs_of_different_suites_are_refused_before_anything_runs(tmp_path):
    a = finished_run(tmp_path, "a", {"vector_add-fp32": "P 2.0"})
    b = finished_run(tmp_path, "b", {"vector_add-fp32": "P 2.0"}, suite="large")
    sessions: list = []
    with pytest.raises(UserError, match=r"paper suite and .* the large suite"):
        remeasure(a, b, lambda task, variant, suite: SlowerNow(sessions))
    assert sessions == []
    with pytest.raises(UserError, match="not a run directory"):
        remeasure(a, tmp_path, lambda task, variant, suite: SlowerNow(sessions))


def test_a_task_one_run_kept_no_kernel_for_is_listed_not_measured(tmp_path):
    a = finished_run(tmp_path, "a", {"vector_add-fp32": "P 2.0", "RELU-fp32": "P 2.0"})
    b = finished_run(tmp_path, "b", {"vector_add-fp32": "P 2.0", "RELU-fp32": "P 2.0"})
    run = RunDir(b)
    state = run.load_state(run.task_dir("RELU", "fp32"))
    state.best = None  # as a run whose baseline failed leaves it
    run.save_state(run.task_dir("RELU", "fp32"), state)
    sessions: list[list[str]] = []
    result, measured = remeasure(a, b, lambda task, variant, suite: SlowerNow(sessions))
    assert len(sessions) == len(measured) == 1  # vector_add only
    relu = next(r for r in result.rows if r.op == "RELU")
    assert (relu.a, relu.b, relu.ratio) == (None, None, None)
    assert relu.status == "no P in A (not measured), no P in B (no best kernel)"
    assert result.totals.compared == 1 and result.totals.unscored == 1
