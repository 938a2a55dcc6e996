"""`cudamaster bench --impls DIR` on the GPU: a folder of 25 files laid out as MSKernelBench lays
it out (known-good kernels and task baselines copied as <op>.cu and <op>_bf16.cu, one whose entry
is <symbol>_optimized, known-wrong ones from tests/fixtures/wrong_ops, misnamed, non-compiling and
forbidden ones) gives each file its status in one run, and the time the bench took per
implementation is recorded (CUDAMASTER_TEST_OUT keeps the JSON, the tables and the figures).
Also the notebook API's evaluate on a known-good kernel. Device run: `scripts/device-run.sh impls`
(no test name here contains "bench", so the `bench` phase does not run these)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
GOOD = FIXTURES / "good" / "vector_add_grid.cu"
#: task baselines copied as candidates: correct, and as fast as the baseline they are timed beside
BASELINES = ["RELU", "sigmoid", "elu", "selu", "gelu", "leaky_RELU", "matrix_copy", "dot_product",
             "softmax", "rms_norm"]  # fmt: skip
BF16_BASELINES = ["RELU", "softmax", "vector_add"]
WRONG_OPS = ["matrix_transpose", "prefix_sum", "reverse_array", "hinge_loss", "MSE_loss",
             "silu_and_mul"]  # fmt: skip
REFUSED = {"compile_error", "missing_symbol", "forbidden"}


def renamed(source: Path, old: str, new: str) -> str:
    text = source.read_text()
    assert f'extern "C" void {old}(' in text
    return text.replace(f'extern "C" void {old}(', f'extern "C" void {new}(')


def folder(root: Path) -> dict[str, str]:
    """The folder's files, and the status each must get ("rejected": a verdict other than ok)."""
    root.mkdir(parents=True, exist_ok=True)
    expect: dict[str, str] = {}
    shutil.copy(GOOD, root / "vector_add.cu")
    expect["vector_add.cu"] = "ok"
    for op in BASELINES:
        shutil.copy(ROOT / "tasks" / op / "baseline.cu", root / f"{op}.cu")
        expect[f"{op}.cu"] = "ok"
    for op in BF16_BASELINES:
        shutil.copy(ROOT / "tasks" / op / "baseline_bf16.cu", root / f"{op}_bf16.cu")
        expect[f"{op}_bf16.cu"] = "ok"
    (root / "layer_norm.cu").write_text(
        renamed(ROOT / "tasks" / "layer_norm" / "baseline.cu", "layer_norm", "layer_norm_optimized")
    )
    expect["layer_norm.cu"] = "ok"
    for op in WRONG_OPS:
        shutil.copy(FIXTURES / "wrong_ops" / f"{op}.cu", root / f"{op}.cu")
        expect[f"{op}.cu"] = "rejected"
    shutil.copy(ROOT / "tasks" / "RELU" / "baseline.cu", root / "relu_fp16.cu")
    shutil.copy(GOOD, root / "vectoradd.cu")
    expect["relu_fp16.cu"] = expect["vectoradd.cu"] = "misnamed"
    shutil.copy(FIXTURES / "wrong" / "compile_error.cu", root / "row_tanh.cu")
    expect["row_tanh.cu"] = "compile_error"
    (root / "rope.cu").write_text((ROOT / "tasks" / "rope" / "baseline.cu").read_text()
                                  + '\n#include <cstdio>\nextern "C" void leak() '
                                  '{ fopen("/etc/passwd", "r"); }\n')  # fmt: skip
    expect["rope.cu"] = "forbidden"
    return expect


def test_a_folder_of_implementations_gets_every_file_its_status_and_times_each(record):
    out_dir = Path(os.environ.get("CUDAMASTER_TEST_OUT") or tempfile.mkdtemp())
    out_dir.mkdir(parents=True, exist_ok=True)
    impls = Path(tempfile.mkdtemp(prefix="cudamaster-impls-")) / "optimized"
    expect = folder(impls)
    evaluated = sum(v in ("ok", "rejected") for v in expect.values())
    assert len(expect) >= 20 and evaluated >= 20
    out = out_dir / "impls.json"
    cmd = [sys.executable, "-m", "cudamaster.cli", "-v", "bench", "--impls", str(impls),
           "--suite", "paper", "--out", str(out)]  # fmt: skip
    t0 = time.monotonic()
    with (out_dir / "impls.log").open("w") as err:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, check=False)
    wall = time.monotonic() - t0
    (out_dir / "impls.txt").write_text(proc.stdout)
    assert proc.returncode == 0, (out_dir / "impls.log").read_text()[-3000:]
    data = json.loads(out.read_text())
    rows = {f["path"]: f for f in data["impls"]}
    per_file = {p: {k: f[k] for k in ("status", "build_s", "eval_s", "wall_s")}
                | {"P": (f["suites"].get("paper") or {}).get("score"),
                   "noise": (f["suites"].get("paper") or {}).get("noise")}
                for p, f in rows.items()}  # fmt: skip
    timed = [f["wall_s"] for f in rows.values() if f["eval_s"] is not None]
    record("impls-wall", {
        "command": " ".join(cmd[2:]), "files": len(rows), "evaluated": len(timed),
        "command_wall_s": round(wall, 1), "json_wall_s": data["wall_s"],
        "build_s": data["build_s"], "per_evaluated_file_s": round(sum(timed) / len(timed), 2),
        "per_file_s_overall": round(wall / len(rows), 2), "files_detail": per_file,
    })  # fmt: skip
    assert sorted(rows) == sorted(expect)
    wrong = []
    for path, want in expect.items():
        got = rows[path]
        if want == "rejected":
            ok = got["status"] != "ok" and got["status"] not in REFUSED and got["suites"]
        else:
            ok = got["status"] == want
        if not ok:
            wrong.append(f"{path}: {got['status']} (expected {want}): {got['detail'][:300]}")
    assert not wrong, "\n".join(wrong)
    assert rows["layer_norm.cu"]["entry"] == "layer_norm_optimized"
    # a baseline timed beside itself is as fast as itself; the full grid beats one block
    for op in BASELINES:
        p = rows[f"{op}.cu"]["suites"]["paper"]["score"]
        assert 0.8 < p < 1.25, (op, p)
    fast = rows["vector_add.cu"]["suites"]["paper"]
    assert fast["score"] - fast["noise"] > 1.0, fast
    assert all(f["wall_s"] > 0 for f in rows.values() if f["eval_s"] is not None)


def test_the_api_evaluates_a_known_good_kernel(record):
    from cudamaster import api

    t0 = time.monotonic()
    r = api.evaluate("vector_add", GOOD)
    record("api-evaluate", {"verdict": r.verdict, "P": r.score, "noise": r.noise,
                            "P_vs_library": r.library_score, "sol": r.sol,
                            "wall_s": round(time.monotonic() - t0, 1)})  # fmt: skip
    assert r.correct, r.detail
    assert r.score is not None and r.noise is not None and r.score - r.noise > 1.0
    assert r.library_score is not None and r.sol is not None and 0 < r.sol <= 1.5
    assert len(r.cases) == 5 and all(c.time_ms for c in r.cases)
