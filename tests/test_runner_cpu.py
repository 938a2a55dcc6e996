"""Runs over several tasks: the exchange provider's stop and resume, a run that goes on without
a GPU and resumes on one, rounds handed over from stalled tasks to improving ones, budgets and
prices, a task that breaks alone, and the results table."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict

import pytest

from cudamaster.agents import results, runner
from cudamaster.agents.backend import CpuBackend, save_device
from cudamaster.agents.loop import LoopOptions
from cudamaster.agents.rundir import RunDir
from cudamaster.agents.state import TaskState
from cudamaster.errors import UserError
from optimizer_fakes import DEVICE, ENTRY, FakeBackend, FakeCpu, plans


def code(op: str, marker: str = "P 2.5") -> str:
    return f"```cuda\n// {marker}\n{ENTRY.replace('vector_add', op)}\n```"


def gpu(backends: dict[str, FakeBackend] | None = None):
    """A factory of fake GPU backends, one per task (kept in ``backends``)."""

    def factory(task, variant):
        backend = FakeBackend()
        if backends is not None:
            backends[f"{task.name}-{variant}"] = backend
        return backend

    return factory


def transcript(path, markers: dict[str, tuple[str, ...]]) -> None:
    """A replay transcript: each task's round r has one plan and one candidate, whose code
    carries the task's markers[r - 1]."""
    with path.open("w") as f:
        for t, marks in markers.items():
            op = t.rsplit("-", 1)[0]
            for r, marker in enumerate(marks, 1):
                steps = [
                    ("planner", "Optimizations:\n1. vectorise"),
                    ("c1/coder", code(op, marker)),
                ]
                for step, text in steps:
                    usage = {"input_tokens": 10, "output_tokens": 5}
                    entry = {"key": f"{t}/round{r}/{step}", "text": text, "usage": usage}
                    f.write(json.dumps(entry) + "\n")


def start(tmp_path, model, tasks, **options):
    run = tmp_path / "run"
    RunDir(run).write_manifest({
        "model": model, "base_url": None, "suite": "paper", "concurrency": 2,
        "tasks": [t.rsplit("-", 1) for t in tasks],
        "options": {"rounds": 1, "profile": "filtered", **options},
    })  # fmt: skip
    return run


def replayed(tmp_path, tasks, markers=("P 2.5",), **options):
    transcript(tmp_path / "t.jsonl", dict.fromkeys(tasks, markers))
    return start(tmp_path, f"replay:{tmp_path / 't.jsonl'}", tasks, **options)


def test_many_tasks_with_a_replayed_transcript_and_the_results_table(tmp_path):
    tasks = ["vector_add-fp32", "RELU-fp32"]
    run = replayed(tmp_path, tasks)
    states = runner.execute(RunDir(run), backends=gpu())
    assert {k: s.status for k, s in states.items()} == dict.fromkeys(tasks, "done")
    rows = results.results(run)
    assert [r.score for r in rows] == pytest.approx([2.5, 2.5]) and rows[0].tokens == 30
    assert rows[0].noise == pytest.approx(2.5 * 0.014)  # the speedups' uncertainties, weighted
    assert rows[0].class_before == "memory-latency-bound"
    assert rows[0].class_after == "memory-bandwidth-bound"
    assert (rows[0].candidates, rows[0].screened, rows[0].full) == (1, 1, 1)
    succ = {row["tau"]: row["solved"] for row in results.success(rows)}
    assert succ == {0: 2, 1: 2, 2: 2, 4: 0, 8: 0}
    assert json.loads(results.dump(rows))["tasks"][1]["task"] == "RELU-fp32"


def test_a_kernel_as_fast_as_the_baseline_is_correct_but_not_a_success_at_tau_1(tmp_path):
    run = replayed(tmp_path, ["vector_add-fp32"], markers=("P 1.0",))
    runner.execute(RunDir(run), backends=gpu())
    rows = results.results(run)
    assert rows[0].candidate_score == pytest.approx(1.0) and rows[0].best == "baseline"
    assert {row["tau"]: row["solved"] for row in results.success(rows)} == {
        0: 1, 1: 0, 2: 0, 4: 0, 8: 0
    }  # fmt: skip


def test_exchange_stops_cleanly_and_resume_continues_once_answered(tmp_path):
    ex = tmp_path / "ex"
    run = start(tmp_path, f"exchange:{ex}", ["vector_add-fp32"])
    state = runner.execute(RunDir(run), backends=gpu())["vector_add-fp32"]
    assert state.status == "waiting" and "round1__planner.prompt.md" in state.detail
    for step, text in [("planner", "plan"), ("c1__coder", code("vector_add"))]:
        (ex / f"vector_add-fp32__round1__{step}.answer.md").write_text(text)
    state = runner.execute(RunDir(run), backends=gpu())["vector_add-fp32"]
    assert state.status == "done" and state.best.outcome.score == pytest.approx(2.5)


def test_one_tasks_unexpected_error_fails_that_task_not_the_run(tmp_path):
    class Broken(FakeBackend):
        def evaluate(self, subs):
            raise KeyError("layout")  # a bug, not a verdict

    run = replayed(tmp_path, ["vector_add-fp32", "RELU-fp32"])
    states = runner.execute(
        RunDir(run), backends=lambda t, v: Broken() if t.name == "RELU" else FakeBackend()
    )
    assert states["vector_add-fp32"].status == "done"
    assert states["RELU-fp32"].status == "failed"
    assert states["RELU-fp32"].detail.startswith("KeyError: 'layout' (see ")
    assert "Traceback" in (run / "RELU-fp32" / "error.log").read_text()


def test_ctrl_c_lets_each_running_step_finish_and_begins_no_other(tmp_path):
    """Ctrl-C reaches the coordinator while three tasks' candidates are being evaluated: one
    evaluation finishes and is kept, one breaks (a helper process that the signal killed) and
    is tried again later, not called a failure; resume redoes only what was not kept."""
    tasks = ["vector_add-fp32", "RELU-fp32", "sigmoid-fp32"]
    run = replayed(tmp_path, tasks)
    manifest = json.loads((run / "run.json").read_text())
    RunDir(run).write_manifest({**manifest, "concurrency": 3})
    all_in = threading.Barrier(3, timeout=10)

    def stopping() -> None:
        deadline = time.monotonic() + 10
        while json.loads((run / "run.json").read_text())["status"] != "interrupted":
            assert time.monotonic() < deadline, "the run never said it was stopping"
            time.sleep(0.01)

    class AtCtrlC(FakeBackend):
        def __init__(self, op: str) -> None:
            super().__init__()
            self.op = op

        def evaluate(self, subs):
            if subs[0].name != "baseline":
                all_in.wait()
                if self.op == "vector_add":
                    raise KeyboardInterrupt  # the signal, as the coordinator gets it
                stopping()
                if self.op == "sigmoid":
                    raise BrokenPipeError(32, "Broken pipe")
            return super().evaluate(subs)

    with pytest.raises(KeyboardInterrupt):
        runner.execute(RunDir(run), backends=lambda t, v: AtCtrlC(t.name))
    states = {t: RunDir(run).load_state(run / t) for t in tasks}
    assert json.loads((run / "run.json").read_text())["status"] == "interrupted"
    finished = states["RELU-fp32"]
    assert finished.status == "interrupted" and finished.round == 1
    assert finished.best.label == "round1-c1"  # its evaluation was kept
    assert finished.detail.startswith("the run was stopped before profiling round1-c1")
    broken = states["sigmoid-fp32"]
    assert broken.status == "interrupted" and broken.detail.startswith("BrokenPipeError")
    assert broken.round == 0
    backends: dict[str, FakeBackend] = {}
    again = runner.execute(RunDir(run), backends=gpu(backends))
    assert {t: s.status for t, s in again.items()} == dict.fromkeys(tasks, "done")
    assert backends["RELU-fp32"].names("evaluate") == []  # nothing kept is measured again
    assert backends["sigmoid-fp32"].names("evaluate") == [["round1-c1"]]
    assert backends["vector_add-fp32"].names("evaluate") == [["round1-c1"]]


def test_an_unpriced_model_with_a_cost_budget_is_refused_unless_priced(tmp_path):
    opts = LoopOptions(rounds=1, max_cost_usd=5.0)
    with pytest.raises(UserError, match="--price IN,OUT"):
        runner.start(tmp_path / "a", [("vector_add", "fp32")], "custom:mine",
                     "http://127.0.0.1:9/v1", "paper", opts, 1)  # fmt: skip
    assert not (tmp_path / "a" / "run.json").exists()
    run = start(tmp_path, "custom:mine", ["vector_add-fp32"], max_cost_usd=5.0)
    manifest = json.loads((run / "run.json").read_text())
    RunDir(run).write_manifest({**manifest, "base_url": "http://127.0.0.1:9/v1"})
    with pytest.raises(UserError, match="--price"):
        runner.execute(RunDir(run), backends=gpu())


def test_resume_can_change_the_budgets_and_the_price(tmp_path):
    run = replayed(tmp_path, ["vector_add-fp32"], max_tokens=10)
    state = runner.execute(RunDir(run), backends=gpu())["vector_add-fp32"]
    assert state.status == "stopped" and "token budget" in state.detail
    runner.change_settings(RunDir(run), max_cost=None, max_tokens=1000, price=(1.0, 2.0))
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["options"]["max_tokens"] == 1000 and manifest["price"] == [1.0, 2.0]
    state = runner.execute(RunDir(run), backends=gpu())["vector_add-fp32"]
    assert state.status == "done" and state.best.label == "round1-c1"


def test_loop_options_round_trip_through_the_manifest():
    opts = LoopOptions(rounds=5, candidates=3, beam=4, patience=None, merge=False,
                       profile="full", max_tokens=10, flags="agent")  # fmt: skip
    assert runner.options_from(asdict(opts)) == opts


def test_a_wrong_outcome_keeps_the_baseline(tmp_path):
    run = replayed(tmp_path, ["vector_add-fp32"], markers=("WRONG",), debug_attempts=0)
    runner.execute(RunDir(run), backends=gpu())
    (row,) = results.results(run)
    assert row.best == "baseline" and row.candidate_score is None


# -- without a GPU ------------------------------------------------------------------------------


def test_without_a_gpu_a_new_run_stops_every_task_needs_gpu_before_any_prompt(tmp_path):
    ex = tmp_path / "ex"
    run = start(tmp_path, f"exchange:{ex}", ["vector_add-fp32", "RELU-fp32"])
    rd = RunDir(run)
    states = runner.execute(rd, backends=lambda t, v: CpuBackend(
        rd.root, rd.task_dir(t.name, v) / "code", "no GPU found"))  # fmt: skip
    assert {s.status for s in states.values()} == {"needs_gpu"}
    assert all("no GPU found" in s.detail for s in states.values())
    assert list(ex.glob("*.prompt.md")) == [] and rd.read_manifest()["status"] == "needs_gpu"


def test_a_run_goes_on_without_a_gpu_until_screening_and_resumes_on_one(tmp_path):
    tasks = ["vector_add-fp32", "RELU-fp32"]
    ex = tmp_path / "ex"
    run = RunDir(start(tmp_path, f"exchange:{ex}", tasks, candidates=2, merge=False))

    def answer(step: str, text) -> None:
        for t in tasks:
            op = t.rsplit("-", 1)[0]
            (ex / f"{t}__round1__{step}.answer.md").write_text(text(op))

    # on a GPU: each baseline evaluated and profiled, each planner asked
    states = runner.execute(run, backends=gpu())
    save_device(run.root, DEVICE)  # as the runner does where it sees a GPU
    assert {s.status for s in states.values()} == {"waiting"}
    assert sorted(p.name for p in ex.glob("*.prompt.md")) == sorted(
        f"{t}__round1__planner.prompt.md" for t in tasks
    )
    # without a GPU: every coder of every task is asked at once
    answer("planner", lambda op: plans("baseline", "baseline"))
    states = runner.execute(run, backends=lambda t, v: FakeCpu(run.root))
    assert {s.status for s in states.values()} == {"waiting"}
    coders = [f"{t}__round1__c{k}__coder.prompt.md" for t in tasks for k in (1, 2)]
    assert all((ex / name).exists() for name in coders)
    # answered: every candidate built, and every task waits for a GPU to screen them
    answer("c1__coder", lambda op: code(op, "P 2.0"))
    answer("c2__coder", lambda op: code(op, "P 3.0"))
    states = runner.execute(run, backends=lambda t, v: FakeCpu(run.root))
    assert {s.status for s in states.values()} == {"needs_gpu"}
    assert all(s.detail.startswith("2 candidate(s) to screen") for s in states.values())
    # on a GPU: each task screens both its candidates in one session, and finishes
    backends: dict[str, FakeBackend] = {}
    states = runner.execute(run, backends=gpu(backends))
    assert {s.status for s in states.values()} == {"done"}
    for t in tasks:
        assert backends[t].names("screen") == [["round1-c1", "round1-c2"]]
        assert states[t].best.label == "round1-c2"


# -- rounds handed over -------------------------------------------------------------------------

PAIRS = [["vector_add", "fp32"], ["RELU", "fp32"], ["GELU", "fp32"]]


def done(round_: int, stop: str, trajectory: list[float], extra: int = 0) -> TaskState:
    gains = [r for r in range(1, len(trajectory)) if trajectory[r] > trajectory[r - 1]]
    return TaskState(status="done", round=round_, stop_reason=stop, trajectory=trajectory,
                     last_gain=max(gains, default=0), extra_rounds=extra)  # fmt: skip


def test_rounds_a_stalled_task_leaves_go_to_the_task_that_gained_most_in_its_last_round(tmp_path):
    run = RunDir(tmp_path)
    states = {
        "vector_add-fp32": done(2, "patience", [1.0, 1.0, 1.0]),  # stopped early: 1 round left
        "RELU-fp32": done(3, "rounds", [1.0, 1.5, 2.0, 2.2]),  # gained 1.1x in its last round
        "GELU-fp32": done(3, "rounds", [1.0, 1.0, 1.0, 2.0]),  # gained 2x in its last round
    }
    assert runner.hand_over(run, PAIRS, states, rounds=3) == ["GELU-fp32"]
    gelu = states["GELU-fp32"]
    assert (gelu.status, gelu.stop_reason, gelu.extra_rounds) == ("running", "", 1)
    assert run.load_json(run.task_dir("GELU", "fp32"), "state.json")["status"] == "running"
    assert states["RELU-fp32"].status == "done" and states["RELU-fp32"].extra_rounds == 0
    # GELU ran its extra round and gained again: the one free round is spent
    states["GELU-fp32"] = done(4, "rounds", [1.0, 1.0, 1.0, 2.0, 3.0], extra=1)
    assert runner.hand_over(run, PAIRS, states, rounds=3) == []


def test_no_round_is_handed_over_when_no_task_gained_in_its_last_round(tmp_path):
    states = {
        "vector_add-fp32": done(1, "patience", [1.0, 1.0]),
        "RELU-fp32": done(3, "rounds", [1.0, 2.0, 2.0, 2.0]),
        "GELU-fp32": done(3, "sol_target", [1.0, 2.0, 3.0, 4.0]),  # stopped early, improving
    }
    before = {n: asdict(s) for n, s in states.items()}
    assert runner.hand_over(RunDir(tmp_path), PAIRS, states, rounds=3) == []
    assert {n: asdict(s) for n, s in states.items()} == before


def test_a_run_gives_a_stalled_tasks_rounds_to_an_improving_one(tmp_path):
    tasks = ["vector_add-fp32", "RELU-fp32"]
    stalls, gains = ("P 0.5",), ("P 2.0", "P 3.0", "P 4.0")
    transcript(tmp_path / "t.jsonl", {"vector_add-fp32": stalls, "RELU-fp32": gains})
    run = start(tmp_path, f"replay:{tmp_path / 't.jsonl'}", tasks, rounds=2, patience=1,
                candidates=1, merge=False)  # fmt: skip
    states = runner.execute(RunDir(run), backends=gpu())
    stalled, improving = states["vector_add-fp32"], states["RELU-fp32"]
    assert (stalled.status, stalled.stop_reason, stalled.round) == ("done", "patience", 1)
    assert (improving.status, improving.round, improving.extra_rounds) == ("done", 3, 1)
    assert improving.trajectory == pytest.approx([1.0, 2.0, 3.0, 4.0])
