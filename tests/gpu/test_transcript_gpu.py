"""A real model's recorded transcript (tests/fixtures/transcripts) replayed through the real
evaluator and profiler: the first round of the run's first two tasks, each answer given by the
key its prompt was asked under, and each candidate screened, evaluated and profiled as when the
model wrote it."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cudamaster.cli", *args],
                          capture_output=True, text=True, check=False)  # fmt: skip


def test_a_real_models_first_round_replays_through_the_real_evaluator(real_transcript, record):
    exchange, manifest = real_transcript
    tasks = manifest["tasks"][:2]
    options = manifest["options"]
    run = Path(tempfile.mkdtemp()) / "run"
    proc = cli("optimize", "--model", f"replay:{exchange}", "--ops",
               ",".join(f"{op}:{dtype}" for op, dtype in tasks), "--rounds", "1",
               "--candidates", str(options["candidates"]), "--beam", str(options["beam"]),
               "--no-merge", "--run", str(run))  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    res = cli("results", str(run), "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    rows = {r["task"]: r for r in json.loads(res.stdout)["tasks"]}
    record("transcript-replay", {"rows": rows, "table": cli("results", str(run)).stdout})
    if out := os.environ.get("CUDAMASTER_TEST_OUT"):
        shutil.copytree(run, Path(out) / "transcript-run", dirs_exist_ok=True)
    assert sorted(rows) == sorted(f"{op}-{dtype}" for op, dtype in tasks)
    for name, row in rows.items():
        assert row["status"] == "done" and row["rounds"] == 1, row
        assert row["candidates"] == options["candidates"] and row["screened"] >= 1, row
        assert row["tokens"] > 1000, row  # the exchange's counts, replayed
        for step in ("round1__planner", "round1__c1__coder"):  # the model's own words
            said = (exchange / f"{name}__{step}.answer.md").read_text()
            assert json.loads((run / name / "steps" / f"{step}.json").read_text())["text"] == said
        assert list((run / name / "profiles").glob("*-filtered.json")), name  # the baseline's
