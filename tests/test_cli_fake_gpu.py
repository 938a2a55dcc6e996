"""`cudamaster bench`, `eval` and `device` end to end on the CPU: a stand-in nvidia-smi, cached
device facts and a CPU stand-in for libcudart on which kernel launches do nothing, so every
baseline's output stays poisoned and must be judged wrong. This exercises the whole command
path (build, checks, workers, verdicts, scores, tables, JSON) without a GPU."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GOOD = Path(__file__).parent / "fixtures" / "good" / "vector_add_grid.cu"
pytestmark = pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc")


def cli(env, *args):
    return subprocess.run([sys.executable, "-m", "cudamaster.cli", *args], env=env,
                          capture_output=True, text=True, timeout=900, check=False)  # fmt: skip


def test_device_reads_the_cached_facts(fake_gpu):
    proc = cli(fake_gpu, "device", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["name"] == "Fake GPU"


def test_bench_runs_end_to_end_and_judges_unwritten_outputs_wrong(fake_gpu, tmp_path):
    out = tmp_path / "bench.json"
    proc = cli(fake_gpu, "bench", "--ops", "vector_add", "--dtype", "fp32", "--suite", "paper",
               "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    (result,) = data["results"]
    impls = {i["label"]: i for i in result["report"]["impls"]}
    base = impls["baseline"]
    # launches did nothing: the first unseen case finds it, and no suite case runs
    assert base["verdict"] == "wrong_on_unseen" and "NaN" in base["detail"]
    assert base["unseen"][0]["verdict"] == "wrong" and result["report"]["unseen_seed"] is not None
    assert all(c["verdict"] == "skipped" for c in base["cases"])
    assert impls["library"]["verdict"] in ("compile_error", "load_error", "wrong_on_unseen")
    assert "vector_add" in proc.stdout and data["device"]["name"] == "Fake GPU"


def test_bench_spreads_its_evaluations_over_every_gpu_and_says_which_ran_what(fake_gpu, tmp_path):
    out = tmp_path / "bench.json"
    proc = cli(fake_gpu, "bench", "--ops", "vector_add,RELU", "--dtype", "fp32", "--suite",
               "paper", "--gpus", "all", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    used = [r["report"]["gpu"]["uuid"] for r in data["results"]]
    assert sorted(used) == ["GPU-fake-0", "GPU-fake-1"]  # two evaluations, one on each
    assert set(data["devices"]) == {"GPU-fake-0", "GPU-fake-1"}
    assert "on 2 GPUs" in proc.stdout
    bad = cli(fake_gpu, "bench", "--ops", "vector_add", "--gpus", "0,7")
    assert bad.returncode != 0 and "there is no GPU 7" in bad.stdout + bad.stderr


def test_eval_reports_a_wrong_candidate_and_exits_1(fake_gpu):
    proc = cli(fake_gpu, "eval", "vector_add", str(GOOD), "--cases", "0", "--json",
               "--unseen", "0")  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    cand = next(i for i in data["report"]["impls"] if i["label"] == "candidate")
    assert cand["verdict"] == "wrong" and cand["cases"][0]["seeds"] and cand["unseen"] == []


def test_optimize_resume_and_results_commands_run_end_to_end(fake_gpu, tmp_path):
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        json.dumps({"key": "vector_add-fp32/round1/planner", "text": "plan"}) + "\n"
    )
    run = tmp_path / "run"
    proc = cli(fake_gpu, "optimize", "--model", f"replay:{transcript}", "--ops", "vector_add",
               "--rounds", "1", "--run", str(run))  # fmt: skip
    # on the stand-in GPU no kernel runs, so the baseline itself fails, the task stops there, and
    # the command exits 1 (a task failed)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "vector_add-fp32: failed" in proc.stdout and "baseline itself failed" in proc.stdout
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["model"].startswith("replay:") and manifest["options"]["rounds"] == 1
    assert "KEY" not in json.dumps(manifest).upper()
    device = json.loads((run / "device.json").read_text())
    assert device["name"] == "Fake GPU"
    device["name"] = "Other GPU"  # as though its first rounds had run on another model
    (run / "device.json").write_text(json.dumps(device))
    assert "no bottleneck calibration for Fake GPU: profiles class kernels by the default 30%" in (
        " ".join(proc.stderr.split())
    )
    cache = Path(fake_gpu["CUDAMASTER_CACHE"])
    calibrated = {"compute": 41.0, "memory": 25.0, "calibrated": True, "samples": 100}
    (cache / "thresholds-Fake-GPU.json").write_text(json.dumps(calibrated))  # as --calibrate does
    again = cli(fake_gpu, "resume", str(run), "--max-tokens", "500", "--price", "1.5,6",
                "--gpus", "all", "--concurrency", "1")  # fmt: skip
    assert again.returncode == 1 and "vector_add-fp32: failed" in again.stdout
    said = " ".join(again.stderr.split())
    assert "2 GPUs, but tasks run 1 at a time: `--concurrency 2` keeps every GPU busy" in said
    assert "measured on Other GPU until now, from here on on Fake GPU" in said
    assert "no bottleneck calibration" not in said
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["options"]["max_tokens"] == 500 and manifest["price"] == [1.5, 6.0]
    bad = cli(fake_gpu, "resume", str(run), "--price", "cheap")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    res = cli(fake_gpu, "results", str(run), "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    rows = json.loads(res.stdout)
    assert rows["tasks"][0]["status"] == "failed" and rows["success"][0]["solved"] == 0
    shown = " ".join(cli(fake_gpu, "results", str(run)).stdout.split())
    assert "measured on Other GPU, then Fake GPU (each choice compares numbers" in shown
    assert (
        cli(
            fake_gpu,
            "optimize",
            "--model",
            f"replay:{transcript}",
            "--ops",
            "vector_add",
            "--run",
            str(run),
        ).returncode
        == 2
    )  # fmt: skip  (the run exists: use resume)


def test_a_run_started_without_a_gpu_resumes_on_every_gpu_of_the_machine(fake_gpu, tmp_path):
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("")
    run = tmp_path / "run"
    started = cli({**fake_gpu, "CUDA_VISIBLE_DEVICES": ""}, "optimize", "--model",
                  f"replay:{transcript}", "--ops", "vector_add,RELU", "--dtype", "fp32",
                  "--run", str(run))  # fmt: skip
    assert started.returncode == 0 and started.stdout.count(": needs_gpu") == 2, started.stderr
    bad = cli(fake_gpu, "resume", str(run), "--gpus", "0,7")
    assert bad.returncode == 2 and "there is no GPU 7 (this host has 0, 1)" in bad.stderr
    assert json.loads((run / "run.json").read_text())["gpus"] is None  # nothing changed
    again = cli(fake_gpu, "resume", str(run), "--gpus", "all", "--concurrency", "2")
    # on the stand-in GPUs no kernel runs: both baselines fail, each measured on its own GPU
    assert again.returncode == 1 and again.stdout.count("baseline itself failed") == 2
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["gpus"] == "all" and manifest["concurrency"] == 2
    measured = {json.loads(f.read_text())["baseline"]["gpu"] for f in run.glob("*/evals/full-*")}
    assert measured == {"GPU-fake-0", "GPU-fake-1"}


def test_compare_measure_times_both_runs_bests_on_this_gpu(fake_gpu, tmp_path):
    from optimizer_fakes import finished_run

    a = finished_run(tmp_path, "a", {"vector_add-fp32": "P 2.0"})
    b = finished_run(tmp_path, "b", {"vector_add-fp32": "P 3.0"})
    proc = cli(fake_gpu, "compare", str(a), str(b), "--measure", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    (measured,) = data["measured"]
    # on the stand-in GPU no kernel runs: the fresh session finds both bests wrong, whatever
    # the runs themselves had said (P 2 and 3)
    assert measured["a"]["verdict"] == measured["b"]["verdict"] == "wrong_on_unseen"
    assert measured["a"]["gpu"] == "GPU-fake-0" and measured["a"]["stage"] == "full"
    (row,) = data["rows"]
    assert row["a"] is None and row["status"].startswith("no P in A (wrong_on_unseen)")
    assert data["a_device"] == data["b_device"] == "Fake GPU"
    shown = cli(fake_gpu, "compare", str(a), str(b), "--measure")
    assert shown.returncode == 0 and "measured now on Fake GPU" in shown.stdout
    assert "vector_add fp32 paper: A's round1-c1 wrong_on_unseen" in shown.stderr
    bench = tmp_path / "bench.json"
    bench.write_text("{}")
    bad = cli(fake_gpu, "compare", str(a), str(bench), "--measure")
    assert bad.returncode == 2 and "give two run directories" in bad.stderr
    assert "Traceback" not in bad.stderr
