"""The optimizer's GPU backend through the real evaluator on the CPU stand-in for the CUDA
runtime: candidates are screened together in one session (each beside its flag variants, the
fastest correct build kept), evaluated in full together with the baseline in another, a wrong
one is handed to compute-sanitizer, and a build that fails says why without a GPU."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from cudamaster.agents import backend as agents_backend
from cudamaster.agents import gpu as agents_gpu
from cudamaster.agents.backend import Submission
from cudamaster.bench import evaluate
from cudamaster.bench.build import BuildError, BuildResult, KernelResources
from cudamaster.bench.evaluate import Impl
from cudamaster.bench.timing import TimingPolicy
from cudamaster.gpus import Gpu, GpuPool
from cudamaster.tasks import get_task
from optimizer_fakes import DEVICE
from test_evaluate_cpu import FAKE, fake_cuda  # noqa: F401  (a fixture)

pytestmark = pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc")
MACROS = {"--use_fast_math": "-DFAST_MATH"}


@pytest.fixture
def sessions(monkeypatch) -> list[list[str]]:
    """The labels of the implementations of every evaluator session, in order."""
    seen: list[list[str]] = []
    original = evaluate.Evaluator.run

    def run(self, impls, *args, **kwargs):
        seen.append([i.label for i in impls])
        return original(self, impls, *args, **kwargs)

    monkeypatch.setattr(evaluate.Evaluator, "run", run)
    return seen


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
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            log = tmp_path / f"build-{key}.log"
            log.write_text(proc.stderr)
            raise BuildError(f"compile error in {Path(source).name}", log)
        return BuildResult(Path(source), lib, lib, list(extra_flags), False,
                           [KernelResources("vector_add", registers=72)])  # fmt: skip

    for module in (evaluate, agents_gpu, agents_backend):
        monkeypatch.setattr(module, "build", gcc_build)
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


def fixture(name: str, label: str = "round1-c1") -> Submission:
    return Submission(label, (FAKE / f"{name}.c").read_text())


def test_the_flag_screen_keeps_the_fastest_correct_build(backend, sessions):
    (outcome,) = backend.screen([fixture("vector_add_flags")], variants=True)
    assert outcome.verdict == "ok" and outcome.stage == "screen"
    tried = {" ".join(t.flags): t.verdict for t in outcome.trials}
    assert tried == {"-O3": "ok", "-O3 --use_fast_math": "wrong_on_unseen",
                     "-O3 -maxrregcount=64": "ok", "-O3 -maxrregcount=48": "ok"}  # fmt: skip
    assert outcome.flags[1].startswith("-maxrregcount=")  # 20x less work than the plain build
    plain = next(t for t in outcome.trials if t.flags == ["-O3"])
    assert outcome.score > 2 * plain.score
    assert outcome.trials[0].flags == outcome.flags  # fastest first
    assert [c.weight for c in outcome.cases] == pytest.approx([0.2, 0.8])  # N: 1:4
    assert len(sessions) == 1 and "library" not in sessions[0]  # screening: no library


def test_without_variants_only_the_asked_build_is_screened(backend, sessions):
    (outcome,) = backend.screen([fixture("vector_add_flags")], variants=False)
    assert outcome.ok and outcome.flags == ["-O3"] and outcome.trials == []
    assert sessions == [["baseline", "round1-c1"]]


def test_candidates_screened_together_share_one_session_each_with_its_own_outcome(
    backend, sessions
):
    subs = [fixture("vector_add_cpu", "round1-c1"), fixture("vector_add_cpu_slow", "round1-c2")]
    fast, slow = backend.screen(subs, variants=False)
    assert sessions == [["baseline", "round1-c1", "round1-c2"]]
    assert fast.ok and slow.ok and fast.score > slow.score  # the slow one is the baseline's code
    assert slow.score == pytest.approx(1.0, rel=0.5)


def test_the_full_evaluation_runs_every_submission_with_the_baseline_in_one_session(
    backend, sessions
):
    base = Submission("baseline", (FAKE / "vector_add_cpu_slow.c").read_text())
    subs = [base, fixture("vector_add_cpu", "round1-c1"), fixture("vector_add_flags", "round1-c2")]
    outcomes = backend.evaluate(subs)
    assert sessions == [["baseline", "round1-c1", "round1-c2"]]  # the baseline once
    assert [o.stage for o in outcomes] == ["full"] * 3 and all(o.ok for o in outcomes)
    assert outcomes[0].score == 1.0 and outcomes[0].noise is None  # 1 by definition
    assert outcomes[1].score > 1.0 and outcomes[2].trials == []  # no flag screen in full


def test_a_wrong_candidate_reports_every_case_with_its_mismatches_and_is_sanitized(
    backend, monkeypatch
):
    monkeypatch.setattr(evaluate, "UNSEEN_CASES", 0)  # the suite's cases, each with its detail
    (outcome,) = backend.screen([fixture("vector_add_cpu_wrong")], variants=False)
    assert outcome.verdict == "wrong" and outcome.score is None
    assert all(c.verdict == "wrong" for c in outcome.cases)
    assert all("expected" in c.detail and "got" in c.detail for c in outcome.cases)
    assert set(outcome.sanitizer) == {"racecheck", "initcheck"}


def test_a_candidate_right_only_on_the_suites_sizes_is_told_which_unseen_case_it_failed(backend):
    (outcome,) = backend.evaluate([fixture("vector_add_cpu_tiles")])
    assert outcome.verdict == "wrong_on_unseen" and outcome.score is None
    assert outcome.detail.startswith("unseen case") and "--unseen-seed" in outcome.detail
    assert "expected" in outcome.detail and "got" in outcome.detail  # its first mismatches
    assert all(c.verdict == "skipped" for c in outcome.cases)  # not timed
    assert set(outcome.sanitizer) == {"racecheck", "initcheck"}


def test_a_build_that_fails_says_why_with_its_log_and_needs_no_session(backend, sessions):
    assert backend.compile(fixture("vector_add_cpu")) is None
    broken = Submission("round1-c1", "void vector_add(const float* A {\n", ("-O3", "-lineinfo"))
    outcome = backend.compile(broken)
    assert outcome.verdict == "compile_error" and outcome.flags == ["-O3", "-lineinfo"]
    assert outcome.detail.startswith("compile error in round1-c1.cu")
    assert "error" in outcome.compile_log and sessions == []
