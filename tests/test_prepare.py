"""The preparer: inputs and oracles made in a helper process, cases ahead, stopped while the GPU
times when it has no cores of its own."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import eventually
from cudamaster.bench.inputs import make_inputs
from cudamaster.bench.prepare import (
    N_SETS,
    CaseKey,
    OutputFile,
    Preparer,
    _Helper,
    footprint,
    memory_available,
    oracle_of,
)
from cudamaster.dtypes import STORAGE, concrete, to_storage
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


def _write_outputs(path: Path, values: dict, variant: str, task) -> OutputFile:
    """Outputs as a worker leaves them in a slot: each the oracle's value in storage, one after
    the other (at an offset that is not the first)."""
    layout, chunks, at = {}, [b"pad!"], 4
    for name, value in values.items():
        ref = value[0] if isinstance(value, tuple) else value
        dtype = concrete(next(a for a in task.spec.args if a.name == name).dtype, variant)
        chunks.append(to_storage(np.asarray(ref).reshape(-1), dtype).tobytes())
        layout[name] = (at, len(chunks[-1]))
        at += len(chunks[-1])
    path.write_bytes(b"".join(chunks))
    return OutputFile(path, layout)


def test_prepared_sets_are_those_made_here_and_judged_against_their_oracles(preparer, tmp_path):
    task = get_task("softmax")  # its oracle returns values and a magnitude
    case = task.cases("paper")[0]
    got = preparer.take(task, "bf16", case, base_seed=5)
    outputs = []
    assert len(got.sets) == N_SETS and len(set(got.seeds)) == N_SETS
    for i, seed in enumerate(got.seeds):
        here = make_inputs(task, case, "bf16", seed)
        assert got.sets[i].params == here.params and got.sets[i].call_scalars == here.call_scalars
        assert got.sets[i].stored == {}  # the values are in the files only
        for name, arr in here.stored.items():
            written = np.fromfile(got.case_dir / f"set{i}" / f"{name}.bin", dtype=STORAGE["bf16"])
            assert np.array_equal(written, arr)
        right = oracle_of(task, "bf16", here)
        outputs.append(_write_outputs(tmp_path / f"right{i}", right, "bf16", task))
        [verdict] = got.judge(i, outputs[i])
        assert verdict.passed and verdict.paper_rule_passed
        assert got.judge(i, outputs[i], full=False) == []  # nothing failing
    # set 1's correct output is wrong for set 0 (the sets differ): both judgements say so
    [verdict] = got.judge(0, outputs[1])
    assert not verdict.passed and verdict.failed > 0
    [failing] = got.judge(0, outputs[1], full=False)
    assert failing.failed == verdict.failed
    assert sorted(got.oracle_seconds) == list(range(N_SETS))
    got.discard()
    assert not got.case_dir.exists()
    with pytest.raises(UserError, match="dropped"):
        got.judge(0, outputs[0])


@pytest.mark.parametrize("name", ["high_order_contraction", "spmm_csr", "top_k"])
def test_oracles_are_kept_as_the_judge_reads_them_so_no_judgement_copies_one(name):
    # high_order_contraction's oracle returns transposed views, spmm_csr's magnitude is float32
    # (half the memory at 2^30 elements), top_k's indices are int64
    task = get_task(name)
    case = task.cases("paper")[0]
    raw = task.oracle(
        make_inputs(task, case, "fp32", 3).values(
            {a.name: concrete(a.dtype, "fp32") for a in task.spec.args}
        ),
        dict(case.params),
        "fp32",
    )
    kept = oracle_of(task, "fp32", make_inputs(task, case, "fp32", 3))
    for out, value in kept.items():
        ref, mag = value if isinstance(value, tuple) else (value, None)
        raw_ref = raw[out][0] if isinstance(raw[out], tuple) else raw[out]
        assert ref.dtype == np.float64 and ref.ndim == 1 and ref.flags.c_contiguous
        assert np.array_equal(ref, np.asarray(raw_ref, dtype=np.float64).reshape(-1))
        if mag is not None:
            assert mag.ndim == 1 and mag.flags.c_contiguous
            assert mag.dtype == np.asarray(raw[out][1]).dtype
            assert np.array_equal(mag, np.asarray(raw[out][1]).reshape(-1))


def test_the_next_few_cases_are_always_asked_ahead_and_more_while_host_memory_allows(
    preparer, monkeypatch
):
    from cudamaster.bench import prepare

    asked = []

    def ask(self, task, key):
        asked.append(key)
        return SimpleNamespace(key=key, discard=lambda: None)

    monkeypatch.setattr(Preparer, "_ask", ask)
    small = [get_task(name) for name in ("vector_add", "RELU", "elu", "sigmoid")]
    upcoming = [(t, v, c) for t in small for v in ("fp32", "bf16") for c in t.cases("paper")]
    large = get_task("stencil_2d")
    upcoming.insert(prepare.MIN_AHEAD + 1, (large, "fp32", large.cases("paper")[-1]))
    assert len(upcoming) > prepare.MAX_AHEAD
    key = CaseKey(str(large.folder), "fp32", large.cases("paper")[-1], 0)
    heavy = footprint(large, key)  # 16384^2: more than the budget below
    monkeypatch.setattr(prepare, "_memory_total", lambda: None)  # unknown: the next few only
    preparer.ahead(upcoming, 0)
    assert len(asked) == prepare.MIN_AHEAD
    asked.clear()
    preparer._ahead = []
    monkeypatch.setattr(prepare, "_memory_total", lambda: heavy / prepare.AHEAD_SHARE / 2)
    preparer.ahead(upcoming, 0)  # the small ones ahead of the heavy one, not the heavy one
    assert len(asked) == prepare.MIN_AHEAD + 1 and key not in asked
    asked.clear()
    preparer._ahead = []
    total = sum(footprint(t, CaseKey(str(t.folder), v, c, 0)) for t, v, c in upcoming)
    monkeypatch.setattr(prepare, "_memory_total", lambda: total / prepare.AHEAD_SHARE)
    preparer.ahead(upcoming, 0)  # room for all: as many as MAX_AHEAD, the heavy one among them
    assert len(asked) == prepare.MAX_AHEAD and key in asked


def test_cases_asked_for_ahead_are_those_taken_and_a_case_not_taken_is_dropped(preparer):
    task = get_task("vector_add")
    first, second, third = task.cases("paper")[:3]
    preparer.ahead([(task, "fp32", first), (task, "fp32", second)], 0)
    made_first, made_second = preparer._ahead
    assert preparer.take(task, "fp32", first, 0) is made_first
    preparer.ahead([(task, "fp32", second)], 0)  # still wanted: kept, not asked for again
    assert preparer._ahead == [made_second]
    preparer.ahead([(task, "fp32", third)], 0)  # no longer wanted: dropped
    assert made_second.rid not in preparer._cases
    [made_third] = preparer._ahead
    other = preparer.take(task, "fp32", second, 0)  # not the one asked for: made now
    assert other is not made_third and other.case_dir.exists()
    assert made_third.rid not in preparer._cases and preparer._ahead == []
    # the helper removes the files of a case dropped while it was being made
    assert eventually(lambda: not made_second.case_dir.exists())
    assert eventually(lambda: not made_third.case_dir.exists())


def test_a_case_is_estimated_from_its_shapes_and_a_helper_with_room_prepares_several_at_once(
    tmp_path,
):
    task = get_task("vector_add")
    key = CaseKey(str(task.folder), "fp32", task.cases("paper")[0], 0)
    n = task.cases("paper")[0].params["N"]
    assert footprint(task, key) == 3 * n * 8 * 3 * N_SETS  # a, b and c, float64, three times
    conn_here, conn_there = multiprocessing.Pipe()
    helper = _Helper(conn_there, at_once=2)
    helper.busy = 1
    free = memory_available()
    assert free is not None
    assert helper._fits(5, 0) and not helper._fits(5, free)  # nothing fits in what is used
    helper.busy = 0
    assert helper._fits(5, free)  # alone, a case always starts...
    helper.keys = {4: key, 5: key, 6: key}
    assert helper._fits(5, free)  # ... beside the one case before it (held by the coordinator)
    helper.keys[3] = key
    assert not helper._fits(5, free)  # but not beside more, prepared ahead: they go first
    helper.order, helper.busy = [3], 1
    assert not helper._fits(5, free)  # nor while one is being prepared
    assert helper._fits(5, 0)
    conn_here.close()


def _nice(pid: int, tid: int) -> int:
    return int(Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def test_the_helper_prepares_below_its_judges(preparer):
    from cudamaster.bench.prepare import FIRST_NICE, PREPARE_NICE

    task = get_task("vector_add")
    preparer.take(task, "fp32", task.cases("paper")[0], 0)
    pid = preparer._proc.pid
    nice = []
    for thread in Path(f"/proc/{pid}/task").iterdir():
        try:
            nice.append(_nice(pid, int(thread.name)))
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended meanwhile
            continue
    # the main thread (whose requests start the judges' threads) at 0; the preparing ones lower
    assert _nice(pid, pid) == 0
    assert FIRST_NICE in nice and set(nice) <= {0, FIRST_NICE, PREPARE_NICE}


def _can_raise_priority() -> bool:
    raised = []

    def probe() -> None:
        os.setpriority(os.PRIO_PROCESS, 0, 19)
        try:
            os.setpriority(os.PRIO_PROCESS, 0, 10)
            raised.append(True)
        except PermissionError:
            pass

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return bool(raised)


def test_the_oldest_case_is_prepared_first_and_the_next_is_raised_when_it_is_done():
    from cudamaster.bench.prepare import FIRST_NICE, PREPARE_NICE

    if not _can_raise_priority():
        pytest.skip("raising a thread's priority needs root or CAP_SYS_NICE here")
    conn_here, conn_there = multiprocessing.Pipe()
    helper = _Helper(conn_there, at_once=2)
    helper.keys, helper.order, helper.busy = {1: None, 2: None}, [1, 2], 2
    seen: dict[str, int] = {}
    go_on = {rid: threading.Event() for rid in (1, 2)}
    started = threading.Barrier(3)

    def work(rid: int) -> None:
        with helper._enlisted(rid):
            tid = threading.get_native_id()
            seen[f"{rid} at start"] = os.getpriority(os.PRIO_PROCESS, tid)
            started.wait()
            go_on[rid].wait()
            seen[f"{rid} later"] = os.getpriority(os.PRIO_PROCESS, tid)

    threads = [threading.Thread(target=work, args=(rid,)) for rid in (1, 2)]
    for thread in threads:
        thread.start()
    started.wait()
    assert not helper._done(1)  # case 1 prepared (not dropped): case 2 is now the oldest
    for rid in (1, 2):
        go_on[rid].set()
    for thread in threads:
        thread.join()
    assert seen == {"1 at start": FIRST_NICE, "2 at start": PREPARE_NICE,
                    "1 later": FIRST_NICE, "2 later": FIRST_NICE}  # fmt: skip
    assert helper.order == [2] and helper.threads == {2: set()}
    conn_here.close()


def test_a_helper_without_cores_of_its_own_is_stopped_inside_quiet_and_runs_again_after(preparer):
    task = get_task("vector_add")
    preparer.take(task, "fp32", task.cases("paper")[0], 0)
    pid = preparer._proc.pid
    with preparer.quiet():
        with preparer.quiet():  # nested: still stopped until the outer block ends
            pass
        assert eventually(lambda: _state(pid) == "T")
    assert eventually(lambda: _state(pid) != "T")


def test_a_ctrl_c_at_the_terminal_reaches_the_coordinator_not_the_helper(preparer):
    # the terminal signals its foreground process group: the helper is outside ours, so the
    # evaluation under way can finish (and the helper exits when the coordinator's socket closes)
    task = get_task("vector_add")
    preparer.take(task, "fp32", task.cases("paper")[0], 0)
    assert os.getpgid(preparer._proc.pid) != os.getpgrp()


def test_a_generator_error_is_one_line_and_the_helper_goes_on(preparer):
    task = get_task("vector_add")
    bad = Case("paper", 99, {"N": -5})  # a negative size
    with pytest.raises(UserError) as err:
        preparer.take(task, "fp32", bad, 0)
    assert "\n" not in str(err.value) and "case 99" in str(err.value)
    assert preparer.take(task, "fp32", task.cases("paper")[0], 0).sets


def test_a_helper_that_dies_is_an_error_and_the_next_request_gets_a_new_one(preparer):
    task = get_task("vector_add")
    preparer.take(task, "fp32", task.cases("paper")[0], 0)
    with preparer.quiet():  # stopped: the request below cannot be answered before the kill
        preparer.ahead([(task, "fp32", task.cases("paper")[1])], 0)
        os.kill(preparer._proc.pid, signal.SIGKILL)
        preparer._proc.wait(5)
    with pytest.raises(UserError, match="died"):
        preparer.take(task, "fp32", task.cases("paper")[1], 0)
    assert preparer.take(task, "fp32", task.cases("paper")[1], 0).sets


def test_close_removes_every_case_folder(tmp_path):
    prep = Preparer(tmp_path)
    task = get_task("vector_add")
    prep.take(task, "fp32", task.cases("paper")[0], 0)
    prep.ahead([(task, "fp32", task.cases("paper")[1])], 0)
    root = prep.root
    prep.close()
    assert not root.exists()
