"""`cudamaster bench` on the GPU: every baseline and every library baseline passes against the
float64 oracle on every case of both suites in both dtypes, and the results land as JSON.

Set CUDAMASTER_BENCH_OPS=a,b to bench only some operators, CUDAMASTER_BENCH_GPUS=all (or 0,2)
to pass --gpus; CUDAMASTER_TEST_OUT keeps the JSON and the printed table."""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu


def test_bench_every_baseline_and_library_passes_every_case(record):
    out_dir = Path(os.environ.get("CUDAMASTER_TEST_OUT") or tempfile.mkdtemp())
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / "bench.json"
    ops = os.environ.get("CUDAMASTER_BENCH_OPS")
    cmd = [sys.executable, "-m", "cudamaster.cli", "-v", "bench", "--out", str(out)]
    cmd += ["--ops", ops] if ops else []
    gpus = os.environ.get("CUDAMASTER_BENCH_GPUS")
    cmd += ["--gpus", gpus] if gpus else []
    log = out_dir / "bench.log"  # the per-phase log, streamed, so a killed run still leaves it
    t0 = time.monotonic()
    with log.open("w") as err:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, check=False)
    wall = time.monotonic() - t0
    (out_dir / "bench.txt").write_text(proc.stdout)
    assert proc.returncode == 0, log.read_text()[-3000:]
    results = json.loads(out.read_text())["results"]
    failures = []
    for r in results:
        rep = r["report"]
        for impl in rep["impls"]:
            for case in impl["cases"]:
                if case["verdict"] != "ok":
                    failures.append(
                        f"{rep['task']} {rep['variant']} {rep['suite']} {impl['label']} "
                        f"case {case['index']}: {case['verdict']} {case['detail'][:200]}"
                    )
    record("bench-summary", {"evaluations": len(results), "wall_s": wall, "failures": failures})
    assert results and not failures, "\n".join(failures)
