"""The optimizer's GPU side through the real evaluator on the CPU stand-in for the CUDA runtime:
a candidate's flag screen is built and timed in one evaluation, the fastest correct build is
kept, and a wrong one is handed to compute-sanitizer."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from cudamaster.agents import gpu as agents_gpu
from cudamaster.bench import evaluate
from cudamaster.bench.build import BuildResult, KernelResources
from cudamaster.bench.evaluate import Impl
from cudamaster.bench.timing import TimingPolicy
from cudamaster.gpus import Gpu, GpuPool
from cudamaster.tasks import get_task
from test_evaluate_cpu import FAKE, fake_cuda  # noqa: F401  (a fixture)
from test_optimizer_cpu import DEVICE

pytestmark = pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc")
MACROS = {"--use_fast_math": "-DFAST_MATH"}


@pytest.fixture
def backend(fake_cuda, monkeypatch, tmp_path):  # noqa: F811
    def gcc_build(source, arch, links=(), extra_flags=(), compile_only=False):
        """gcc standing in for nvcc: flags become macros, registers are said to be 72."""
        defines = [
            MACROS.get(f, "-DREGS" if f.startswith("-maxrregcount") else "") for f in extra_flags
        ]
        key = hashlib.sha256(f"{source}{extra_flags}".encode()).hexdigest()[:12]
        lib = tmp_path / f"lib-{key}.so"
        cmd = ["gcc", "-shared", "-fPIC", "-O1", *filter(None, defines), "-o", str(lib),
               "-x", "c", str(source)]  # fmt: skip
        subprocess.run(cmd, check=True)
        return BuildResult(Path(source), lib, lib, list(extra_flags), False,
                           [KernelResources("vector_add", registers=72)])  # fmt: skip

    monkeypatch.setattr(evaluate, "build", gcc_build)
    monkeypatch.setattr(agents_gpu, "build", gcc_build)
    monkeypatch.setattr(agents_gpu, "standard_impls", lambda task, variant: [
        Impl("baseline", FAKE / "vector_add_cpu_slow.c", trusted=True)])  # fmt: skip
    policy = TimingPolicy(warmup=1, batch=3, min_samples=6, max_samples=30, time_cap_s=0.5)
    original = evaluate.Evaluator.__init__

    def quick(self, *args, **kwargs):  # the paper suite's first two cases, a short policy
        original(self, *args, **{**kwargs, "policy": policy, "cases": [0, 1]})

    monkeypatch.setattr(evaluate.Evaluator, "__init__", quick)
    return agents_gpu.GpuBackend(get_task("vector_add"), "fp32", "paper",
                                 GpuPool([Gpu.default("Fake GPU")]), {"": DEVICE},
                                 tmp_path / "code")  # fmt: skip


def test_the_flag_screen_keeps_the_fastest_correct_build(backend):
    source = (FAKE / "vector_add_flags.c").read_text()
    outcome = backend.evaluate(source, ("-O3",), "round1-try0", screen=True)
    assert outcome.verdict == "ok"
    tried = {" ".join(t.flags): t.verdict for t in outcome.trials}
    assert tried == {"-O3": "ok", "-O3 --use_fast_math": "wrong_on_unseen",
                     "-O3 -maxrregcount=64": "ok", "-O3 -maxrregcount=48": "ok"}  # fmt: skip
    assert outcome.flags[1].startswith("-maxrregcount=")  # 20x less work than the plain build
    plain = next(t for t in outcome.trials if t.flags == ["-O3"])
    assert outcome.score > 2 * plain.score
    assert outcome.trials[0].flags == outcome.flags  # fastest first
    assert [c.weight for c in outcome.cases] == pytest.approx([0.2, 0.8])  # N: 1:4


def test_without_the_screen_only_the_asked_build_runs(backend):
    source = (FAKE / "vector_add_flags.c").read_text()
    outcome = backend.evaluate(source, ("-O3",), "round1-try0", screen=False)
    assert outcome.ok and outcome.flags == ["-O3"] and outcome.trials == []


def test_a_wrong_candidate_reports_every_case_with_its_mismatches_and_is_sanitized(
    backend, monkeypatch
):
    monkeypatch.setattr(evaluate, "UNSEEN_CASES", 0)  # the suite's cases, each with its detail
    source = (FAKE / "vector_add_cpu_wrong.c").read_text()
    outcome = backend.evaluate(source, ("-O3",), "round1-try0", screen=False)
    assert outcome.verdict == "wrong" and outcome.score is None
    assert all(c.verdict == "wrong" for c in outcome.cases)
    assert all("expected" in c.detail and "got" in c.detail for c in outcome.cases)
    assert set(outcome.sanitizer) == {"racecheck", "initcheck"}


def test_a_candidate_right_only_on_the_suites_sizes_is_told_which_unseen_case_it_failed(backend):
    source = (FAKE / "vector_add_cpu_tiles.c").read_text()
    outcome = backend.evaluate(source, ("-O3",), "round1-try0", screen=False)
    assert outcome.verdict == "wrong_on_unseen" and outcome.score is None
    assert outcome.detail.startswith("unseen case") and "--unseen-seed" in outcome.detail
    assert "expected" in outcome.detail and "got" in outcome.detail  # its first mismatches
    assert all(c.verdict == "skipped" for c in outcome.cases)  # not timed
    assert set(outcome.sanitizer) == {"racecheck", "initcheck"}
