"""`cudamaster bench`, `eval` and `device` end to end on the CPU: a stand-in nvidia-smi, cached
device facts and a CPU stand-in for libcudart on which kernel launches do nothing, so every
baseline's output stays poisoned and must be judged wrong. This exercises the whole command
path (build, checks, workers, verdicts, scores, tables, JSON) without a GPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudamaster.bench.build import nvcc_version

FAKE = Path(__file__).parent / "fixtures" / "fake_cuda"
GOOD = Path(__file__).parent / "fixtures" / "good" / "vector_add_grid.cu"
pytestmark = pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc")


@pytest.fixture
def fake_gpu(tmp_path):
    runtime = tmp_path / "libcudart.so.13"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wl,-soname,libcudart.so.13", "-o",
                    str(runtime), str(FAKE / "fake_cudart.c")], check=True)  # fmt: skip
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(  # two GPUs: listed by index, described one at a time with -i
        '#!/bin/sh\ncase "$*" in\n'
        "  *index,uuid,name*) printf '0, GPU-fake-0, Fake GPU\\n1, GPU-fake-1, Fake GPU\\n' ;;\n"
        "  *'-i 1'*) echo 'Fake GPU, GPU-fake-1, 1.0, 9.0, 1024' ;;\n"
        "  *) echo 'Fake GPU, GPU-fake-0, 1.0, 9.0, 1024' ;;\nesac\n"
    )
    smi.chmod(0o755)
    cache = tmp_path / "cache"
    cache.mkdir()
    facts = {"name": "Fake GPU", "uuid": "GPU-fake-0", "driver": "1.0", "nvcc": nvcc_version(),
             "compute_capability": "90", "sm_count": 4, "l2_bytes": 1 << 20, "memory_mib": 1024,
             "copy_gbs": 100.0, "fp32_tflops": 1.0, "bf16_tflops": 2.0}  # fmt: skip
    (cache / "device-GPU-fake-0.json").write_text(json.dumps(facts))
    (cache / "device-GPU-fake-1.json").write_text(json.dumps({**facts, "uuid": "GPU-fake-1"}))
    comparer = tmp_path / "compare_host.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(comparer),
                    str(FAKE / "compare_host.c")], check=True)  # fmt: skip
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "CUDAMASTER_CUDART": str(runtime), "CUDAMASTER_CACHE": str(cache),
           "CUDAMASTER_COMPARER": str(comparer)}  # fmt: skip
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


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
    assert base["verdict"] == "wrong" and "NaN" in base["detail"]  # launches did nothing
    assert all(c["verdict"] == "wrong" for c in base["cases"])
    assert impls["library"]["verdict"] in ("compile_error", "load_error", "wrong")
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
    proc = cli(fake_gpu, "eval", "vector_add", str(GOOD), "--cases", "0", "--json")
    assert proc.returncode == 1, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    cand = next(i for i in data["report"]["impls"] if i["label"] == "candidate")
    assert cand["verdict"] == "wrong" and cand["cases"][0]["seeds"]


def test_optimize_resume_and_results_commands_run_end_to_end(fake_gpu, tmp_path):
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        json.dumps({"key": "vector_add-fp32/round1/planner", "text": "plan"}) + "\n"
    )
    run = tmp_path / "run"
    proc = cli(fake_gpu, "optimize", "--model", f"replay:{transcript}", "--ops", "vector_add",
               "--rounds", "1", "--run", str(run))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    # on the stand-in GPU no kernel runs, so the baseline itself fails and the task stops there
    assert "vector_add-fp32: failed" in proc.stdout and "baseline itself failed" in proc.stdout
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["model"].startswith("replay:") and manifest["options"]["rounds"] == 1
    assert "KEY" not in json.dumps(manifest).upper()
    again = cli(fake_gpu, "resume", str(run))
    assert again.returncode == 0 and "vector_add-fp32: failed" in again.stdout
    res = cli(fake_gpu, "results", str(run), "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    rows = json.loads(res.stdout)
    assert rows["tasks"][0]["status"] == "failed" and rows["success"][0]["solved"] == 0
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
