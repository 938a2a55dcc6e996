"""Runs over several tasks: concurrency, the exchange provider's stop and resume, budgets and
prices, a task that breaks alone, and the results table."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from cudamaster.agents import runner
from cudamaster.agents.loop import LoopOptions
from cudamaster.agents.outcome import Outcome, ProfileView
from cudamaster.agents.rundir import RunDir
from cudamaster.errors import UserError
from test_optimizer_cpu import DEVICE, ENTRY, cases, ok

CODE = "```cuda\n// FAST\n" + ENTRY + "\n```"


def backend(speedup: float = 2.5):
    def evaluate(source, flags, name, screen):
        return ok(1.0) if name == "baseline" else ok(speedup)

    def profile(source, flags, name, mode, case):
        cls = "memory-bandwidth-bound" if "FAST" in source else "memory-latency-bound"
        return ProfileView("1", f"Bottleneck: {cls}")

    return lambda task, variant: (evaluate, profile, DEVICE)


def transcript(path, tasks, code=CODE):
    with path.open("w") as f:
        for t in tasks:
            op = t.rsplit("-", 1)[0]
            answer = code.replace("vector_add", op)
            for step, text in [("planner", "Optimizations:\n1. vectorise"), ("coder", answer)]:
                usage = {"input_tokens": 10, "output_tokens": 5}
                entry = {"key": f"{t}/round1/{step}", "text": text, "usage": usage}
                f.write(json.dumps(entry) + "\n")


def start(tmp_path, model, tasks, **options):
    run = tmp_path / "run"
    RunDir(run).write_manifest({
        "model": model, "base_url": None, "suite": "paper", "concurrency": 2,
        "tasks": [t.rsplit("-", 1) for t in tasks],
        "options": {"rounds": 1, "profile": "filtered", **options},
    })  # fmt: skip
    return run


def test_many_tasks_with_a_replayed_transcript_and_the_results_table(tmp_path):
    tasks = ["vector_add-fp32", "RELU-fp32"]
    transcript(tmp_path / "t.jsonl", tasks)
    run = start(tmp_path, f"replay:{tmp_path / 't.jsonl'}", tasks)
    states = runner.execute(RunDir(run), backends=backend())
    assert {k: s.status for k, s in states.items()} == dict.fromkeys(tasks, "done")
    rows = runner.results(run)
    assert [r.score for r in rows] == [2.5, 2.5] and rows[0].tokens == 30
    assert rows[0].noise == pytest.approx(2.5 * 0.014)  # the speedups' uncertainties, weighted
    assert rows[0].class_before == "memory-latency-bound"
    assert rows[0].class_after == "memory-bandwidth-bound"
    succ = {row["tau"]: row["solved"] for row in runner.success(rows)}
    assert succ == {0: 2, 1: 2, 2: 2, 4: 0, 8: 0}
    assert json.loads(runner.dump(rows))["tasks"][1]["task"] == "RELU-fp32"


def test_a_kernel_as_fast_as_the_baseline_is_correct_but_not_a_success_at_tau_1(tmp_path):
    transcript(tmp_path / "t.jsonl", ["vector_add-fp32"])
    run = start(tmp_path, f"replay:{tmp_path / 't.jsonl'}", ["vector_add-fp32"])
    runner.execute(RunDir(run), backends=backend(speedup=1.0))
    rows = runner.results(run)
    assert rows[0].candidate_score == 1.0 and rows[0].best == "baseline"
    assert {row["tau"]: row["solved"] for row in runner.success(rows)} == {
        0: 1, 1: 0, 2: 0, 4: 0, 8: 0
    }  # fmt: skip


def test_exchange_stops_cleanly_and_resume_continues_once_answered(tmp_path):
    ex = tmp_path / "ex"
    run = start(tmp_path, f"exchange:{ex}", ["vector_add-fp32"])
    state = runner.execute(RunDir(run), backends=backend())["vector_add-fp32"]
    assert state.status == "waiting" and "round1__planner.prompt.md" in state.detail
    for step, text in [("planner", "plan"), ("coder", CODE)]:
        (ex / f"vector_add-fp32__round1__{step}.answer.md").write_text(text)
    state = runner.execute(RunDir(run), backends=backend())["vector_add-fp32"]
    assert state.status == "done" and state.best.outcome.score == 2.5


def test_one_tasks_unexpected_error_fails_that_task_not_the_run(tmp_path):
    tasks = ["vector_add-fp32", "RELU-fp32"]
    transcript(tmp_path / "t.jsonl", tasks)
    run = start(tmp_path, f"replay:{tmp_path / 't.jsonl'}", tasks)
    good = backend()

    def flaky(task, variant):
        if task.name == "RELU":

            def evaluate(source, flags, name, screen):
                raise KeyError("layout")  # a bug, not a verdict

            return evaluate, good(task, variant)[1], DEVICE
        return good(task, variant)

    states = runner.execute(RunDir(run), backends=flaky)
    assert states["vector_add-fp32"].status == "done"
    assert states["RELU-fp32"].status == "failed"
    assert states["RELU-fp32"].detail.startswith("KeyError: 'layout' (see ")
    assert "Traceback" in (run / "RELU-fp32" / "error.log").read_text()


def test_an_unpriced_model_with_a_cost_budget_is_refused_unless_priced(tmp_path):
    opts = LoopOptions(rounds=1, max_cost_usd=5.0)
    with pytest.raises(UserError, match="--price IN,OUT"):
        runner.start(tmp_path / "a", ["vector_add"], ["fp32"], "custom:mine",
                     "http://127.0.0.1:9/v1", "paper", opts, 1)  # fmt: skip
    assert not (tmp_path / "a" / "run.json").exists()
    run = start(tmp_path, "custom:mine", ["vector_add-fp32"], max_cost_usd=5.0)
    manifest = json.loads((run / "run.json").read_text())
    RunDir(run).write_manifest({**manifest, "base_url": "http://127.0.0.1:9/v1"})
    with pytest.raises(UserError, match="--price"):
        runner.execute(RunDir(run), backends=backend())


def test_resume_can_change_the_budgets_and_the_price(tmp_path):
    tasks = ["vector_add-fp32"]
    transcript(tmp_path / "t.jsonl", tasks)
    run = start(tmp_path, f"replay:{tmp_path / 't.jsonl'}", tasks, max_tokens=10)
    state = runner.execute(RunDir(run), backends=backend())["vector_add-fp32"]
    assert state.status == "stopped" and "token budget" in state.detail
    runner.change_budgets(RunDir(run), max_cost=None, max_tokens=1000, price=(1.0, 2.0))
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["options"]["max_tokens"] == 1000 and manifest["price"] == [1.0, 2.0]
    state = runner.execute(RunDir(run), backends=backend())["vector_add-fp32"]
    assert state.status == "done" and state.best.label == "round1"


def test_loop_options_round_trip_through_the_manifest():
    opts = LoopOptions(rounds=5, profile="full", max_tokens=10, flags="agent")
    assert runner.options_from(asdict(opts)) == opts


def test_a_wrong_outcome_keeps_the_baseline(tmp_path):
    transcript(tmp_path / "t.jsonl", ["vector_add-fp32"])
    run = start(tmp_path, f"replay:{tmp_path / 't.jsonl'}", ["vector_add-fp32"], debug_attempts=0)

    def factory(task, variant):
        def evaluate(source, flags, name, screen):
            return ok(1.0) if name == "baseline" else Outcome("wrong", cases=cases(None, "wrong"))

        return evaluate, backend()(task, variant)[1], DEVICE

    runner.execute(RunDir(run), backends=factory)
    (row,) = runner.results(run)
    assert row.best == "baseline" and row.candidate_score is None
