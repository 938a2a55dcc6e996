"""The sandbox in a whole evaluation on the CPU: the worker runs against the stand-in CUDA
runtime (tests/fixtures/fake_cuda), candidates are the escape fixtures built by nvcc (their host
code runs; their kernels do nothing here). What the static checks cannot see, the kernel stops:
the verdict says so, and no escape leaves its marker. Where the sandbox is off, every report
says so and the coordinator warns once."""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

import pytest

from cudamaster.bench import evaluate
from cudamaster.bench.build import BuildResult
from cudamaster.bench.build import build as nvcc_build
from cudamaster.bench.client import WorkerClient
from cudamaster.bench.evaluate import Evaluator, Impl
from cudamaster.bench.sandbox import ENV, kernel_support
from cudamaster.bench.timing import TimingPolicy
from cudamaster.tasks import get_task

FIX = Path(__file__).parent / "fixtures"
FAKE = FIX / "fake_cuda"
WRONG = FIX / "wrong"
SUPPORT = kernel_support()
POLICY = TimingPolicy(warmup=1, batch=3, min_samples=6, max_samples=12, time_cap_s=0.5)
pytestmark = pytest.mark.skipif(
    not (shutil.which("gcc") and shutil.which("nvcc")), reason="needs gcc and nvcc"
)
needs_seccomp = pytest.mark.skipif(not SUPPORT.seccomp, reason=SUPPORT.seccomp_why or "seccomp")
needs_landlock = pytest.mark.skipif(
    not SUPPORT.landlock_abi, reason=SUPPORT.landlock_why or "no Landlock"
)


@pytest.fixture
def fake_cuda(tmp_path, monkeypatch):
    """The stand-in runtime and comparer; .c implementations built by gcc, .cu ones by nvcc."""
    runtime = tmp_path / "libcudart.so.13"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-Wl,-soname,libcudart.so.13", "-o",
                    str(runtime), str(FAKE / "fake_cudart.c")], check=True)  # fmt: skip
    comparer = tmp_path / "compare_host.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(comparer),
                    str(FAKE / "compare_host.c")], check=True)  # fmt: skip
    monkeypatch.setenv("CUDAMASTER_CUDART", str(runtime))
    monkeypatch.setenv("CUDAMASTER_COMPARER", str(comparer))
    monkeypatch.delenv(ENV, raising=False)

    def build(source, arch, links=(), extra_flags=(), compile_only=False):
        if Path(source).suffix == ".cu":
            return nvcc_build(source, arch, links, extra_flags, compile_only)
        lib = tmp_path / (Path(source).stem + ".so")
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(source)], check=True)
        return BuildResult(Path(source), lib, lib, [], False, [])

    monkeypatch.setattr(evaluate, "build", build)
    return tmp_path


def evaluate_vector_add(impls: list[Impl]):
    task = get_task("vector_add")
    baseline = Impl("baseline", FAKE / "vector_add_cpu.c", trusted=True)
    ev = Evaluator(task, "fp32", "paper", "sm_90", policy=POLICY, cases=[0], call_timeout_s=30)
    return ev.run([baseline, *impls])


def marker(name: str) -> Path:
    return Path(f"/tmp/cudamaster-escaped-{name}")


@needs_seccomp
def test_escapes_that_pass_the_static_checks_are_stopped_by_the_kernel(fake_cuda):
    names = {"system_via_elf_walk": "", "opens_socket": "socket", "reads_other_proc_mem":
             "process_vm_readv"}  # fmt: skip
    for name in names:
        marker(name).unlink(missing_ok=True)
    report = evaluate_vector_add([Impl(n, WRONG / f"{n}.cu") for n in names])
    assert report.impl("baseline").verdict == "ok", report.impl("baseline").detail
    for name, call in names.items():
        got = report.impl(name)
        assert got.verdict == "sandbox_violation", (name, got.verdict, got.detail)
        assert "the sandbox stopped it" in got.detail
        if call:  # system() makes its clone with every signal blocked: unnamed, still stopped
            assert f"blocked {call} " in got.detail, got.detail
        assert not marker(name).exists(), f"{name} escaped"


@needs_landlock
def test_reading_the_parents_environment_by_address_is_refused_by_landlock(fake_cuda):
    name = "reads_parent_environ_by_address"
    marker(name).unlink(missing_ok=True)
    got = evaluate_vector_add([Impl(name, WRONG / f"{name}.cu")]).impl(name)
    # refused, the fixture writes -errno into C[0]: -13 is EACCES
    assert got.verdict.startswith("wrong") and "got -13" in got.detail, (got.verdict, got.detail)
    assert not marker(name).exists()


def test_a_candidate_runs_under_the_full_profile_and_a_baseline_under_the_trusted_one(
    fake_cuda, monkeypatch
):
    seen: dict[str, list[str]] = {}

    class Recording(WorkerClient):
        def close(self) -> None:
            seen[self.label] = list(self.sandbox)
            super().close()

    monkeypatch.setattr(evaluate, "WorkerClient", Recording)
    report = evaluate_vector_add([Impl("candidate", FAKE / "vector_add_cpu_slow.c")])
    assert report.impl("candidate").verdict == "ok", report.impl("candidate").detail
    planned = report.device["sandbox"]
    assert set(planned) <= set(seen["candidate"]), (planned, seen)  # all it planned, in force
    assert "nocaps" in seen["baseline"] and "landlock" not in seen["baseline"]
    if SUPPORT.seccomp:
        assert "seccomp-trusted" in seen["baseline"] and "seccomp" in seen["candidate"]
    if SUPPORT.landlock_abi:
        assert "landlock" in seen["candidate"] and "landlock-startup" in seen["baseline"]


def test_a_candidate_that_does_not_load_is_a_load_error_at_its_first_case(fake_cuda):
    source = fake_cuda / "unloadable.c"
    source.write_text(
        "extern void not_defined_anywhere(void);\n"
        "void vector_add(const float* A, const float* B, float* C, int N)"
        " { not_defined_anywhere(); }\n"
    )
    got = evaluate_vector_add([Impl("unloadable", source)]).impl("unloadable")
    assert got.verdict == "load_error" and "not_defined_anywhere" in got.detail, got.detail


def test_a_sandbox_that_is_off_is_recorded_in_the_report_and_warned_once(
    fake_cuda, monkeypatch, caplog
):
    monkeypatch.setenv(ENV, "0")
    monkeypatch.setattr("cudamaster.bench.client._warned", set())
    caplog.set_level(logging.WARNING, logger="cudamaster.bench.client")
    report = evaluate_vector_add([Impl("candidate", FAKE / "vector_add_cpu_slow.c")])
    assert report.impl("candidate").verdict == "ok"
    assert report.device["sandbox"] == []
    assert any(f"{ENV}=0" in gap for gap in report.device["sandbox_gaps"])
    warned = [r.getMessage() for r in caplog.records if f"{ENV}=0" in r.getMessage()]
    assert len(warned) == 1, warned  # two workers said it; one warning
