"""Scores and tables from an evaluation report (synthetic timings, no GPU)."""

import json

import pytest
from rich.console import Console

from conftest import DEVICE_EXTRAS
from cudamaster.bench.evaluate import CaseResult, EvalReport, ImplResult
from cudamaster.bench.timing import TimingStats
from cudamaster.cli import _bench_row
from cudamaster.device import DeviceFacts
from cudamaster.report import ResultsFile, case_table, report_json, score_impl
from cudamaster.tasks import get_task

DEVICE = DeviceFacts(
    name="test GPU",
    uuid="GPU-0",
    driver="1",
    nvcc="13.0",
    compute_capability="90",
    sm_count=132,
    l2_bytes=60 << 20,
    memory_mib=1,
    copy_gbs=4000.0,
    fp32_tflops=50.0,
    bf16_tflops=800.0,
    **DEVICE_EXTRAS,
)


def _impl(label, times_ms, verdicts=None):
    task = get_task("vector_add")
    cases = []
    for i, case in enumerate(task.cases("paper")[: len(times_ms)]):
        c = CaseResult(i, dict(case.params), task.complexity(case.params), [1, 2, 3])
        c.verdict = verdicts[i] if verdicts else "ok"
        if c.verdict == "ok":
            t = times_ms[i]
            c.cold = TimingStats(t, 0.01 * t, t, t, 10)
            c.hot = TimingStats(t / 2, 0.0, t / 2, t / 2, 10)
        cases.append(c)
    verdict = "ok" if all(c.verdict == "ok" for c in cases) else "wrong"
    return ImplResult(label, f"{label}.cu", verdict=verdict, cases=cases)


def _report(*impls):
    return EvalReport("vector_add", "fp32", "paper", 0, "sm_90", {}, list(impls))


def test_scores_weight_speedups_by_complexity():
    task = get_task("vector_add")
    report = _report(_impl("baseline", [1.0, 4.0]), _impl("candidate", [0.5, 1.0]))
    s = score_impl(task, report, report.impl("candidate"), DEVICE)
    assert [c.vs_baseline for c in s.cases] == [2.0, 4.0]
    # T = N: 1024 and 4096
    assert s.score == pytest.approx((1024 * 2 + 4096 * 4) / (1024 + 4096))
    assert s.geomean == pytest.approx(8**0.5)
    # speed of light of case 0: 3*1024*4 bytes at 4000 GB/s = 3.072e-6 ms, over 0.5 ms
    assert s.cases[0].sol_fraction == pytest.approx(3 * 1024 * 4 / 4000e9 * 1e3 / 0.5)


def test_an_incorrect_implementation_gets_no_score():
    task = get_task("vector_add")
    report = _report(_impl("baseline", [1.0, 4.0]), _impl("candidate", [0.5, 1.0], ["ok", "wrong"]))
    s = score_impl(task, report, report.impl("candidate"), DEVICE)
    assert s.score is None and s.geomean is None
    assert s.cases[1].vs_baseline is None and s.cases[0].vs_baseline == 2.0


def test_tables_and_json_render():
    task = get_task("vector_add")
    report = _report(_impl("baseline", [1.0, 4.0]), _impl("library", [0.1, 0.2]))
    scores = [score_impl(task, report, i, DEVICE) for i in report.impls]
    console = Console(record=True, width=200)
    console.print(case_table(task, report, scores))
    text = console.export_text()
    assert "library" in text and "10.00" in text  # 1.0 / 0.1
    data = json.loads(json.dumps(report_json(task, report, DEVICE), default=str))
    assert data["scores"][1]["score"] == pytest.approx((1024 * 10 + 4096 * 20) / 5120)
    row = _bench_row("vector_add", "fp32", "paper", {s.label: s for s in scores})
    assert row[3] == "2/2 ok" and row[7] == f"{(1024 * 10 + 4096 * 20) / 5120:.3g}"


def test_a_results_file_rewritten_as_results_come_holds_every_result_and_the_latest_fields(
    tmp_path,
):
    path = tmp_path / "sub" / "bench.json"
    saved = ResultsFile(path)
    saved.write()
    assert json.loads(path.read_text()) == {"results": []}
    first = {"task": "vector_add", "times": [1.5, float("inf")], "path": tmp_path}
    saved.add(first)
    saved.write(wall_s=1.0, device={"name": "GPU"})
    saved.add({"task": "RELU", "quote": 'a "b" }'})
    saved.write(wall_s=2.0, device={"name": "GPU"})
    data = json.loads(path.read_text())
    assert data["wall_s"] == 2.0 and data["device"] == {"name": "GPU"}
    assert [r["task"] for r in data["results"]] == ["vector_add", "RELU"]
    assert data["results"][0]["path"] == str(tmp_path) and data["results"][1]["quote"] == 'a "b" }'
    assert not path.with_suffix(".json.tmp").exists()
