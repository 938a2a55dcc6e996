"""The preparer: inputs and oracles made in a helper process, one case ahead, stopped while the
GPU times."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from cudamaster.bench.inputs import make_inputs
from cudamaster.bench.prepare import N_SETS, Preparer, oracle_of
from cudamaster.dtypes import STORAGE
from cudamaster.errors import UserError
from cudamaster.tasks import Case, get_task


@pytest.fixture
def preparer(tmp_path):
    prep = Preparer(tmp_path / "scratch")
    yield prep
    prep.close()


def _state(pid: int) -> str:
    """The process's state letter in /proc (T: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_prepared_sets_and_oracles_are_those_made_in_this_process(preparer):
    task = get_task("softmax")  # its oracle returns values and a magnitude
    case = task.cases("paper")[0]
    got = preparer.take(task, "bf16", case, base_seed=5)
    assert len(got.sets) == N_SETS and len(set(got.seeds)) == N_SETS
    for i, seed in enumerate(got.seeds):
        here = make_inputs(task, case, "bf16", seed)
        assert got.sets[i].params == here.params and got.sets[i].call_scalars == here.call_scalars
        assert got.sets[i].stored == {}  # the values are in the files only
        for name, arr in here.stored.items():
            written = np.fromfile(got.case_dir / f"set{i}" / f"{name}.bin", dtype=STORAGE["bf16"])
            assert np.array_equal(written, arr)
        expected = oracle_of(task, "bf16", here)
        oracle = got.oracle(i)
        assert set(oracle) == set(expected)
        for name, value in expected.items():
            for a, b in zip(oracle[name], value, strict=True):  # (values, magnitude)
                assert np.array_equal(np.asarray(a), np.asarray(b, dtype=np.float64))
    assert len(got.oracle_seconds) == N_SETS
    got.discard()
    assert not got.case_dir.exists()


def test_a_case_asked_for_ahead_is_the_one_taken_and_a_case_not_taken_is_dropped(preparer):
    task = get_task("vector_add")
    first, second = task.cases("paper")[:2]
    preparer.ahead(task, "fp32", first, 0)
    ahead = preparer._ahead
    assert preparer.take(task, "fp32", first, 0) is ahead
    preparer.ahead(task, "fp32", second, 0)
    dropped = preparer._ahead
    third = preparer.take(task, "fp32", task.cases("paper")[2], 0)  # not the one asked for
    assert third is not dropped and third.case_dir.exists()
    third.oracle(0)  # the helper answers in order: the dropped case is done by now
    assert not dropped.case_dir.exists()


def test_the_helper_is_stopped_inside_paused_and_runs_again_after(preparer):
    task = get_task("vector_add")
    preparer.take(task, "fp32", task.cases("paper")[0], 0).wait_oracles()
    pid = preparer._proc.pid
    with preparer.paused():
        with preparer.paused():  # nested: still stopped until the outer block ends
            pass
        time.sleep(0.05)
        assert _state(pid) == "T"
    time.sleep(0.05)
    assert _state(pid) != "T"


def test_a_generator_error_is_one_line_and_the_helper_goes_on(preparer):
    task = get_task("vector_add")
    bad = Case("paper", 99, {"N": -5})  # a negative size
    with pytest.raises(UserError) as err:
        preparer.take(task, "fp32", bad, 0).wait_oracles()
    assert "\n" not in str(err.value) and "case 99" in str(err.value)
    assert preparer.take(task, "fp32", task.cases("paper")[0], 0).oracle(0)


def test_a_helper_that_dies_is_an_error_and_the_next_request_gets_a_new_one(preparer):
    task = get_task("vector_add")
    preparer.take(task, "fp32", task.cases("paper")[0], 0).wait_oracles()
    with preparer.paused():  # stopped: the request below cannot be answered before the kill
        preparer.ahead(task, "fp32", task.cases("paper")[1], 0)
        os.kill(preparer._proc.pid, signal.SIGKILL)
        preparer._proc.join(5)
    with pytest.raises(UserError, match="died"):
        preparer.take(task, "fp32", task.cases("paper")[1], 0)
    assert preparer.take(task, "fp32", task.cases("paper")[1], 0).oracle(1)


def test_close_removes_every_case_folder(tmp_path):
    prep = Preparer(tmp_path)
    task = get_task("vector_add")
    prep.take(task, "fp32", task.cases("paper")[0], 0).wait_oracles()
    prep.ahead(task, "fp32", task.cases("paper")[1], 0)
    root = prep.root
    prep.close()
    assert not root.exists()
