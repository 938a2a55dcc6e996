"""Commands clean up after themselves: an evaluation, a profile and an optimizer run on the CPU
stand-in for a GPU (tests/conftest.py) leave nothing in the temporary folder, not even empty
worker logs (the optimizer keeps its baseline workers to the end) or profile folders."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GOOD = Path(__file__).parent / "fixtures" / "good" / "vector_add_grid.cu"
pytestmark = pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc")


def test_evaluations_profiles_and_optimizer_runs_leave_nothing_in_the_temporary_folder(
    fake_gpu, tmp_path
):
    temp = tmp_path / "tmp"  # TMPDIR of the commands and of everything they start
    temp.mkdir()
    env = {**fake_gpu, "TMPDIR": str(temp)}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cudamaster.cli", *args], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=600,
                              check=False)  # fmt: skip

    evaluated = cli("eval", "vector_add", str(GOOD), "--cases", "0", "--unseen", "1", "--json")
    assert evaluated.returncode == 1, evaluated.stderr[-3000:]  # the stand-in runs no kernel
    assert '"verdict"' in evaluated.stdout
    profiled = cli("profile", "vector_add", str(GOOD))
    assert profiled.returncode == 1 and "profile missing" in profiled.stdout, profiled.stderr
    transcript = tmp_path / "answers.jsonl"
    transcript.write_text(json.dumps({"key": "vector_add-fp32/round1/planner", "text": "plan"}))
    optimized = cli("optimize", "--model", f"replay:{transcript}", "--ops", "vector_add",
                    "--rounds", "1", "--run", str(tmp_path / "run"))  # fmt: skip
    assert "vector_add-fp32: failed" in optimized.stdout, optimized.stderr[-3000:]
    assert sorted(p.name for p in temp.iterdir()) == []
