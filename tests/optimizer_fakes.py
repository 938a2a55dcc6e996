"""A scripted model and a fake backend for the optimizer's CPU tests (no GPU, no API).

The model answers by step key ("round1/c2/coder"). The backend makes the outcome of a source
from markers in it:
  COMPILE_ERROR  does not build
  WRONG          builds, and is wrong wherever it runs (with its sanitizer reports)
  P a[,b,...]    correct, a speedup of a on every case (or one per case of the paper suite)
  SCREEN a[,..]  its screening says these speedups instead (its full evaluation keeps P)
  SCREENED       its flag screen keeps -maxrregcount=64 (P 2.2, and every build tried)
  UNSEEN_AT_FULL its full evaluation draws an unseen case it gets wrong
  (nothing)      correct, P 1.1
Every case of a correct outcome reaches a tenth of its speedup of the speed of light.
A file from dispatch.merge runs each case at the speed of the path its rule picks there.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

from conftest import DEVICE_EXTRAS
from cudamaster.agents import runner
from cudamaster.agents.backend import CpuBackend, Submission, compile_check
from cudamaster.agents.outcome import CaseOutcome, FlagTrial, Outcome, ProfileView
from cudamaster.agents.rundir import RunDir
from cudamaster.device import DeviceFacts
from cudamaster.llm.base import AnswerPending, Completion, Provider, Usage

DEVICE = DeviceFacts(name="test GPU", uuid="GPU-0", driver="1", nvcc="13.0",
                     compute_capability="90", sm_count=132, l2_bytes=50 << 20,
                     memory_mib=81559, copy_gbs=2987.0, fp32_tflops=51.3, bf16_tflops=772.0,
                     **DEVICE_EXTRAS)  # fmt: skip
SIZES = [1024, 4096, 16384, 65536, 262144]  # vector_add's paper suite: N, also each case's T
WEIGHTS = [n / sum(SIZES) for n in SIZES]
ENTRY = 'extern "C" void vector_add(const float* A, const float* B, float* C, int N) {}'
MISMATCH = "C: 3/1024 elements wrong, first: [17] expected 0.5, got nan (allowed +-1e-06)"


def kernel(marker: str) -> str:
    """An answer whose code carries ``marker``."""
    return f"Here it is.\n```cuda\n// {marker}\n{ENTRY}\n```"


def plans(*parents: str) -> str:
    """A planner's answer: one plan per parent named."""
    return "\n".join(
        f"## Plan {k}\nParent: {p}\nStrategy: strategy {k}\nDiagnosis: slow.\n"
        f"Optimizations:\n1. Idea {k}."
        for k, p in enumerate(parents, 1)
    )


def cases(speedups: list[float | None], verdict: str = "ok", detail: str = "") -> list[CaseOutcome]:
    return [
        CaseOutcome(
            index=i,
            label=f"N={n}",
            weight=w,
            bytes=12.0 * n,
            flops=float(n),
            verdict=verdict,
            time_ms=0.5 / s if s else None,
            spread=0.01,
            baseline_ms=0.5,
            vs_baseline=s,
            vs_baseline_u=0.014 * s if s else None,
            sol=0.1 * s if s else None,
            detail=detail,
        )
        for i, (n, w, s) in enumerate(zip(SIZES, WEIGHTS, speedups, strict=True))
    ]


def ok(
    speedup: float | list[float], flags: list[str] | None = None, stage: str = "full"
) -> Outcome:
    per_case = speedup if isinstance(speedup, list) else [speedup] * len(SIZES)
    c = cases(list(per_case))
    score = sum(x.weight * (x.vs_baseline or 0.0) for x in c)
    noise = sum(x.weight * (x.vs_baseline_u or 0.0) for x in c)  # as report.ImplScore.noise
    return Outcome("ok", flags=flags or ["-O3"], score=score, noise=noise, cases=c, stage=stage)


COMPILE_ERROR = Outcome("compile_error", "compile error in x.cu: expected ';'", ["-O3"],
                        compile_log='x.cu(3): error: expected a ";"\n1 error detected')  # fmt: skip


def wrong(stage: str) -> Outcome:
    return Outcome("wrong", "case 0: C wrong", ["-O3"], cases=cases([None] * 5, "wrong", MISMATCH),
                   sanitizer={"racecheck": "RACECHECK SUMMARY: 1 hazard displayed",
                              "initcheck": "ERROR SUMMARY: 0 errors"}, stage=stage)  # fmt: skip


def screened_with_variants() -> Outcome:
    outcome = ok(2.2, ["-O3", "-maxrregcount=64"], "screen")
    outcome.trials = [FlagTrial(["-O3", "-maxrregcount=64"], "ok", 2.2),
                      FlagTrial(["-O3"], "ok", 1.9),
                      FlagTrial(["-O3", "--use_fast_math"], "wrong", None, "C wrong")]  # fmt: skip
    return outcome


class Scripted(Provider):
    """Answers by the step's key; records every request. Steps in ``pending`` wait for their
    answer (AnswerPending, as the exchange provider does); after ``fail_after`` calls the
    process dies (KeyboardInterrupt)."""

    def __init__(self, answers: dict[str, str], fail_after: int | None = None,
                 pending: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.name, self.model, self.price = "scripted", "m", None
        self.answers, self.fail_after, self.pending = answers, fail_after, pending
        self.calls: list[str] = []
        self.prompts: dict[str, list] = {}
        self._lock = threading.Lock()

    def complete(self, messages, options, key):
        step = key.split("/", 1)[1]
        with self._lock:
            if self.fail_after is not None and len(self.calls) >= self.fail_after:
                raise KeyboardInterrupt("killed")  # the process dies mid-run
            self.calls.append(step)
            self.prompts[step] = messages
        if step in self.pending:
            raise AnswerPending(f"{step}.prompt.md")
        default = "Diagnosis: slow.\nOptimizations:\n1. Unroll." if "planner" in step else "{}"
        text = self.answers.get(step, default)
        return Completion(text=text, model="m", usage=Usage(100, 50), cost_usd=0.01)

    def cost(self, usage):
        return usage.input_tokens * 1e-5 + usage.output_tokens * 1e-4


def _speeds(source: str, marker: str) -> list[float] | None:
    m = re.search(rf"//\s*{marker} ([\d.,]+)", source)
    if m is None:
        return None
    values = [float(v) for v in m.group(1).split(",")]
    return values * len(SIZES) if len(values) == 1 else values


def _merged(source: str) -> list[float] | None:
    """Per case, the speedup of the path a dispatch.merge file runs there."""
    rule = re.search(r"runs path (\d+) when N < (\d+), else path (\d+)", source)
    if rule is None:
        return None
    below, threshold, above = int(rule.group(1)), int(rule.group(2)), int(rule.group(3))
    parts = re.split(r"^namespace cm_path(\d+) \{$", source, flags=re.M)
    paths = {int(k): _speeds(body, "P") for k, body in zip(parts[1::2], parts[2::2], strict=True)}
    return [paths[below if n < threshold else above][i] for i, n in enumerate(SIZES)]  # type: ignore[index]


class FakeBackend:
    """The Backend protocol without a GPU; records every call. With ``nvcc`` (a folder), a
    build is a real nvcc build there."""

    def __init__(self, nvcc: Path | None = None) -> None:
        self.nvcc = nvcc
        self.events: list[tuple[str, list[str]]] = []  # (what, the submissions' names)
        self.screens: list[list[Submission]] = []
        self.variants: list[bool] = []  # each screening's ``variants``
        self.evaluations: list[list[Submission]] = []
        self.built: dict[str, Outcome | None] = {}
        self.profiled: list[tuple[str, str, int]] = []  # (name, mode, case)
        self.sessions = 0
        self._lock = threading.Lock()

    def _record(self, what: str, subs: list[Submission]) -> None:
        with self._lock:
            self.events.append((what, [s.name for s in subs]))

    def device(self) -> DeviceFacts:
        return DEVICE

    def compile(self, sub: Submission) -> Outcome | None:
        self._record("compile", [sub])
        if self.nvcc is not None:
            path = self.nvcc / f"{sub.name}.cu"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(sub.source)
            result = compile_check(path, DEVICE.arch, sub.flags)
        else:
            result = COMPILE_ERROR if "COMPILE_ERROR" in sub.source else None
        self.built[sub.name] = result
        return result

    def screen(self, subs: list[Submission], variants: bool) -> list[Outcome]:
        self._record("screen", subs)
        self.screens.append(subs)
        self.variants.append(variants)
        return [self._outcome(s, "screen", variants) for s in subs]

    def evaluate(self, subs: list[Submission]) -> list[Outcome]:
        self._record("evaluate", subs)
        self.evaluations.append(subs)
        self.sessions += 1
        out = []
        for s in subs:
            outcome = self._outcome(s, "full", False)
            outcome.detail = f"session {self.sessions}"  # which measurement this is
            out.append(outcome)
        return out

    def _outcome(self, sub: Submission, stage: str, variants: bool) -> Outcome:
        source = sub.source
        if sub.name == "baseline":
            outcome = ok(1.0)
            outcome.noise = None
        elif "WRONG" in source:
            outcome = wrong(stage)
        elif "UNSEEN_AT_FULL" in source and stage == "full":
            outcome = Outcome("wrong_on_unseen", "unseen case N=999983: C wrong", ["-O3"])
        elif "SCREENED" in source and variants:
            outcome = screened_with_variants()
        else:
            speeds = (stage == "screen" and _speeds(source, "SCREEN")) or _merged(source)
            outcome = ok(speeds or _speeds(source, "P") or 1.1)
        outcome.stage = stage
        if not (variants and outcome.trials):
            outcome.flags = list(sub.flags)
        return outcome

    def profile(self, sub: Submission, mode: str, case: int) -> ProfileView:
        with self._lock:
            self.profiled.append((sub.name, mode, case))
        fast = re.search(r"//\s*P ", sub.source)
        cls = "memory-bandwidth-bound" if fast else "memory-latency-bound"
        return ProfileView(f"{case} (N={SIZES[case]})", f"Bottleneck: {cls} ({mode})")

    # what the tests read
    def names(self, what: str) -> list[list[str]]:
        return [names for w, names in self.events if w == what]


class FakeCpu(CpuBackend):
    """A machine without a GPU (the real CpuBackend: NeedsGpu for every GPU step) whose builds
    are the fake's."""

    def __init__(self, run_root: Path) -> None:
        super().__init__(run_root, run_root / "code", "no GPU found")
        self.fake = FakeBackend()

    def compile(self, sub: Submission) -> Outcome | None:
        return self.fake.compile(sub)


def finished_run(folder: Path, name: str, markers: dict[str, str], suite: str = "paper") -> Path:
    """A one-round run, made by the runner with a replayed model and the fake backend, whose
    candidate for each task ("RELU-fp32") carries that task's marker ("P 2.0")."""
    root = folder / name
    transcript = folder / f"{name}.jsonl"
    with transcript.open("w") as f:
        for t, marker in markers.items():
            code = f"```cuda\n// {marker}\n{ENTRY.replace('vector_add', t.rsplit('-', 1)[0])}\n```"
            for step, text in (("planner", "Optimizations:\n1. vectorise"), ("c1/coder", code)):
                f.write(json.dumps({"key": f"{t}/round1/{step}", "text": text}) + "\n")
    RunDir(root).write_manifest({
        "model": f"replay:{transcript}", "base_url": None, "suite": suite, "concurrency": 2,
        "tasks": [t.rsplit("-", 1) for t in markers],
        "options": {"rounds": 1, "candidates": 1, "profile": "filtered"},
    })  # fmt: skip
    runner.execute(RunDir(root), backends=lambda task, variant: FakeBackend())
    return root
