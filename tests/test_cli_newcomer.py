"""A newcomer's first ten minutes (issue 25): every bad input is one line on stderr that says what
to do, with exit code 2, never a traceback; nothing computed is lost; the help offers only what
a command takes; `cudamaster tasks` says what each operator is, faithfully."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import fake_gpu_env, one_line_error
from cudamaster import cli as cli_module
from cudamaster.tasks import discover

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "tasks" / "vector_add" / "baseline.cu"
GOOD = Path(__file__).parent / "fixtures" / "good" / "vector_add_grid.cu"
needs_gcc = pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc (the fake GPU)")


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, **extra: str):
    return subprocess.run([sys.executable, "-m", "cudamaster.cli", *args], capture_output=True,
                          text=True, env={**(env or os.environ), **extra}, cwd=cwd, timeout=300,
                          check=False)  # fmt: skip


@pytest.fixture(scope="module")
def gpu(tmp_path_factory) -> dict[str, str]:
    """One fake-GPU environment for the module, so that its builds are cached once."""
    return fake_gpu_env(tmp_path_factory.mktemp("fake_gpu"))


def replay(tmp_path: Path) -> str:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"key": "vector_add-fp32/round1/planner", "text": "x"}) + "\n")
    return f"replay:{transcript}"


# -- --version -------------------------------------------------------------------------------
def test_version_prints_the_installed_version():
    proc = cli("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"cudamaster {importlib.metadata.version('cudamaster')}"


def test_version_from_a_source_tree_is_pyprojects(monkeypatch):
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert cli_module._version() == pyproject["project"]["version"]


# -- eval: --cases, --out --------------------------------------------------------------------
def test_eval_cases_that_are_not_numbers_are_refused():
    one_line_error(cli("eval", "vector_add", str(BASELINE), "--cases", "abc"),
                   "--cases 'abc' is not a list of case indices", "e.g. --cases 0,3")  # fmt: skip


def test_a_case_index_the_suite_lacks_is_refused():
    one_line_error(cli("eval", "vector_add", str(BASELINE), "--cases", "0,99"),
                   "has no case 99", "from 0 to 4")  # fmt: skip
    one_line_error(cli("aa", "vector_add", "--suite", "large", "--cases", "2"),
                   "the large suite of vector_add has no case 2", "from 0 to 1")  # fmt: skip


def test_an_unwritable_out_is_refused_before_the_evaluation(tmp_path):
    # without nvcc, an evaluation would fail on the build: the --out check comes first
    no_nvcc = {"CUDAMASTER_NVCC": "/nowhere/nvcc"}
    one_line_error(cli("eval", "vector_add", str(BASELINE), "--out", "/proc/nope/x.json",
                       **no_nvcc), "--out /proc/nope/x.json cannot be written")  # fmt: skip
    afile = tmp_path / "a-file"
    afile.write_text("")
    one_line_error(cli("eval", "vector_add", str(BASELINE), "--out", str(afile / "x.json"),
                       **no_nvcc), "is a file, not a directory")  # fmt: skip
    one_line_error(cli("eval", "vector_add", str(BASELINE), "--out", str(tmp_path), **no_nvcc),
                   "is a directory: name a file")  # fmt: skip
    one_line_error(cli("bench", "--ops", "vector_add", "--out", "/proc/nope/b.json"),
                   "--out /proc/nope/b.json cannot be written")  # fmt: skip
    assert list(tmp_path.iterdir()) == [afile]  # the probes left nothing behind


# The report's writer fails on --out only (as when the disk fills during the evaluation).
FAILING_OUT = """
import sys, cudamaster.report as r
real = r.write_json
def write_json(data, path):
    if path.name == "out.json":
        raise OSError(28, "No space left on device")
    real(data, path)
r.write_json = write_json
sys.argv[0] = "cudamaster"
from cudamaster.cli import main
main()
"""


@needs_gcc
def test_a_report_that_cannot_be_written_at_the_end_is_saved_elsewhere(gpu, tmp_path):
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-c", FAILING_OUT, "eval", "vector_add", str(GOOD),
                           "--cases", "0", "--unseen", "0", "--out", str(out)], env=gpu,
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "--out" in last and "No space left on device" in last and "saved to" in last, last
    saved = list(tmp_path.glob("cudamaster-eval-vector_add-fp32-*.json"))
    assert len(saved) == 1 and str(saved[0]) in last.replace("\n", "")
    report = json.loads(saved[0].read_text())
    assert {i["label"] for i in report["report"]["impls"]} >= {"baseline", "candidate"}
    assert "candidate: wrong" in proc.stdout  # the results were printed all the same
    assert not out.exists()


# -- optimize, resume, results ---------------------------------------------------------------
def test_optimize_refuses_a_run_path_that_is_a_file(tmp_path):
    afile = tmp_path / "notes.txt"
    afile.write_text("mine")
    one_line_error(cli("optimize", "--model", replay(tmp_path), "--ops", "vector_add", "--run",
                       str(afile)), f"--run {afile} is a file", "cudamaster resume")  # fmt: skip
    assert afile.read_text() == "mine"


@pytest.mark.parametrize("content", ["", "{not json", "[]", '{"model": "x"}'])
def test_results_and_resume_on_a_corrupt_run_json(tmp_path, content):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(content)
    for command in ("results", "resume"):
        one_line_error(cli(command, str(run)), f"{run / 'run.json'}", "restore it")


def test_a_mistyped_run_path_creates_nothing(tmp_path):
    typo = tmp_path / "runs" / "20250101-typo"
    for command in ("results", "resume"):
        one_line_error(cli(command, str(typo)), f"no run directory at {typo}", "check the path")
        assert not typo.exists() and not typo.parent.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    one_line_error(cli("results", str(empty)), "not a run directory (no run.json)")
    assert list(empty.iterdir()) == []


@needs_gcc
def test_optimize_and_resume_exit_1_when_a_task_failed(gpu, tmp_path):
    run = tmp_path / "run"
    # on the fake GPU no kernel runs: the baseline itself fails, and so does the task
    proc = cli("optimize", "--model", replay(tmp_path), "--ops", "vector_add", "--rounds", "1",
               "--run", str(run), env=gpu)  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "vector_add-fp32: failed" in proc.stdout
    assert json.loads((run / "run.json").read_text())["status"] == "failed"
    again = cli("resume", str(run), env=gpu)
    assert again.returncode == 1 and "vector_add-fp32: failed" in again.stdout
    helps = help_of("optimize") + help_of("resume")
    assert helps.count("Exit codes:") == 2 and helps.count("1: a task failed") == 2


def test_a_run_without_a_gpu_waits_for_one_and_says_where_to_resume(tmp_path):
    run = tmp_path / "run"
    proc = cli("optimize", "--model", replay(tmp_path), "--ops", "vector_add", "--run", str(run),
               CUDA_VISIBLE_DEVICES="")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]  # nothing failed: the task waits
    assert "Traceback" not in proc.stderr
    assert "vector_add-fp32: needs_gpu" in proc.stdout and "no GPU found" in proc.stdout
    assert f"`cudamaster resume {run}` on a GPU machine" in proc.stdout
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["status"] == "needs_gpu" and "reason" not in manifest
    res = cli("results", str(run), "--json")
    assert res.returncode == 0, res.stderr
    (row,) = json.loads(res.stdout)["tasks"]
    assert row["status"] == "needs_gpu" and row["candidates"] == 0
    # what the task waits for, said under the tables as in the JSON
    assert row["detail"].startswith("1 evaluation(s) to run (no GPU found")
    said = cli("results", str(run), COLUMNS="300").stdout
    assert f"vector_add-fp32: needs_gpu: {row['detail']}" in said


def test_each_operator_may_name_its_own_dtype(tmp_path):
    run = tmp_path / "run"
    proc = cli("optimize", "--model", replay(tmp_path), "--ops", "softmax:bf16,vector_add",
               "--dtype", "both", "--run", str(run), CUDA_VISIBLE_DEVICES="")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    tasks = json.loads((run / "run.json").read_text())["tasks"]
    assert tasks == [["softmax", "bf16"], ["vector_add", "fp32"], ["vector_add", "bf16"]]
    bad = cli("optimize", "--model", replay(tmp_path), "--ops", "softmax:fp16", "--run",
              str(tmp_path / "r2"))  # fmt: skip
    one_line_error(bad, "the dtype after ':' is fp32 or bf16")
    assert not (tmp_path / "r2").exists()


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["optimize", "--ops", ""], ["--ops '' names no operator", "vector_add,softmax"]),
        (["optimize", "--ops", " , "], ["names no operator"]),
        (["optimize", "--ops", "vector_add", "--rounds", "-1"], ["'--rounds'", "--help"]),
        (["optimize", "--ops", "vector_add", "--rounds", "0"], ["'--rounds'"]),
        (["optimize", "--ops", "vector_add", "--concurrency", "0"], ["'--concurrency'"]),
        (["optimize", "--ops", "vector_add", "--max-cost", "-2"], ["'--max-cost'"]),
        (["optimize", "--ops", "vector_add", "--reasoning-effort", "extreme"],
         ["'--reasoning-effort'", "'low', 'medium', 'high'"]),
        (["optimize", "--ops", "vector_add", "--profile", "some"],
         ["'--profile'", "'filtered', 'full', 'none'"]),
        (["optimize", "--ops", "vector_add", "--flags", "-O3"], ["'--flags'", "'measure'"]),
        (["optimize", "--ops", "vector_add", "--suite", "both"], ["'--suite'", "'paper'"]),
    ],
)  # fmt: skip
def test_optimize_refuses_bad_values_in_one_line(tmp_path, args, needles):
    run = tmp_path / "run"
    one_line_error(cli(*args, "--model", replay(tmp_path), "--run", str(run)), *needles)
    assert not run.exists()


def test_bench_and_profile_refuse_an_empty_ops():
    one_line_error(cli("bench", "--ops", ""), "names no operator")
    one_line_error(cli("profile", "--calibrate", "--ops", ","), "names no operator")


# -- the help offers only valid choices ------------------------------------------------------
def option_line(help_text: str, option: str) -> str:
    return next(ln for ln in help_text.splitlines() if f"{option} " in ln)


@pytest.mark.parametrize(
    ("command", "option", "choices"),
    [
        ("eval", "--dtype", "<fp32|bf16>"),
        ("eval", "--suite", "<paper|large>"),
        ("aa", "--dtype", "<fp32|bf16>"),
        ("aa", "--suite", "<paper|large>"),
        ("bench", "--dtype", "<fp32|bf16|both>"),
        ("bench", "--suite", "<paper|large|both>"),
        ("optimize", "--dtype", "<fp32|bf16|both>"),
        ("optimize", "--suite", "<paper|large>"),
        ("optimize", "--profile", "<filtered|full|none>"),
        ("optimize", "--flags", "<measure|agent>"),
        ("optimize", "--reasoning-effort", "<low|medium|high>"),
        ("profile", "--summary", "<filtered|full|none>"),
    ],
)
def test_the_help_lists_exactly_the_values_a_command_takes(command, option, choices):
    assert choices in option_line(help_of(command), option)


@functools.cache
def help_of(command: str) -> str:
    proc = cli(command, "--help", COLUMNS="200")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_value_the_help_does_not_offer_is_refused_in_one_line():
    one_line_error(cli("eval", "vector_add", str(BASELINE), "--dtype", "both"),
                   "'--dtype'", "'both' is not one of 'fp32', 'bf16'")  # fmt: skip
    one_line_error(cli("profile", "vector_add", str(BASELINE), "--summary", "short"),
                   "'--summary'", "'filtered', 'full', 'none'")  # fmt: skip
    one_line_error(cli("nosuchcommand"), "No such command")


# -- cudamaster tasks ------------------------------------------------------------------------
def test_tasks_states_each_library_whole():
    proc = cli("tasks", COLUMNS="400")
    assert proc.returncode == 0, proc.stderr
    tasks = discover()
    for name in ("dot_product", "vector_add", "rms_norm", "matrix_scalar_mul"):
        library = tasks[name].spec.library
        assert library and "(BF16" in library
        row = next(ln for ln in proc.stdout.splitlines() if f" {name} " in ln)
        assert library in row, row
    assert "50 operators" in proc.stdout or f"{len(tasks)} operators" in proc.stdout


def test_tasks_op_prints_the_operators_card():
    proc = cli("tasks", "dot_product")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    spec = discover()["dot_product"].spec
    assert 'FP32: extern "C" void dot_product(float* loss, const float* X, const float* Y, int N)' \
        in out  # fmt: skip
    assert ('BF16: extern "C" void dot_product_bf16(float* loss, const __nv_bfloat16* X, '
            "const __nv_bfloat16* Y, int N)") in out  # fmt: skip
    assert spec.summary in out and spec.semantics_note and spec.semantics_note in out
    for suite in ("paper", "large"):
        assert f"{suite} suite ({len(spec.suites[suite])} cases):" in out
        for i, case in enumerate(spec.suites[suite]):
            assert f"  {i}: N={case['N']}\n" in out
    assert "FP32: rtol 1e-06, atol 1e-06, mtol 1e-06, budget 0" in out
    assert "BF16: rtol 1e-06, atol 1e-06, mtol 1e-06, budget 0" in out
    assert "rel, tol 0.001, budget 0" in out
    assert "baseline: baseline.cu (FP32), baseline_bf16.cu (BF16)" in out
    assert f"library: {spec.library}\n" in out and f"note: {spec.library_note}" in out
    assert "dims: N = 1..2000000" in out and "values: declared, mixed" in out


def test_tasks_op_card_scalars_by_value_where_clauses_and_json():
    proc = cli("tasks", "top_k", "--json")
    assert proc.returncode == 0, proc.stderr
    card = json.loads(proc.stdout)
    spec = discover()["top_k"].spec
    assert card["signatures"]["bf16"] == ('extern "C" void top_k_bf16(__nv_bfloat16* '
        "top_k_values, int* top_k_indices, const __nv_bfloat16* input, int N, int k)")  # fmt: skip
    assert card["unseen"]["where"] == spec.unseen.where and spec.unseen.where
    text = cli("tasks", "top_k").stdout
    assert f"where: {'; '.join(spec.unseen.where)}" in text


def test_tasks_with_an_unknown_operator():
    one_line_error(cli("tasks", "dot_prodct"), "unknown operator 'dot_prodct'", "dot_product")


def test_eval_without_a_gpu_builds_and_checks_the_file_and_says_what_is_left(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CUDAMASTER_ARCH"}
    env["PATH"] = ":".join(
        p for p in env["PATH"].split(":") if not (Path(p) / "nvidia-smi").exists()
    )
    good = Path(__file__).parent / "fixtures" / "good" / "vector_add_grid.cu"
    cmd = [sys.executable, "-m", "cudamaster.cli", "eval", "vector_add", str(good)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert 'defines extern "C" vector_add; passes the static checks' in proc.stdout
    assert "registers" in proc.stdout
    assert "was built and checked, not run" in proc.stderr + proc.stdout
