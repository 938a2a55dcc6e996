"""Runs over several tasks: concurrency, the exchange provider's stop and resume, results."""

from __future__ import annotations

import json

from cudamaster.agents import runner
from cudamaster.agents.loop import LoopOptions, Outcome
from cudamaster.agents.rundir import RunDir

DEVICE = {"name": "test GPU", "compute_capability": "90", "sm_count": 132, "l2_bytes": 1 << 20,
          "copy_gbs": 1.0, "fp32_tflops": 1.0, "bf16_tflops": 1.0}  # fmt: skip
CODE = '```cuda\n// FAST\nextern "C" void f() {}\n```'


class Backend:
    def evaluate(self, source, flags, name):
        if name == "baseline":
            return Outcome("ok", score=1.0, sol=0.01)
        return Outcome("ok", score=2.5, geomean=2.0, sol=0.4)

    def profile(self, source, flags, name, mode):
        return "Bottleneck: memory-latency-bound" if "FAST" not in source else \
            "Bottleneck: memory-bandwidth-bound"  # fmt: skip


def factory(task, variant):
    return Backend(), DEVICE


def transcript(path, tasks):
    with path.open("w") as f:
        for t in tasks:
            for step, text in [("planner", "plan: vectorise"), ("coder", CODE),
                               ("compiler", '{"flags": ["-O3"]}')]:  # fmt: skip
                usage = {"input_tokens": 10, "output_tokens": 5}
                entry = {"key": f"{t}/round1/{step}", "text": text, "usage": usage}
                f.write(json.dumps(entry) + "\n")


def start(tmp_path, model, tasks):
    run = tmp_path / "run"
    RunDir(run).write_manifest({
        "model": model, "base_url": None, "suite": "paper", "concurrency": 2,
        "tasks": [t.rsplit("-", 1) for t in tasks],
        "options": {"rounds": 1, "profile": "filtered"},
    })  # fmt: skip
    return run


def test_many_tasks_with_a_replayed_transcript_and_the_results_table(tmp_path):
    tasks = ["vector_add-fp32", "RELU-fp32"]
    transcript(tmp_path / "t.jsonl", tasks)
    run = start(tmp_path, f"replay:{tmp_path / 't.jsonl'}", tasks)
    states = runner.execute(RunDir(run), backend_factory=factory)
    assert {k: s.status for k, s in states.items()} == dict.fromkeys(tasks, "done")
    rows = runner.results(run)
    assert [r.score for r in rows] == [2.5, 2.5] and rows[0].tokens == 45
    assert rows[0].class_before == "memory-latency-bound"
    assert rows[0].class_after == "memory-bandwidth-bound"
    succ = {row["tau"]: row["solved"] for row in runner.success(rows)}
    assert succ == {0: 2, 1: 2, 2: 2, 4: 0, 8: 0}
    assert json.loads(runner.dump(rows))["tasks"][1]["task"] == "RELU-fp32"


def test_exchange_stops_cleanly_and_resume_continues_once_answered(tmp_path):
    ex = tmp_path / "ex"
    run = start(tmp_path, f"exchange:{ex}", ["vector_add-fp32"])
    state = runner.execute(RunDir(run), backend_factory=factory)["vector_add-fp32"]
    assert state.status == "waiting" and "round1__planner.prompt.md" in state.detail
    for step, text in [("planner", "plan"), ("coder", CODE), ("compiler", '{"flags": []}')]:
        (ex / f"vector_add-fp32__round1__{step}.answer.md").write_text(text)
    state = runner.execute(RunDir(run), backend_factory=factory)["vector_add-fp32"]
    assert state.status == "done" and state.best["outcome"]["score"] == 2.5


def test_loop_options_round_trip_through_the_manifest():
    opts = LoopOptions(rounds=5, profile="full", max_tokens=10)
    from dataclasses import asdict

    assert runner.options_from(asdict(opts)) == opts
