"""`cudamaster compare A B`: per task B's P over A's, beyond both noises or within them; tasks
in one input only; totals. Inputs: bench JSON (with or without --impls) and optimizer run
directories, read by cudamaster.resultset; bad input is one line and exit code 2."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudamaster.agents import runner
from cudamaster.agents.rundir import RunDir
from cudamaster.compare import BETTER, NOISE_UNKNOWN, ONLY_A, ONLY_B, SAME, WORSE, compare
from cudamaster.errors import UserError
from cudamaster.resultset import load
from results_fixtures import bench_file, bench_result, run_dir
from test_runner_cpu import gpu, replayed


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "cudamaster.cli", *args], capture_output=True,
                          text=True, timeout=120, check=False, env=env)  # fmt: skip


def rows_by_task(comparison) -> dict[tuple[str, str], object]:
    return {(r.op, r.impl): r for r in comparison.rows}


@pytest.fixture
def two_benches(tmp_path) -> tuple[Path, Path]:
    """Library speedups in A and B: vector_add 2 -> 3, RELU 2 -> 1.4, softmax 2 -> 2.02;
    sorting only in A, top_k only in B."""
    a = bench_file(tmp_path / "a.json", bench_result("vector_add", library=2.0),
                   bench_result("RELU", library=2.0), bench_result("softmax", library=2.0),
                   bench_result("sorting", library=2.0))  # fmt: skip
    b = bench_file(tmp_path / "b.json", bench_result("vector_add", library=3.0),
                   bench_result("RELU", library=1.4), bench_result("softmax", library=2.02),
                   bench_result("top_k", library=2.0))  # fmt: skip
    return a, b


def test_each_task_is_better_worse_or_within_the_noise_of_both_runs(two_benches):
    c = compare(load(two_benches[0]), load(two_benches[1]))
    rows = rows_by_task(c)
    assert rows["vector_add", "library"].status == BETTER
    assert rows["vector_add", "library"].ratio == pytest.approx(1.5)
    assert rows["RELU", "library"].status == WORSE
    assert rows["RELU", "library"].ratio == pytest.approx(0.7)
    same = rows["softmax", "library"]
    assert same.status == SAME and same.ratio == pytest.approx(1.01)
    assert same.ratio_u == pytest.approx(  # the relative noises of A and B in quadrature
        same.ratio * math.hypot(same.a_noise / same.a, same.b_noise / same.b)
    )
    assert "baseline" not in {r.impl for r in c.rows}  # P = 1 by definition: nothing to compare


def test_the_same_gain_is_beyond_steady_timings_noise_and_within_noisy_ones(tmp_path):
    """matrix_mul's cases are long (P's noise ~1.3%), softmax's short (~6.5%): a 5% gain is
    real for the first and not for the second."""
    a = bench_file(tmp_path / "a.json", bench_result("matrix_mul", library=2.0),
                   bench_result("softmax", library=2.0))  # fmt: skip
    b = bench_file(tmp_path / "b.json", bench_result("matrix_mul", library=2.1),
                   bench_result("softmax", library=2.1))  # fmt: skip
    rows = rows_by_task(compare(load(a), load(b)))
    assert rows["matrix_mul", "library"].status == BETTER
    assert rows["softmax", "library"].status == SAME
    assert rows["matrix_mul", "library"].ratio == pytest.approx(rows["softmax", "library"].ratio)


def test_tasks_in_one_input_only_are_listed_and_the_totals_count_the_rest(two_benches):
    c = compare(load(two_benches[0]), load(two_benches[1]))
    rows = rows_by_task(c)
    assert rows["sorting", "library"].status == ONLY_A and rows["sorting", "library"].b is None
    assert rows["top_k", "library"].status == ONLY_B and rows["top_k", "library"].b == 2.0
    t = c.totals
    assert (t.compared, t.better, t.worse, t.same, t.only_a, t.only_b) == (3, 1, 1, 1, 1, 1)
    assert t.geomean == pytest.approx((1.5 * 0.7 * 1.01) ** (1 / 3))


def test_a_task_wrong_in_one_run_has_no_ratio_and_is_not_counted(tmp_path):
    a = bench_file(tmp_path / "a.json", bench_result("RELU", library=2.0))
    b = bench_file(tmp_path / "b.json", bench_result("RELU", library=None))
    c = compare(load(a), load(b))
    (row,) = c.rows
    assert row.status == "no P in B (wrong)" and row.ratio is None
    assert c.totals.unscored == 1 and c.totals.compared == 0 and c.totals.geomean is None


def test_an_impls_run_adds_its_kernel_beside_the_library(tmp_path):
    a = bench_file(tmp_path / "a.json", bench_result("RELU", library=2.0))
    b = bench_file(tmp_path / "b.json", bench_result("RELU", library=2.0, mine=3.0))
    assert (load(a).kind, load(b).kind) == ("bench", "impls")
    rows = rows_by_task(compare(load(a), load(b)))
    assert rows["RELU", "library"].status == SAME
    assert rows["RELU", "mine"].status == ONLY_B and rows["RELU", "mine"].b == pytest.approx(3.0)


def test_an_optimizer_run_against_an_impls_run_pairs_the_best_with_the_kernel(tmp_path):
    run = run_dir(tmp_path / "run", {"vector_add-fp32": [1.0, 2.0, 2.5]})
    impls = bench_file(tmp_path / "b.json", bench_result("vector_add", library=2.0, mine=3.5))
    rows = rows_by_task(compare(load(run), load(impls)))
    paired = rows["vector_add", "optimized -> mine"]
    assert paired.status == BETTER and paired.ratio == pytest.approx(3.5 / 2.5)
    # the run's library P is derived from the baseline's per-case ratios: it has no noise
    assert rows["vector_add", "library"].status == NOISE_UNKNOWN
    assert rows["vector_add", "library"].ratio == pytest.approx(1.0)


def test_two_optimizer_runs_compare_their_best_kernels(tmp_path):
    a = run_dir(tmp_path / "a", {"vector_add-fp32": [1.0, 2.0], "RELU-fp32": [1.0, 1.5]})
    b = run_dir(tmp_path / "b", {"vector_add-fp32": [1.0, 2.0, 3.0], "RELU-fp32": [1.0, 1.5]})
    c = compare(load(a), load(b))
    rows = rows_by_task(c)
    assert rows["vector_add", "optimized"].status == BETTER
    assert rows["RELU", "optimized"].status == SAME
    assert c.totals.compared == 2 and c.totals.geomean == pytest.approx(1.5**0.5)


def test_an_optimizer_run_is_read_with_its_trajectory_and_library(tmp_path):
    loaded = load(run_dir(tmp_path / "run", {"vector_add-fp32": [1.0, 2.0, 2.5]}, library=4.0))
    (task,) = loaded.tasks
    assert (loaded.kind, str(task.key), task.trajectory) == ("run", "vector_add fp32 paper",
                                                             [1.0, 2.0, 2.5])  # fmt: skip
    best = task.impl("optimized")
    assert best.score == pytest.approx(2.5) and best.detail == "best: r2c1"
    assert best.success.score == pytest.approx(2.5)
    assert task.library.score == pytest.approx(4.0) and task.library.noise is None
    assert task.library.sol == pytest.approx(0.1 * 4.0)  # 4x the baseline's 10% of the SOL


def test_a_run_the_optimizer_made_is_read_as_it_left_it(tmp_path):
    run = replayed(tmp_path, ["vector_add-fp32"], markers=("P 2.5",))
    runner.execute(RunDir(run), backends=gpu())
    (task,) = load(run).tasks
    assert task.trajectory == pytest.approx([1.0, 2.5]) and task.status == "done"
    assert task.impl("optimized").score == pytest.approx(2.5)
    assert task.impl("baseline").score == pytest.approx(1.0)


def test_one_eval_json_is_read_as_one_task(tmp_path):
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(bench_result("RELU", "bf16", "large", candidate=1.5), default=str))
    (task,) = load(path).tasks
    assert str(task.key) == "RELU bf16 large"
    assert task.impl("candidate").score == pytest.approx(1.5)


# -- the command ----------------------------------------------------------------------------
def test_the_command_prints_the_table_and_the_totals(two_benches):
    proc = cli("compare", *map(str, two_benches))
    assert proc.returncode == 0, proc.stderr
    assert "better" in proc.stdout and "worse" in proc.stdout and "only in B" in proc.stdout
    assert "3 compared: geometric mean of B/A 1.0" in proc.stdout
    assert "1 better, 1 worse, 1 within noise; 1 only in A, 1 only in B" in proc.stdout


def test_the_command_prints_json(two_benches):
    proc = cli("compare", *map(str, two_benches), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["a"] == str(two_benches[0]) and data["totals"]["better"] == 1
    row = next(r for r in data["rows"] if r["op"] == "vector_add")
    assert row["ratio"] == pytest.approx(1.5) and row["status"] == "better"


def test_the_command_says_when_the_runs_come_from_different_gpus(tmp_path, two_benches):
    same = cli("compare", *map(str, two_benches))
    assert same.returncode == 0 and "note:" not in same.stdout
    other = bench_file(tmp_path / "h200.json", bench_result("RELU", library=2.0), gpu="H200")
    proc = cli("compare", str(two_benches[0]), str(other))
    assert proc.returncode == 0, proc.stderr
    assert "note: A ran on test GPU, B on H200" in proc.stdout


def _one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "no such file or directory"),
        ("{not json", "is not JSON"),
        ('{"tasks": []}', "not bench JSON"),
        ('{"results": [{"report": {"task": "RELU"}}]}', "result 0 is not a bench result"),
        ('{"results": [{"report": {"task": "RELU", "variant": "fp32", "suite": "paper"}, '
         '"scores": [{"label": "library", "verdict": "ok", "score": "fast", "cases": []}]}]}',
         "expected a number"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(tmp_path, two_benches, content, needle):
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    _one_line_error(cli("compare", str(two_benches[0]), str(bad)), str(bad), needle)


def test_a_folder_that_is_no_run_directory_is_one_line(tmp_path, two_benches):
    _one_line_error(cli("compare", str(tmp_path), str(two_benches[1])), "not a run directory")


def test_the_loader_says_what_a_corrupt_run_is(tmp_path):
    run = run_dir(tmp_path / "run", {"vector_add-fp32": [1.0, 2.0]})
    (run / "vector_add-fp32" / "state.json").write_text("{")
    with pytest.raises(UserError, match="run directory whose files cannot be read"):
        load(run)
