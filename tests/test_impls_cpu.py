"""`bench --impls DIR` and `eval --entry` on the CPU (tests/conftest.py's fake GPU: kernel launches
do nothing, so every kernel that runs is judged wrong; what these tests prove is that each file
is scanned, refused or evaluated as it should be, and that no file ends the run).

A folder laid out as MSKernelBench lays it out (<op>.cu for FP32, <op>_bf16.cu for BF16) gives
one row per .cu file with its status: misnamed files, refusals before running (compile_error,
missing_symbol, forbidden) and evaluations (a verdict, the scores per suite, the wall time) side
by side; kernels named <symbol>_optimized are called by that name."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from conftest import fake_gpu_env, one_line_error
from cudamaster.bench.evaluate import Impl, ImplResult, prepare
from cudamaster.bench.impls import MISNAMED, ImplFile, parse_name, scan, summarize
from cudamaster.report import CaseScore, ImplScore
from cudamaster.tasks import discover, get_task

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
GOOD = FIXTURES / "good" / "vector_add_grid.cu"
WRONG = FIXTURES / "wrong"
ARCH = "sm_90a"
#: what a kernel that ran is judged on the fake GPU, whose launches do nothing: its outputs keep
#: the harness's NaN poison, found on the first unseen case (or the first case without them)
RAN = {"wrong_on_unseen", "wrong"}
needs_gcc = pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc (the fake GPU)")


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    return subprocess.run([sys.executable, "-m", "cudamaster.cli", *args], capture_output=True,
                          text=True, env=env or dict(os.environ), cwd=cwd, timeout=900,
                          check=False)  # fmt: skip


def renamed(source: Path, old: str, new: str) -> str:
    """``source``'s text with its extern "C" entry ``old`` renamed ``new``."""
    text = source.read_text()
    assert f'extern "C" void {old}(' in text
    return text.replace(f'extern "C" void {old}(', f'extern "C" void {new}(')


def mixed_folder(root: Path) -> Path:
    """A folder with a file of every kind: a good kernel, a known-wrong one, a BF16 one, one
    whose entry is <symbol>_optimized, one that does not compile, one without the entry, one that
    opens a file, two misnamed ones and a second FP32 RELU in a subfolder."""
    d = root / "impls"
    (d / "more").mkdir(parents=True)
    shutil.copy(GOOD, d / "vector_add.cu")
    shutil.copy(FIXTURES / "wrong_ops" / "RELU.cu", d / "RELU.cu")
    shutil.copy(ROOT / "tasks" / "RELU" / "baseline_bf16.cu", d / "RELU_bf16.cu")
    (d / "elu.cu").write_text(renamed(ROOT / "tasks" / "elu" / "baseline.cu", "elu",
                                      "elu_optimized"))  # fmt: skip
    shutil.copy(WRONG / "compile_error.cu", d / "sigmoid.cu")
    shutil.copy(WRONG / "wrong_symbol.cu", d / "matrix_copy.cu")
    (d / "selu.cu").write_text((ROOT / "tasks" / "selu" / "baseline.cu").read_text()
                               + '\n#include <cstdio>\nextern "C" void leak() '
                               '{ fopen("/etc/passwd", "r"); }\n')  # fmt: skip
    shutil.copy(ROOT / "tasks" / "RELU" / "baseline.cu", d / "relu_fp16.cu")
    shutil.copy(ROOT / "tasks" / "RELU" / "baseline.cu", d / "vectoradd.cu")
    shutil.copy(ROOT / "tasks" / "RELU" / "baseline.cu", d / "more" / "RELU.cu")
    return d


@pytest.fixture(scope="module")
def gpu(tmp_path_factory) -> dict[str, str]:
    """One fake-GPU environment for the module, so that its builds are cached once."""
    return fake_gpu_env(tmp_path_factory.mktemp("fake_gpu"))


# -- the folder: every file a row, the run going on past each -----------------------------------
@needs_gcc
def test_a_folder_gives_one_row_per_file_with_its_status_and_the_run_goes_on(gpu, tmp_path):
    d = mixed_folder(tmp_path)
    out = tmp_path / "bench.json"
    proc = cli("bench", "--impls", str(d), "--suite", "paper", "--out", str(out), env=gpu)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    rows = {f["path"]: f for f in data["impls"]}
    # every .cu file of the folder, and only those, once each
    assert sorted(rows) == sorted(p.relative_to(d).as_posix() for p in d.rglob("*.cu"))
    status = {p: f["status"] for p, f in rows.items()}
    # evaluated (the fake GPU runs no kernel, so each is judged wrong: it ran, which is the point)
    for path in ("vector_add.cu", "RELU.cu", "RELU_bf16.cu", "elu.cu"):
        assert status[path] in RAN, (path, rows[path])
        assert list(rows[path]["suites"]) == ["paper"]
        assert rows[path]["eval_s"] > 0 and rows[path]["wall_s"] >= rows[path]["eval_s"]
    assert rows["RELU_bf16.cu"]["dtype"] == "bf16" and rows["RELU_bf16.cu"]["entry"] == "RELU_bf16"
    assert rows["elu.cu"]["entry"] == "elu_optimized"  # MSKernelBench's optimized kernels
    # refused before running, each with its reason
    assert status["sigmoid.cu"] == "compile_error" and "error" in rows["sigmoid.cu"]["detail"]
    assert status["matrix_copy.cu"] == "missing_symbol"
    assert 'extern "C" matrix_copy' in rows["matrix_copy.cu"]["detail"]
    assert status["selu.cu"] == "forbidden" and "fopen" in rows["selu.cu"]["detail"]
    # named for no operator and dtype, or a second file for one
    assert status["relu_fp16.cu"] == status["vectoradd.cu"] == MISNAMED
    assert "'fp16' names no dtype" in rows["relu_fp16.cu"]["detail"]
    assert "did you mean vector_add.cu" in rows["vectoradd.cu"]["detail"]
    assert status["more/RELU.cu"] == "duplicate"
    # one evaluation per evaluated file, in bench's schema: the file beside its baseline and
    # library in one session, labelled by the folder's name (one implementation across tasks)
    by_file = {r["file"]: r for r in data["results"]}
    assert set(by_file) == {"vector_add.cu", "RELU.cu", "RELU_bf16.cu", "elu.cu"}
    for path, result in by_file.items():
        labels = [i["label"] for i in result["report"]["impls"]]
        assert labels == ["baseline", "library", d.name]
        assert result["report"]["impls"][-1]["source"].endswith(path)
        assert {"report", "scores", "device_facts"} <= set(result)
    called = {i["label"]: i["entry"] for i in by_file["elu.cu"]["report"]["impls"]}
    assert called == {"baseline": "elu", "library": "elu", d.name: "elu_optimized"}
    assert data["impls_dir"] == str(d) and data["impls_mean_wall_s"] > 0
    assert "implementations in" in proc.stdout and "selu.cu" in proc.stdout


@needs_gcc
def test_ops_naming_an_operator_without_a_file_gives_a_missing_row(gpu, tmp_path):
    d = tmp_path / "impls"
    d.mkdir()
    shutil.copy(WRONG / "compile_error.cu", d / "vector_add.cu")
    shutil.copy(ROOT / "tasks" / "RELU" / "baseline.cu", d / "RELU.cu")
    out = tmp_path / "bench.json"
    proc = cli("bench", "--impls", str(d), "--ops", "vector_add,gelu", "--dtype", "fp32",
               "--out", str(out), env=gpu)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    rows = {f["path"]: f for f in data["impls"]}
    assert rows["gelu.cu"]["status"] == "missing" and "has no gelu.cu" in rows["gelu.cu"]["detail"]
    assert rows["vector_add.cu"]["status"] == "compile_error"
    assert rows["RELU.cu"]["status"] == "not_selected"  # outside --ops: listed, not evaluated
    assert data["results"] == []  # nothing ran, and the file says so all the same
    assert "0 evaluations" in proc.stdout and "1 missing" in proc.stdout


def a_file(path: Path) -> Path:
    path.write_text("")
    return path


@pytest.mark.parametrize(
    ("make", "needles"),
    [
        (lambda d: d / "nowhere", ("no such folder",)),
        (lambda d: d, ("holds no .cu file", "<op>.cu (FP32)")),
        (lambda d: a_file(d / "x.cu"), ("is a file",)),
    ],
    ids=["missing", "no_cu_files", "a_file"],
)
def test_a_folder_that_is_not_one_of_implementations_is_one_line_and_exit_2(
    make, needles, tmp_path
):
    folder = make(tmp_path)
    (tmp_path / "notes.txt").write_text("no kernels here")
    one_line_error(cli("bench", "--impls", str(folder), cwd=tmp_path), "--impls", *needles)
    assert not (tmp_path / "results").exists()  # nothing created


def test_impls_on_ray_is_refused_in_one_line(tmp_path):
    one_line_error(cli("bench", "--impls", str(tmp_path), "--ray", "auto", cwd=tmp_path),
                   "--impls runs on this host's GPUs")  # fmt: skip


# -- names and statuses, without a GPU -----------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("RELU.cu", ("RELU", "fp32")),
        ("RELU_bf16.cu", ("RELU", "bf16")),
        ("square_matrix_mul_bf16.cu", ("square_matrix_mul", "bf16")),
    ],
)
def test_an_operators_file_names_its_operator_and_dtype(name, expected):
    assert parse_name(name, discover())[:2] == expected


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("RELU_fp16.cu", "'fp16' names no dtype of the benchmark: RELU.cu is the FP32"),
        ("relu.cu", "case-sensitive: did you mean RELU.cu?"),
        ("relu_BF16.cu", "did you mean RELU_bf16.cu?"),
        ("RELU_optimized.cu", "'optimized' names no dtype"),
        ("test_RELU_bf16.cu", "a test program, not an implementation"),
        ("softmx.cu", "names no operator (did you mean softmax.cu?)"),
        ("kernel.cu", "names no operator"),
    ],
)
def test_a_misnamed_file_says_why(name, reason):
    op, dtype, why = parse_name(name, discover())
    assert (op, dtype) == (None, None) and reason in why and why.startswith(name)


def test_scan_lists_every_cu_file_and_only_the_selected_ones_are_pending(tmp_path):
    for name in ("RELU.cu", "RELU_bf16.cu", "elu.cu", "notes.txt", "relu_fp16.cu"):
        (tmp_path / name).write_text("")
    files = scan(tmp_path, [get_task("RELU")], ["fp32"], named=False)
    assert [(f.path, f.status) for f in files] == [
        ("RELU.cu", "pending"),
        ("RELU_bf16.cu", "not_selected"),  # --dtype fp32
        ("elu.cu", "not_selected"),  # outside --ops
        ("relu_fp16.cu", "misnamed"),
    ]  # and no row for notes.txt: only .cu files are implementations
    named = scan(tmp_path, [get_task("RELU"), get_task("gelu")], ["fp32", "bf16"], named=True)
    assert [f.path for f in named if f.status == "missing"] == ["gelu.cu", "gelu_bf16.cu"]


def test_a_file_row_round_trips_through_json():
    f = ImplFile("RELU.cu", "RELU", "fp32", "ok", entry="RELU", build_s=1.0, eval_s=2.0, wall_s=3.0)
    f.suites["paper"] = summarize(score(speedups=[2.0, 2.0], library=[1.0, 1.0]))
    back = ImplFile.from_dict(json.loads(json.dumps(asdict(f))))
    assert back.suites["paper"].score == pytest.approx(2.0) and back.wall_s == 3.0


def score(speedups: list[float], library: list[float | None], weights=(1, 3)) -> ImplScore:
    cases = [
        CaseScore(index=i, label=f"N={i}", complexity=w, time_ms=1.0, hot_ms=None, spread=0.01,
                  vs_baseline=s, vs_library=lib, sol_fraction=0.1 * (i + 1), verdict="ok",
                  vs_baseline_u=0.01, vs_library_u=0.02 if lib is not None else None)
        for i, (w, s, lib) in enumerate(zip(weights, speedups, library, strict=True))
    ]  # fmt: skip
    total = sum(weights)
    p = sum(w * s for w, s in zip(weights, speedups, strict=True)) / total
    return ImplScore("x.cu", "ok", "", p, None, cases, noise=0.01)


def test_p_against_the_library_weighs_the_cases_as_p_against_the_baseline_does():
    s = summarize(score(speedups=[2.0, 4.0], library=[1.0, 3.0]))
    assert s.score == pytest.approx((2 * 1 + 4 * 3) / 4)
    assert s.library_score == pytest.approx((1 * 1 + 3 * 3) / 4)
    assert s.library_noise == pytest.approx(0.02)
    assert s.sol == pytest.approx(0.2)  # on the heaviest case (complexity 3)
    assert summarize(score([2.0, 4.0], [1.0, None])).library_score is None  # a case untimed


# -- the entry: --entry, <symbol>_optimized -----------------------------------------------------
def test_prepare_looks_the_entry_up_under_the_name_given(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(renamed(GOOD, "vector_add", "my_add"))
    ok = ImplResult("c", str(src))
    prepare(Impl("c", src, entry="my_add"), ARCH, "vector_add", ok)
    assert ok.verdict == "pending" and ok.entry == "my_add"
    missing = ImplResult("c", str(src))
    prepare(Impl("c", src), ARCH, "vector_add", missing)
    assert missing.verdict == "missing_symbol" and missing.entry == "vector_add"


def test_the_profile_target_calls_the_entry_given(tmp_path):
    from cudamaster.profile.run import target_spec

    src = tmp_path / "k.cu"
    src.write_text(renamed(GOOD, "vector_add", "my_add"))
    task = get_task("vector_add")
    spec = target_spec(task, "fp32", Impl("c", src, entry="my_add"), ARCH,
                       task.cases("paper")[0], tmp_path / "work")  # fmt: skip
    assert spec.load.symbol == "my_add"


@needs_gcc
def test_eval_entry_finds_a_kernel_under_another_name(gpu, tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(renamed(GOOD, "vector_add", "my_add"))
    proc = cli("eval", "vector_add", str(src), "--entry", "my_add", "--cases", "0", "--unseen",
               "0", "--json", env=gpu)  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]  # it ran (the fake GPU: judged wrong)
    cand = next(i for i in json.loads(proc.stdout)["report"]["impls"] if i["label"] == "candidate")
    assert cand["entry"] == "my_add" and cand["verdict"] == "wrong"
    assert 'defines extern "C" my_add' in proc.stderr


def test_a_wrong_entry_is_a_missing_symbol_verdict_naming_it():
    one_line_error(cli("eval", "vector_add", str(GOOD), "--entry", "vector_add_fast"),
                   'missing_symbol: vector_add_grid.cu does not define extern "C" '
                   "vector_add_fast", "instead of the operator's vector_add")  # fmt: skip


def test_eval_of_an_optimized_kernel_without_entry_says_which_to_name(tmp_path):
    src = tmp_path / "RELU.cu"
    src.write_text(renamed(ROOT / "tasks" / "RELU" / "baseline.cu", "RELU", "RELU_optimized"))
    one_line_error(cli("eval", "RELU", str(src)), "missing_symbol",
                   "it defines RELU_optimized", "--entry RELU_optimized")  # fmt: skip
