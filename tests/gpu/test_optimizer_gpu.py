"""The optimizer end to end on the GPU, with a replayed transcript whose replies are real
kernels written here: a clean speedup (vector_add), a compile error fixed by the debug reply
(RELU) and a wrong result fixed by the debug reply (softmax), through the real evaluator
(screening, then the full evaluation) and profiler."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
FIX = Path(__file__).resolve().parents[1] / "fixtures"


def fenced(path: Path) -> str:
    return f"Here is the kernel.\n\n```cuda\n{path.read_text()}```\n"


def transcript(path: Path) -> None:
    e2e = FIX / "e2e"
    replies = {
        "vector_add-fp32": {"coder": fenced(FIX / "good" / "vector_add_grid.cu")},
        "RELU-fp32": {"coder": fenced(e2e / "relu_broken.cu"),
                      "debug1": fenced(e2e / "relu_fixed.cu")},
        "softmax-fp32": {"coder": fenced(e2e / "softmax_wrong.cu"),
                         "debug1": fenced(e2e / "softmax_fixed.cu")},
    }  # fmt: skip
    with path.open("w") as f:
        for task, steps in replies.items():
            plan = "Diagnosis: one block does all the work.\n1. Use the whole grid."
            f.write(json.dumps({"key": f"{task}/round1/planner", "text": plan}) + "\n")
            for step, text in steps.items():
                f.write(json.dumps({"key": f"{task}/round1/c1/{step}", "text": text}) + "\n")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cudamaster.cli", *args],
                          capture_output=True, text=True, check=False)  # fmt: skip


def test_optimizer_end_to_end_with_a_replayed_transcript(record):
    out = Path(os.environ.get("CUDAMASTER_TEST_OUT") or tempfile.mkdtemp())
    work = Path(tempfile.mkdtemp())
    transcript(work / "transcript.jsonl")
    run = work / "run"
    proc = cli("optimize", "--model", f"replay:{work / 'transcript.jsonl'}", "--ops",
               "vector_add,RELU,softmax", "--rounds", "1", "--candidates", "1", "--run",
               str(run))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = cli("results", str(run), "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    rows = {r["task"]: r for r in json.loads(res.stdout)["tasks"]}
    table = cli("results", str(run)).stdout
    from cudamaster.profile.summary import count_tokens

    steps = run / "softmax-fp32" / "steps"
    prompts = {
        name: json.loads((steps / f"round1__{key}.json").read_text())["prompt"][-1]["content"]
        for name, key in (("planner", "planner"), ("coder", "c1__coder"), ("debug1", "c1__debug1"))
    }
    evals = {p.name: json.loads(p.read_text()) for t in rows
             for p in (run / t / "evals").glob("*-screen.json")}  # fmt: skip
    record("optimizer-e2e", {"rows": rows, "table": table,
                             "prompt_tokens": {k: count_tokens(v) for k, v in prompts.items()},
                             "flag_trials": {k: v["trials"] for k, v in evals.items()},
                             "sanitizer": {k: v["sanitizer"] for k, v in evals.items()
                                           if v["sanitizer"]}})  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    for name, text in prompts.items():
        (out / f"prompt-softmax-{name}.md").write_text(text)
    (out / "run-layout.txt").write_text(
        "\n".join(str(p.relative_to(run)) for p in sorted(run.rglob("*")))
    )
    shutil.copytree(run, out / "optimizer-run", dirs_exist_ok=True)  # `cudamaster report` reads it
    for task in rows:
        assert rows[task]["status"] == "done", rows[task]
        assert rows[task]["best"] == "round1-c1" and rows[task]["score"] > 1.0, rows[task]
        assert rows[task]["screened"] == 1 and rows[task]["full"] == 1, rows[task]
    steps = {t: sorted(p.stem for p in (run / t / "steps").glob("*.json")) for t in rows}
    fixed = "round1__c1__debug1"
    assert fixed in steps["RELU-fp32"] and fixed in steps["softmax-fp32"]
    assert fixed not in steps["vector_add-fp32"]
    stages = {t: sorted(p.name.split("-")[0] if p.name.startswith("full") else "screen"
                        for p in (run / t / "evals").glob("*.json")) for t in rows}  # fmt: skip
    assert all("full" in s and "screen" in s for s in stages.values()), stages
    planner, debugger = prompts["planner"], prompts["debug1"]
    assert "Bottleneck:" in planner and "Nsight Compute on case" in planner
    assert "launch + synchronize floor" in planner and "% of P" in planner
    assert "expected" in debugger and "compute-sanitizer --tool racecheck" in debugger
    assert "The baseline (slow but correct" in debugger
    # the run against itself, timed again: each best twice in one session, an A/A test
    again = cli("compare", str(run), str(run), "--measure", "--json")
    assert again.returncode == 0, again.stderr[-2000:]
    aa = json.loads(again.stdout)
    record("optimizer-compare-measure", aa["rows"])
    assert [r["impl"] for r in aa["rows"]] == ["round1-c1"] * 3
    assert all(m["a"]["stage"] == m["b"]["stage"] == "full" for m in aa["measured"])
    assert all(r["status"] == "within noise" and r["ratio"] > 0 for r in aa["rows"]), aa["rows"]
    shutil.rmtree(work, ignore_errors=True)
