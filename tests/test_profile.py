"""The profile filter on the CPU: Otsu, classes, summaries, the metric table, ncu CSV parsing."""

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from cudamaster.errors import UserError
from cudamaster.profile import classify, ncu
from cudamaster.profile.metrics import TABLE, metric_ids
from cudamaster.profile.otsu import otsu
from cudamaster.profile.summary import CLASS_METRICS, render

#: the Hopper metric names the table draws on, from `ncu --query-metrics` (an extract)
HOPPER_METRICS = Path(__file__).parent / "fixtures" / "ncu" / "hopper_metric_names.txt"


def test_otsu_splits_two_clusters_at_the_gap():
    split = otsu([1, 2, 3, 10, 11, 12])
    assert split.threshold == 6.5 and (split.low_count, split.high_count) == (3, 3)
    # between-class variance 0.25*9^2 = 20.25 over total variance 125.5/6
    assert split.separability == pytest.approx(20.25 / (125.5 / 6))


def test_otsu_threshold_sits_in_the_empty_gap_not_at_a_bin_centre():
    # k=3: 0.6*0.4*50.5^2 = 612.06; k=4: 0.8*0.2*99.75^2 = 1592.0 -> split before 100
    split = otsu([0, 0, 0, 1, 100])
    assert split.threshold == 50.5 and split.low_count == 4
    # a 10-bin histogram would put it at a bin centre (45 or 55), not at the gap's midpoint
    assert otsu([10, 10.2, 10.4, 90, 90.5]).threshold == pytest.approx(50.2)


def test_otsu_never_splits_equal_values_and_needs_two_distinct():
    assert otsu([5, 5, 5, 5, 7]).threshold == 6.0
    with pytest.raises(ValueError):
        otsu([3, 3, 3])


SM, MEM, DRAM = classify.SM, classify.MEMORY, classify.DRAM


def test_classes_follow_the_method():
    th = classify.DEFAULT
    assert classify.classify({SM: 60, MEM: 90}, th) == classify.COMPUTE
    assert classify.classify({SM: 10, DRAM: 80, MEM: 20}, th) == classify.BANDWIDTH
    assert classify.classify({SM: 10, DRAM: 5, MEM: 45}, th) == classify.BANDWIDTH
    assert classify.classify({SM: 10, DRAM: 5, MEM: 12}, th) == classify.LATENCY
    assert "default 30%" in th.source


def test_calibration_uses_otsu_on_both_axes(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDAMASTER_CACHE", str(tmp_path))
    samples = [{SM: s, MEM: m} for s, m in [(5, 80), (8, 85), (70, 20), (75, 30), (6, 7)]]
    th = classify.calibrate(samples)
    assert th.calibrated and th.samples == 5
    assert 8 < th.compute < 70 and 30 < th.memory < 80
    classify.save(th, _device("NVIDIA H100 80GB HBM3", "GPU-x"))
    assert classify.load(_device("NVIDIA H100 80GB HBM3", "GPU-x")) == th
    assert classify.load(_device("NVIDIA H100 80GB HBM3", "GPU-new-machine")) == th  # same model
    assert classify.load(_device("NVIDIA H200", "GPU-x")) == classify.DEFAULT


def test_thresholds_an_earlier_version_stored_by_uuid_still_serve_that_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDAMASTER_CACHE", str(tmp_path))
    th = classify.Thresholds(41.0, 25.0, calibrated=True, samples=100)
    (tmp_path / "thresholds-GPU-old.json").write_text(json.dumps(asdict(th)))
    assert classify.load(_device("NVIDIA H100 80GB HBM3", "GPU-old")) == th
    assert classify.load(_device("NVIDIA H100 80GB HBM3", "GPU-other")) == classify.DEFAULT


def _device(name: str, uuid: str):
    from conftest import DEVICE_EXTRAS
    from cudamaster.device import DeviceFacts

    return DeviceFacts(name=name, uuid=uuid, driver="1", nvcc="13", compute_capability="90",
                       sm_count=4, l2_bytes=1, memory_mib=1, copy_gbs=1.0, fp32_tflops=1.0,
                       bf16_tflops=1.0, **DEVICE_EXTRAS)  # fmt: skip


VALUES = {m.id: 12.5 for m in TABLE} | {SM: 70.0, "gpu__time_duration.sum": 25_000.0}


def test_filtered_summary_has_the_class_metrics_launch_and_top_stalls():
    s = render(VALUES, "filtered", classify.DEFAULT)
    assert s.bottleneck == classify.COMPUTE
    for label in CLASS_METRICS[classify.COMPUTE]:
        assert label in s.text
    assert "Registers per thread" in s.text and "Top warp stalls" in s.text
    assert "DRAM throughput" not in s.text  # not for a compute-bound kernel
    full = render(VALUES, "full", classify.DEFAULT)
    assert all(m.label in full.text for m in TABLE)
    assert s.tokens and full.tokens and s.tokens < full.tokens
    none = render(VALUES, "none", classify.DEFAULT)
    assert none.text == "" and none.tokens == 0


def test_metric_ids_are_unique_and_known_to_ncu_on_hopper():
    ids = metric_ids()
    assert len(ids) == len(set(ids))
    lines = HOPPER_METRICS.read_text().splitlines()
    known = {ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")}
    unknown = [m.id for m in TABLE if not m.id.startswith("launch__") and m.base not in known]
    unknown = [u for u in unknown if u != "sm__maximum_warps_per_active_cycle_pct"]
    assert not unknown


HEADER = (
    '"ID","Process ID","Kernel Name","gpu__time_duration.sum",'
    '"sm__throughput.avg.pct_of_peak_sustained_elapsed","dram__bytes_read.sum","launch__block_size"'
)
CSV = f"""==PROF== Connected to process 123
{HEADER}
"","","","nsecond","%","byte",""
"0","123","k1(float*)","1,000","10.00","2,048","256"
"1","123","k2(float*)","3,000","50.00","1,024","128"
"""


def test_parse_ncu_csv_with_thousands_separators_and_aggregate():
    kernels = ncu.parse_csv(CSV)
    assert [k.name for k in kernels] == ["k1(float*)", "k2(float*)"]
    assert kernels[0].values["gpu__time_duration.sum"] == 1000.0
    agg = ncu.aggregate(kernels)
    assert agg["gpu__time_duration.sum"] == 4000.0  # durations add up
    assert agg["dram__bytes_read.sum"] == 3072.0  # bytes add up
    assert agg[SM] == pytest.approx((10 * 1000 + 50 * 3000) / 4000)  # duration-weighted
    assert agg["launch__block_size"] == 128.0  # the longest kernel's launch


def test_failures_give_a_reason_not_an_exception(monkeypatch, tmp_path):
    assert "ERR_NVGPUCTRPERM" in ncu.explain_failure("==ERROR== ERR_NVGPUCTRPERM - no", 1)
    assert "crashed" in ncu.explain_failure("==WARNING== No kernels were profiled.", 0)
    monkeypatch.setattr(ncu, "ncu_path", lambda: None)
    result = ncu.run_ncu({}, tmp_path)
    assert not result.ok and "ncu" in result.error


def test_metrics_ncu_does_not_know_are_found_in_its_output():
    ids = ["sm__throughput.avg.pct_of_peak_sustained_elapsed", "launch__block_size"]
    out = "==ERROR== Failed to find metric launch__block_size\n==PROF== other"
    assert ncu.unknown_metrics(out, ids) == ["launch__block_size"]
    assert ncu.unknown_metrics("==PROF== fine", ids) == []


REAL_CSV = Path(__file__).parent / "fixtures" / "ncu" / "rms_norm-fp32-h200.csv"


def test_a_real_ncu_csv_from_the_h200_parses_aggregates_and_summarizes():
    # recorded by tests/gpu/test_profile_gpu.py: rms_norm's baseline, two kernels, on an H200
    kernels = ncu.parse_csv(REAL_CSV.read_text())
    assert [k.name.split("(")[0] for k in kernels] == ["rms_sumsq_kernel", "rms_apply_kernel"]
    assert [k.values["gpu__time_duration.sum"] for k in kernels] == [2624.0, 3008.0]
    agg = ncu.aggregate(kernels)
    assert agg["gpu__time_duration.sum"] == 5632.0
    assert agg["launch__grid_size"] == 4.0  # the longer kernel's launch
    measured = [m.id for m in TABLE if m.id in agg]
    assert len(measured) >= 0.9 * len(TABLE), sorted(set(metric_ids()) - set(agg))
    filtered = render(agg, "filtered", classify.DEFAULT)
    full = render(agg, "full", classify.DEFAULT)
    assert filtered.bottleneck == "memory-latency-bound"  # a few blocks, far from every roof
    assert "Duration: 5.63 us" in filtered.text and "Top warp stalls: " in filtered.text
    assert filtered.tokens is not None and full.tokens is not None
    assert filtered.tokens < full.tokens


def test_a_multi_kernel_profile_shows_each_kernel_with_its_share_of_the_time():
    kernels = ncu.parse_csv(REAL_CSV.read_text())
    text = render(ncu.aggregate(kernels), "filtered", classify.DEFAULT, kernels).text
    lines = text.splitlines()
    at = lines.index("Kernels: 2 launched; the longest 2:")
    assert lines[at + 1].startswith("- rms_apply_kernel: 3.01 us (53%), memory-latency-bound, SM ")
    assert lines[at + 2].startswith("- rms_sumsq_kernel: 2.62 us (47%), ")
    assert "registers" in lines[at + 1] and "grid " in lines[at + 1]
    single = render(kernels[0].values, "filtered", classify.DEFAULT, kernels[:1]).text
    assert "Kernels:" not in single


def _one_fake_gpu(monkeypatch) -> None:
    """device.targets answers with one fake GPU, "Fake GPU" (uuid GPU-f)."""
    from cudamaster import device
    from cudamaster.gpus import Gpu

    facts = _device("Fake GPU", "GPU-f")
    monkeypatch.setattr(
        device, "targets", lambda spec: ([Gpu(0, "GPU-f", "Fake GPU")], {"GPU-f": facts})
    )


def test_calibrate_command_spreads_profiles_and_reports_classes_and_tokens(tmp_path, monkeypatch):
    from cudamaster import cli
    from cudamaster.profile import run as profile_run
    from cudamaster.profile.ncu import ProfileResult
    from cudamaster.tasks import get_task

    monkeypatch.setenv("CUDAMASTER_CACHE", str(tmp_path))
    _one_fake_gpu(monkeypatch)
    points = iter([(5, 80), (8, 85), (70, 20), (75, 30), (6, 7), (7, 9)])

    def fake_profile(task, variant, impl, arch, device=None):
        sm, mem = next(points)
        agg = {m.id: 1.0 for m in TABLE} | {SM: sm, MEM: mem, DRAM: mem}
        res = ProfileResult(ok=True, aggregate=agg, wall_s=0.5)
        return profile_run.ProfileReport(task.name, variant, 0, "baseline", res, classify.DEFAULT,
                                         "x")  # fmt: skip

    monkeypatch.setattr(profile_run, "profile", fake_profile)
    tasks = [get_task(n) for n in ("vector_add", "RELU", "softmax")]
    cli._calibrate(tasks, ["fp32", "bf16"], "all", tmp_path)
    data = json.loads((tmp_path / "calibration.json").read_text())
    assert data["thresholds"]["calibrated"] and len(data["profiles"]) == 6
    assert sum(data["classes"]["fp32"].values()) == 3 and sum(data["classes"]["bf16"].values()) == 3
    assert data["mean_tokens"]["filtered"] < data["mean_tokens"]["full"]
    assert classify.load(_device("Fake GPU", "GPU-on-another-machine")).calibrated  # the model


def test_a_calibration_cut_short_resumes_with_the_profiles_it_kept(tmp_path, monkeypatch):
    from cudamaster import cli
    from cudamaster.profile import run as profile_run
    from cudamaster.profile.ncu import KernelProfile, ProfileResult
    from cudamaster.tasks import get_task

    monkeypatch.setenv("CUDAMASTER_CACHE", str(tmp_path))
    _one_fake_gpu(monkeypatch)
    points = iter([(5, 80), (8, 85), (70, 20), (75, 30), (6, 7), (7, 9)])
    profiled = []

    def fake_profile(task, variant, impl, arch, device=None):
        profiled.append((task.name, variant))
        if len(profiled) == 5:
            raise KeyboardInterrupt  # the run is cut short after four profiles
        sm, mem = next(points)
        agg = {m.id: 1.0 for m in TABLE} | {SM: sm, MEM: mem, DRAM: mem}
        kernel = KernelProfile("k", agg)
        res = ProfileResult(ok=True, kernels=[kernel], aggregate=agg, wall_s=0.5)
        return profile_run.ProfileReport(task.name, variant, 0, "baseline", res, classify.DEFAULT,
                                         "x")  # fmt: skip

    monkeypatch.setattr(profile_run, "profile", fake_profile)
    tasks = [get_task(n) for n in ("vector_add", "RELU", "softmax")]
    with pytest.raises(KeyboardInterrupt):
        cli._calibrate(tasks, ["fp32", "bf16"], "all", tmp_path)
    assert len(json.loads((tmp_path / "calibration.json").read_text())["profiles"]) == 4
    profiled.clear()
    points = iter([(6, 7), (7, 9)])
    cli._calibrate(tasks, ["fp32", "bf16"], "all", tmp_path, resume=True)
    assert profiled == [("softmax", "fp32"), ("softmax", "bf16")]  # only those not kept
    data = json.loads((tmp_path / "calibration.json").read_text())
    assert len(data["profiles"]) == 6 and data["thresholds"]["samples"] == 6
    assert sum(n for per in data["classes"].values() for n in per.values()) == 6
    assert data["gpu"] == "Fake GPU"  # the finished file names its GPU model too


def test_resume_refuses_a_calibration_from_another_gpu_model(tmp_path, monkeypatch):
    from cudamaster import cli
    from cudamaster.tasks import get_task

    _one_fake_gpu(monkeypatch)
    (tmp_path / "calibration.json").write_text(json.dumps({"gpu": "Other GPU", "profiles": []}))
    with pytest.raises(UserError, match="taken on 'Other GPU'"):
        cli._calibrate([get_task("RELU")], ["fp32"], "all", tmp_path, resume=True)
