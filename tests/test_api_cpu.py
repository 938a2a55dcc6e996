"""cudamaster.api, the notebook API, on the CPU: evaluate and bench through tests/conftest.py's fake
GPU (in a subprocess with its environment; launches do nothing there, so every kernel that runs
is judged wrong), refusals and the no-GPU error in this process, and load_results on a bench's
JSON, an eval's and an optimizer run directory, each into typed objects."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cudamaster import api
from cudamaster.agents import runner
from cudamaster.agents.rundir import RunDir
from cudamaster.errors import UserError
from optimizer_fakes import ENTRY, FakeBackend

FIXTURES = Path(__file__).parent / "fixtures"
GOOD = FIXTURES / "good" / "vector_add_grid.cu"
RAN = {"wrong_on_unseen", "wrong"}  # a kernel that ran on the fake GPU (see test_impls_cpu.py)
needs_gcc = pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc (the fake GPU)")


def python(env: dict[str, str], code: str, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter with ``env``; it prints one JSON object, returned."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                          capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@needs_gcc
def test_evaluate_on_the_fake_gpu_returns_a_typed_result(fake_gpu):
    got = python(fake_gpu, """
        import json, sys
        from cudamaster import api
        r = api.evaluate("vector_add", sys.argv[1], cases=[0], unseen=0)
        text = open(sys.argv[1]).read().replace('void vector_add(', 'void my_add(')
        t = api.evaluate("vector_add", text, entry="my_add", cases=[0], unseen=0)
        print(json.dumps({"r": api.as_dict(r), "t": api.as_dict(t), "type": type(r).__name__,
                          "case": type(r.cases[0]).__name__, "correct": r.correct}))
    """, str(GOOD))  # fmt: skip
    r, t = got["r"], got["t"]
    assert got["type"] == "EvalResult" and got["case"] == "CaseScore" and not got["correct"]
    assert (r["task"], r["variant"], r["suite"], r["label"]) == (
        "vector_add", "fp32", "paper", "candidate",
    )  # fmt: skip
    assert r["verdict"] == "wrong" and r["entry"] == "vector_add" and r["device"] == "Fake GPU"
    assert [c["verdict"] for c in r["cases"]] == ["wrong"] and r["cases"][0]["label"] == "N=1024"
    assert r["baseline"]["label"] == "baseline" and r["score"] is None  # wrong: no P
    assert "data" not in r  # as_dict leaves the full report out
    # the source text itself, its kernel called by another name
    assert t["entry"] == "my_add" and t["verdict"] == "wrong" and len(t["cases"]) == 1


def test_evaluate_gives_a_refusal_before_running_as_its_verdict():
    bad = api.evaluate("vector_add", FIXTURES / "wrong" / "compile_error.cu")
    assert bad.verdict == "compile_error" and bad.cases == [] and bad.score is None
    missing = api.evaluate("vector_add", str(GOOD), entry="vector_add_fast")
    assert missing.verdict == "missing_symbol" and "vector_add_fast" in missing.detail


def test_evaluate_without_a_gpu_raises_a_user_error_saying_what_was_checked(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(UserError, match=r"vector_add_grid\.cu was built and checked, not run"):
        api.evaluate("vector_add", GOOD)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: api.evaluate("vectr_add", GOOD), "unknown operator"),
        (lambda: api.evaluate("vector_add", "/no/such.cu"), "no such file"),
        (lambda: api.evaluate("vector_add", GOOD, dtype="fp16"), "dtype='fp16'"),
        (lambda: api.evaluate("vector_add", GOOD, suite="huge"), "suite='huge'"),
        (lambda: api.bench(ops=[]), "names no operator"),
    ],
)
def test_bad_arguments_are_user_errors(call, message):
    with pytest.raises(UserError, match=message):
        call()


@needs_gcc
def test_bench_of_a_folder_and_load_results_give_the_same_typed_rows(fake_gpu, tmp_path):
    d = tmp_path / "impls"
    d.mkdir()
    shutil.copy(GOOD, d / "vector_add.cu")
    shutil.copy(GOOD, d / "kernel.cu")
    out, plain = tmp_path / "bench.json", tmp_path / "plain.json"
    got = python(fake_gpu, """
        import json, sys
        from cudamaster import api
        res = api.bench(ops="vector_add,gelu", dtype="fp32", suite="paper", impls=sys.argv[1],
                        out=sys.argv[2])
        std = api.bench(ops=["vector_add"], dtype="fp32", suite="paper", out=sys.argv[3])
        print(json.dumps({"res": api.as_dict(res), "std": api.as_dict(std),
                          "files": [type(f).__name__ for f in res.files],
                          "by_file": sorted(res.by_file())}))
    """, str(d), str(out), str(plain))  # fmt: skip
    res = got["res"]
    assert got["files"] == ["ImplFile"] * 3 and got["by_file"] == ["vector_add.cu"]
    status = {f["path"]: f["status"] for f in res["files"]}
    assert status["kernel.cu"] == "misnamed" and status["gelu.cu"] == "missing"
    assert status["vector_add.cu"] in RAN
    (result,) = res["results"]
    assert result["label"] == d.name and result["file"] == "vector_add.cu"  # the folder's label
    assert result["verdict"] == status["vector_add.cu"] and result["baseline"] is not None
    assert res["path"] == str(out) and res["impls_dir"] == str(d) and res["wall_s"] > 0
    # without a folder: the library against the baseline, seen from the library
    (std,) = got["std"]["results"]
    assert std["label"] == "library" and got["std"]["files"] == []
    # read back from the JSON: the same rows, the same results
    loaded = api.load_results(out)
    assert isinstance(loaded, api.BenchResults)
    assert [f.status for f in loaded.files] == list(status.values())
    evaluated = next(f for f in loaded.files if f.path == "vector_add.cu")
    assert evaluated.wall_s is not None and evaluated.suites["paper"].verdict in RAN
    (back,) = loaded.results
    assert (back.label, back.verdict, back.file) == (d.name, result["verdict"],
                                                     "vector_add.cu")  # fmt: skip
    assert [c.label for c in back.cases] == [c["label"] for c in result["cases"]]
    # an eval's JSON (one report_json) reads as one result
    one = tmp_path / "eval.json"
    one.write_text(json.dumps(json.loads(out.read_text())["results"][0]))
    single = api.load_results(one)
    assert isinstance(single, api.BenchResults) and single.results[0].label == d.name


def test_load_results_reads_an_optimizer_run_directory(tmp_path):
    transcript = tmp_path / "t.jsonl"
    usage = {"input_tokens": 10, "output_tokens": 5}
    steps = [("planner", "Optimizations:\n1. vectorise"),
             ("c1/coder", f"```cuda\n// P 2.5\n{ENTRY}\n```")]  # fmt: skip
    transcript.write_text("".join(
        json.dumps({"key": f"vector_add-fp32/round1/{step}", "text": text, "usage": usage}) + "\n"
        for step, text in steps
    ))  # fmt: skip
    run = tmp_path / "run"
    RunDir(run).write_manifest({
        "model": f"replay:{transcript}", "base_url": None, "suite": "paper", "concurrency": 1,
        "tasks": [["vector_add", "fp32"]], "options": {"rounds": 1, "profile": "filtered"},
    })  # fmt: skip
    runner.execute(RunDir(run), backends=lambda task, variant: FakeBackend())
    loaded = api.load_results(run)
    assert isinstance(loaded, api.RunResults)
    (task,) = loaded.tasks
    assert task.task == "vector_add-fp32" and task.score == pytest.approx(2.5)
    assert loaded.totals.tasks == 1 and loaded.success[1]["solved"] == 1  # tau = 1


def test_load_results_refuses_what_holds_no_results(tmp_path):
    with pytest.raises(UserError, match="not a run directory"):
        api.load_results(tmp_path)
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(UserError, match="is not JSON"):
        api.load_results(tmp_path / "x.json")
    (tmp_path / "y.json").write_text('{"a": 1}')
    with pytest.raises(UserError, match="holds no cudamaster results"):
        api.load_results(tmp_path / "y.json")
    with pytest.raises(UserError, match="no such file or run directory"):
        api.load_results(tmp_path / "nowhere.json")
