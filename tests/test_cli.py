"""The CLI's error paths: one line on stderr, exit code 2, never a traceback."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import one_line_error

WRONG = Path(__file__).parent / "fixtures" / "wrong"
BASELINE = Path(__file__).resolve().parents[1] / "tasks" / "vector_add" / "baseline.cu"


def cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cudamaster.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
        check=False,
    )


def test_tasks_lists_every_operator_as_json():
    proc = cli("tasks", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    names = {r["name"] for r in rows}
    assert "vector_add" in names
    assert all(set(r["dtypes"]) == {"fp32", "bf16"} for r in rows)


def test_unknown_operator():
    one_line_error(cli("eval", "vectr_add", str(BASELINE)), "unknown operator", "vector_add")


def test_missing_file():
    one_line_error(cli("eval", "vector_add", "/no/such.cu"), "no such file")


def test_compile_error_shows_the_compiler_message():
    one_line_error(
        cli("eval", "vector_add", str(WRONG / "compile_error.cu")), "compile error", "error"
    )


def test_missing_entry_symbol():
    one_line_error(
        cli("eval", "vector_add", str(WRONG / "wrong_symbol.cu")), 'extern "C" vector_add'
    )


def test_forbidden_symbol():
    one_line_error(cli("eval", "vector_add", str(WRONG / "opens_file.cu")), "refused", "fopen")


def test_no_nvcc():
    one_line_error(
        cli("eval", "vector_add", str(BASELINE), CUDAMASTER_NVCC="/nowhere/nvcc"), "nvcc not found"
    )


def test_no_gpu():
    one_line_error(cli("eval", "vector_add", str(BASELINE), CUDA_VISIBLE_DEVICES=""), "no GPU")
    one_line_error(cli("device", CUDA_VISIBLE_DEVICES=""), "no GPU")


def test_bad_option_value_is_a_usage_error_not_a_traceback():
    proc = cli("eval", "vector_add", str(BASELINE), "--dtype", "fp16")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args", [("eval", "vector_add", str(BASELINE), "--dtype", "both")])
def test_eval_needs_one_dtype(args):
    one_line_error(cli(*args), "--dtype", "'both' is not one of 'fp32', 'bf16'")
