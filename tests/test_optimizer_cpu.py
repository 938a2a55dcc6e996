"""The optimizer's control flow with a scripted model and a fake evaluator (no GPU, no API)."""

from __future__ import annotations

import pytest

from cudamaster.agents.loop import LoopOptions, Optimizer, Outcome
from cudamaster.agents.parse import extract_code, parse_flags
from cudamaster.agents.rundir import RunDir
from cudamaster.llm.base import Completion, Provider, Usage
from cudamaster.tasks import get_task

DEVICE = {
    "name": "test GPU", "compute_capability": "90", "sm_count": 132, "l2_bytes": 60 << 20,
    "copy_gbs": 4000.0, "fp32_tflops": 50.0, "bf16_tflops": 800.0,
}  # fmt: skip
ENTRY = 'extern "C" void vector_add(const float*, const float*, float*, int) {}'


def kernel(marker: str) -> str:
    return f"```cuda\n// {marker}\n{ENTRY}\n```"


class Scripted(Provider):
    """Answers by the step's key suffix (e.g. 'round1/coder'); counts calls."""

    def __init__(self, answers: dict[str, str], fail_after: int | None = None) -> None:
        self.name, self.model = "scripted", "m"
        self.answers, self.calls, self.fail_after = answers, [], fail_after

    def complete(self, messages, options, key):
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise KeyboardInterrupt("killed")  # the process dies mid-run
        step = key.split("/", 1)[1]
        self.calls.append(step)
        text = self.answers.get(
            step, "plan: unroll" if step.endswith("planner") else '{"flags": ["-O3"]}'
        )
        return Completion(text=text, model="m", usage=Usage(100, 50), cost_usd=0.01)


class FakeGPU:
    def __init__(self) -> None:
        self.evaluated: list[str] = []
        self.profiled = 0

    def evaluate(self, source, flags, name):
        self.evaluated.append(name)
        if "baseline" in name:
            return Outcome("ok", score=1.0, sol=0.01, summary="baseline 1.0 ms")
        for marker, outcome in [
            ("COMPILE_ERROR", Outcome("compile_error", "error: expected ';'")),
            ("WRONG", Outcome("wrong", "C: 1/1024 elements wrong")),
            ("HANG", Outcome("timeout", "no answer to run within 60 s")),
            ("FAST3", Outcome("ok", score=3.0, sol=0.5)),
            ("FAST2", Outcome("ok", score=2.0, sol=0.3)),
            ("SLOW", Outcome("ok", score=0.5, sol=0.005)),
        ]:
            if marker in source:
                return outcome
        return Outcome("ok", score=1.1)

    def profile(self, source, flags, name, mode):
        self.profiled += 1
        return f"Bottleneck: memory-latency-bound ({mode})"


def make(tmp_path, answers, rounds=1, **opts):
    gpu = FakeGPU()
    provider = Scripted(answers, opts.pop("fail_after", None))
    opt = Optimizer(get_task("vector_add"), "fp32", provider, RunDir(tmp_path), gpu.evaluate,
                    gpu.profile, DEVICE, LoopOptions(rounds=rounds, **opts))  # fmt: skip
    return opt, provider, gpu


def test_a_faster_correct_kernel_becomes_the_best(tmp_path):
    opt, provider, _ = make(tmp_path, {"round1/coder": kernel("FAST2")})
    state = opt.run_task()
    assert state.status == "done" and state.best["label"] == "round1"
    assert state.best["outcome"]["score"] == 2.0
    assert provider.calls == ["round1/planner", "round1/coder", "round1/compiler"]
    steps = tmp_path / "vector_add-fp32" / "steps"
    assert (steps / "round1__planner.md").read_text().startswith("## user")
    assert (tmp_path / "ledger.jsonl").read_text().count("\n") == 3


def test_malformed_reply_then_fixed_by_the_debugger(tmp_path):
    opt, provider, _ = make(
        tmp_path, {"round1/coder": "I would tile it.", "round1/debug1": kernel("FAST2")}
    )
    state = opt.run_task()
    assert state.best["label"] == "round1" and "round1/debug1" in provider.calls


def test_compile_error_then_fixed(tmp_path):
    opt, _, gpu = make(
        tmp_path, {"round1/coder": kernel("COMPILE_ERROR"), "round1/debug1": kernel("FAST2")}
    )
    state = opt.run_task()
    assert state.best["outcome"]["score"] == 2.0
    assert gpu.evaluated == ["baseline", "round1-try0", "round1-try1"]


def test_wrong_result_then_fixed_and_timeout_then_fixed(tmp_path):
    answers = {"round1/coder": kernel("WRONG"), "round1/debug1": kernel("HANG"),
               "round1/debug2": kernel("FAST3")}  # fmt: skip
    opt, provider, _ = make(tmp_path, answers)
    state = opt.run_task()
    assert state.best["outcome"]["score"] == 3.0
    assert [c for c in provider.calls if "debug" in c] == ["round1/debug1", "round1/debug2"]


def test_debug_attempts_are_bounded_and_a_slower_kernel_is_not_kept(tmp_path):
    answers = {"round1/coder": kernel("WRONG"), "round2/coder": kernel("SLOW")}
    opt, provider, _ = make(tmp_path, answers, rounds=2, debug_attempts=2)
    state = opt.run_task()
    assert [c for c in provider.calls if "round1/debug" in c] == ["round1/debug1", "round1/debug2"]
    assert state.best["label"] == "baseline" and len(state.history) == 2
    assert "not kept" in state.history[1]["summary"]


def test_budget_exceeded_stops_cleanly(tmp_path):
    opt, provider, _ = make(tmp_path, {"round1/coder": kernel("FAST2")}, rounds=3, max_tokens=400)
    state = opt.run_task()
    assert state.status == "stopped" and "token budget" in state.detail
    assert len(provider.calls) == 3  # 150 tokens a call: the fourth would pass 400


def test_kill_mid_round_then_resume_loses_and_redoes_nothing(tmp_path):
    answers = {"round1/coder": kernel("FAST2"), "round2/coder": kernel("FAST3")}
    opt, first, _ = make(tmp_path, answers, rounds=2, fail_after=4)
    with pytest.raises(KeyboardInterrupt):
        opt.run_task()
    assert first.calls == ["round1/planner", "round1/coder", "round1/compiler", "round2/planner"]
    opt2, second, gpu2 = make(tmp_path, answers, rounds=2)
    state = opt2.run_task()
    assert state.status == "done" and state.best["outcome"]["score"] == 3.0
    assert second.calls == ["round2/coder", "round2/compiler"]  # nothing finished is asked again
    assert gpu2.evaluated == ["round2-try0"]  # baseline and round 1 come from the run directory
    assert sum(1 for _ in (tmp_path / "ledger.jsonl").open()) == 6


def test_profile_modes(tmp_path):
    opt, _, gpu = make(tmp_path, {"round1/coder": kernel("FAST2")}, profile="none")
    opt.run_task()
    assert gpu.profiled == 0
    planner = (tmp_path / "vector_add-fp32" / "steps" / "round1__planner.md").read_text()
    assert "(no profile)" in planner


def test_parse_helpers():
    assert extract_code("text\n```cuda\nint x;\n```\nmore") == "int x;\n"
    assert extract_code("no code here") is None
    flags, rejected = parse_flags(
        '{"flags": ["-O3", "--use_fast_math", "-maxrregcount=64", "-lcublas"]}'
    )
    assert flags == ("-O3", "--use_fast_math", "-maxrregcount=64") and rejected == ["-lcublas"]
    assert parse_flags("whatever")[0] == ("-O3",)
