"""The optimizer's control flow and prompts with a scripted model and a fake evaluator (no GPU,
no API): what each agent is told, what is kept, what survives a kill."""

from __future__ import annotations

import threading

import pytest

from conftest import DEVICE_EXTRAS
from cudamaster.agents.budget import Budget, BudgetExceeded, Cost
from cudamaster.agents.loop import LoopOptions, Optimizer
from cudamaster.agents.outcome import CaseOutcome, FlagTrial, Outcome, ProfileView
from cudamaster.agents.rundir import RunDir
from cudamaster.device import DeviceFacts
from cudamaster.llm.base import Completion, Provider, ProviderError, Usage
from cudamaster.profile.summary import count_tokens
from cudamaster.tasks import get_task

DEVICE = DeviceFacts(name="test GPU", uuid="GPU-0", driver="1", nvcc="13.0",
                     compute_capability="90", sm_count=132, l2_bytes=50 << 20,
                     memory_mib=81559, copy_gbs=2987.0, fp32_tflops=51.3, bf16_tflops=772.0,
                     **DEVICE_EXTRAS)  # fmt: skip
ENTRY = 'extern "C" void vector_add(const float* A, const float* B, float* C, int N) {}'
CASES = [("N=1024", 0.1), ("N=1048576", 0.9)]


def kernel(marker: str) -> str:
    return f"Here it is.\n```cuda\n// {marker}\n{ENTRY}\n```"


def cases(speedup: float | None, verdict: str = "ok", detail: str = "") -> list[CaseOutcome]:
    t = 0.5 / speedup if speedup else None
    common = {"bytes": 12.0 * 2**20, "flops": 2**20, "verdict": verdict, "time_ms": t,
              "spread": 0.01, "baseline_ms": 0.5, "vs_baseline": speedup,
              "vs_baseline_u": 0.014 * speedup if speedup else None, "sol": 0.2,
              "detail": detail}  # fmt: skip
    return [
        CaseOutcome(index=i, label=label, weight=w, **common) for i, (label, w) in enumerate(CASES)
    ]


def ok(speedup: float) -> Outcome:
    c = cases(speedup)
    noise = sum(x.weight * (x.vs_baseline_u or 0.0) for x in c)  # as report.ImplScore.noise
    return Outcome("ok", flags=["-O3"], score=speedup, noise=noise, cases=c)


MISMATCH = "C: 3/1024 elements wrong, first: [17] expected 0.5, got nan (allowed +-1e-06)"
OUTCOMES = {
    "COMPILE_ERROR": Outcome("compile_error", "compile error in x.cu: expected ';'",
                             compile_log="x.cu(3): error: expected a \";\"\n1 error detected"),
    "WRONG": Outcome("wrong", "case 0: C wrong", cases=cases(None, "wrong", MISMATCH),
                     sanitizer={"racecheck": "RACECHECK SUMMARY: 1 hazard displayed",
                                "initcheck": "ERROR SUMMARY: 0 errors"}),
    "HANG": Outcome("timeout", "no answer to run within 60 s"),
    "FAST3": ok(3.0),
    "SCREENED": Outcome("ok", flags=["-O3", "-maxrregcount=64"], score=2.2, noise=0.03,
                        cases=cases(2.2), trials=[
                            FlagTrial(["-O3", "-maxrregcount=64"], "ok", 2.2),
                            FlagTrial(["-O3"], "ok", 1.9),
                            FlagTrial(["-O3", "--use_fast_math"], "wrong", None, "C wrong")]),
    "FAST2": ok(2.0),
    "SAME": ok(1.005),
    "SLOW": ok(0.5),
}  # fmt: skip


class Scripted(Provider):
    """Answers by the step's key (e.g. 'round1/coder'); records every request."""

    def __init__(self, answers: dict[str, str], fail_after: int | None = None) -> None:
        self.name, self.model, self.price = "scripted", "m", None
        self.answers, self.fail_after = answers, fail_after
        self.calls: list[str] = []
        self.prompts: dict[str, list] = {}

    def complete(self, messages, options, key):
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise KeyboardInterrupt("killed")  # the process dies mid-run
        step = key.split("/", 1)[1]
        self.calls.append(step)
        self.prompts[step] = messages
        default = "Diagnosis: slow.\nOptimizations:\n1. Unroll." if "planner" in step else "{}"
        text = self.answers.get(step, default)
        return Completion(text=text, model="m", usage=Usage(100, 50), cost_usd=0.01)

    def cost(self, usage):
        return usage.input_tokens * 1e-5 + usage.output_tokens * 1e-4


class FakeGPU:
    def __init__(self) -> None:
        self.evaluated: list[tuple[str, tuple, bool]] = []
        self.profiled: list[int] = []

    def evaluate(self, source, flags, name, screen):
        self.evaluated.append((name, flags, screen))
        if name == "baseline":
            return ok(1.0)
        if "FASTMATH_BREAKS" in source:
            if "--use_fast_math" in flags:
                return OUTCOMES["WRONG"]
            return ok(2.0)
        return next((o for m, o in OUTCOMES.items() if m in source), ok(1.1))

    def profile(self, source, flags, name, mode, case):
        self.profiled.append(case)
        return ProfileView(
            f"{case} ({CASES[case][0]})", f"Bottleneck: memory-latency-bound ({mode})"
        )


def make(tmp_path, answers, rounds=1, budget=None, **opts):
    gpu = FakeGPU()
    provider = Scripted(answers, opts.pop("fail_after", None))
    opt = Optimizer(get_task("vector_add"), "fp32", provider, RunDir(tmp_path), gpu.evaluate,
                    gpu.profile, DEVICE, LoopOptions(rounds=rounds, **opts),
                    budget=budget)  # fmt: skip
    return opt, provider, gpu


def prompt(provider, step) -> str:
    return provider.prompts[step][-1].content


def test_a_faster_correct_kernel_becomes_the_best(tmp_path):
    opt, provider, gpu = make(tmp_path, {"round1/coder": kernel("FAST2")})
    state = opt.run_task()
    assert state.status == "done" and state.best.label == "round1"
    assert state.best.outcome.score == 2.0
    assert provider.calls == ["round1/planner", "round1/coder"]  # flags are measured, not asked
    assert gpu.evaluated[1] == ("round1-try0", ("-O3",), True)  # screened beside its variants
    steps = tmp_path / "vector_add-fp32" / "steps"
    assert (steps / "round1__planner.md").read_text().startswith("## user")
    assert (tmp_path / "ledger.jsonl").read_text().count("\n") == 2


def test_the_planner_is_told_the_objective_the_gpu_each_case_and_the_profiled_case(tmp_path):
    opt, provider, gpu = make(tmp_path, {"round1/coder": kernel("FAST2")})
    opt.run_task()
    text = prompt(provider, "round1/planner")
    # the objective: P, each case's weight, what is timed
    assert "P = sum_i T_i*S_i / sum_i T_i" in text and "(N)" in text
    assert "case 0 (N=1024): 10.00% of P" in text and "case 1 (N=1048576): 90.00% of P" in text
    assert "cold L2" in text and "cudaDeviceSynchronize()" in text and "NaN" in text
    # the tolerance in numbers
    tol = get_task("vector_add").spec.tolerance["fp32"]
    assert f"rtol = {tol.rtol:g}" in text and "ulps" in text
    # the GPU: compute capability, SMs, shared memory and registers per SM, L2, measured figures
    for fact in ("compute capability 9.0", "132 SMs", "228 KiB shared memory", "65536 32-bit "
                 "registers", "50 MiB L2", "2987 GB/s", "51.3 TFLOP/s", "launch + synchronize "
                 "floor of 2.50 us"):  # fmt: skip
        assert fact in text, fact
    # per case: bytes and FLOPs with time, speedups, speed of light
    assert "| 1: N=1048576 | 90.0% | 12.6 MB | 1.05 MFLOP | 500 us (1.0%) | 500 us | 1.00x" in text
    # the profile of the heaviest case, which it says
    assert gpu.profiled == [1, 1] and "Nsight Compute on case 1 (N=1048576)" in text
    assert count_tokens(text) < 3000


def test_history_keeps_every_candidate_kept_or_not(tmp_path):
    answers = {"round1/coder": kernel("FAST2\n__shared__ float s[32];"),
               "round2/coder": kernel("WRONG"), "round3/coder": kernel("SLOW")}  # fmt: skip
    answers["round1/planner"] = (
        "Diagnosis: one block.\nOptimizations:\n1. Use the whole grid. Expect 10x.\n2. Use float4."
    )
    opt, provider, _ = make(tmp_path, answers, rounds=3, debug_attempts=1)
    state = opt.run_task()
    assert [c.kept for c in state.history] == [True, False, False]
    text = prompt(provider, "round3/planner")
    assert "- round1 (from baseline): ok, P 2.000" in text and "kept as the new best" in text
    assert "plan: Use the whole grid.; Use float4." in text
    assert "speedup per case: 2.00, 2.00" in text
    assert (
        "lines against baseline; kernels removed: vector_add_kernel; now uses shared memory" in text
    )
    assert "- round2 (from round1): wrong; not kept" in text
    assert "attempts: try0 wrong, try1 wrong" in text and "failure: case 0: C wrong" in text


def test_the_coder_gets_the_tolerance_semantics_compute_capability_and_exact_build(tmp_path):
    opt, provider, _ = make(tmp_path, {"round1/coder": kernel("FAST2")})
    opt.run_task()
    text = prompt(provider, "round1/coder")
    assert "rtol = " in text and "Compute capability 90" in text
    assert "nvcc -O3 -Xcompiler -fPIC -shared -cudart shared -Xptxas -v -arch=sm_90 -o" in text
    assert "fastest correct build is kept" in text and "90.00% of P" in text
    semantics = get_task("softmax").spec.semantics_note
    fake = FakeGPU()
    opt2 = Optimizer(get_task("softmax"), "fp32", provider, RunDir(tmp_path / "s"),
                     fake.evaluate, fake.profile, DEVICE, LoopOptions(rounds=1))  # fmt: skip
    opt2.run_task()
    assert semantics[:60] in prompt(provider, "round1/coder")


def test_the_debugger_gets_plan_flags_baseline_compile_log_every_failure_and_sanitizers(tmp_path):
    answers = {"round1/coder": kernel("COMPILE_ERROR"), "round1/debug1": kernel("WRONG"),
               "round1/debug2": kernel("FAST2")}  # fmt: skip
    opt, provider, gpu = make(tmp_path, answers)
    state = opt.run_task()
    assert state.best.outcome.score == 2.0
    compile_fix = prompt(provider, "round1/debug1")
    assert "It failed: compile_error" in compile_fix and "1 error detected" in compile_fix
    assert "Optimizations:\n1. Unroll." in compile_fix  # the plan
    assert "-arch=sm_90" in compile_fix  # the build
    baseline = get_task("vector_add").source("baseline", "fp32").read_text()
    assert baseline in compile_fix
    wrong_fix = prompt(provider, "round1/debug2")
    assert wrong_fix.count("expected 0.5, got nan") == 2  # every failing case
    assert "compute-sanitizer --tool racecheck" in wrong_fix and "1 hazard" in wrong_fix
    assert "compute-sanitizer --tool initcheck" in wrong_fix
    assert [n for n, _, _ in gpu.evaluated] == ["baseline", "round1-try0", "round1-try1",
                                                "round1-try2"]  # fmt: skip


def test_a_debug_answer_may_change_the_flags(tmp_path):
    fixed = "Fast math breaks it.\nnvcc flags: -O3 -lineinfo\n" + kernel("FAST2")
    answers = {"round1/coder": kernel("WRONG"), "round1/debug1": fixed}
    opt, _, gpu = make(tmp_path, answers, flags="agent")
    opt.run_task()
    assert gpu.evaluated[-1] == ("round1-try1", ("-O3", "-lineinfo"), False)


def test_the_compiler_agent_is_an_option_and_its_flags_are_not_screened(tmp_path):
    answers = {
        "round1/coder": kernel("FAST2"),
        "round1/compiler": '{"flags": ["-O3", "-lineinfo"]}',
    }
    opt, provider, gpu = make(tmp_path, answers, flags="agent")
    opt.run_task()
    assert provider.calls == ["round1/planner", "round1/coder", "round1/compiler"]
    assert gpu.evaluated[-1] == ("round1-try0", ("-O3", "-lineinfo"), False)


def test_no_code_in_the_answer_asks_once_for_the_whole_file(tmp_path):
    answers = {"round1/coder": "I would tile it with 32x32 blocks.",
               "round1/coder/resend": kernel("FAST2")}  # fmt: skip
    opt, provider, _ = make(tmp_path, answers)
    state = opt.run_task()
    assert state.best.label == "round1"
    resend = provider.prompts["round1/coder/resend"]
    assert [m.role for m in resend] == ["user", "assistant", "user"]
    assert resend[1].content == answers["round1/coder"]
    assert "Send the whole file again" in resend[2].content
    assert "round1/debug1" not in provider.calls


def test_a_baseline_resubmitted_is_not_kept_as_faster(tmp_path):
    opt, _, _ = make(tmp_path, {"round1/coder": kernel("SAME")})
    state = opt.run_task()
    assert state.best.label == "baseline"  # P 1.005 within its noise of 1
    assert state.best_candidate == {"score": 1.005, "noise": pytest.approx(0.01407, abs=1e-4)}


def test_debug_attempts_are_bounded_and_a_slower_kernel_is_not_kept(tmp_path):
    answers = {"round1/coder": kernel("WRONG"), "round2/coder": kernel("SLOW")}
    opt, provider, _ = make(tmp_path, answers, rounds=2, debug_attempts=2)
    state = opt.run_task()
    debug = [c for c in provider.calls if "round1/debug" in c]
    assert debug == [
        "round1/debug1",
        "round1/debug1/resend",
        "round1/debug2",
        "round1/debug2/resend",
    ]  # no code in them: the whole file asked once more
    assert state.best.label == "baseline" and len(state.history) == 2


def test_token_budget_stops_cleanly(tmp_path):
    opt, provider, _ = make(tmp_path, {"round1/coder": kernel("FAST2")}, rounds=3, max_tokens=400)
    state = opt.run_task()
    assert state.status == "stopped" and "token budget" in state.detail
    assert len(provider.calls) == 3  # 150 tokens a call: the fourth would pass 400


def test_calls_in_flight_reserve_the_budget():
    budget = Budget(max_usd=None, max_tokens=1000)
    order: list[str] = []
    first_in = threading.Event()
    release = threading.Event()

    def first():
        with budget.call(Cost(0.0, 700)):
            first_in.set()
            release.wait(5)
            order.append("first done")
            budget.spend(Cost(0.0, 200))

    def second():
        first_in.wait(5)
        with budget.call(Cost(0.0, 700)):  # 700 + 700 > 1000: waits for the first
            order.append("second runs")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    first_in.wait(5)
    threading.Timer(0.2, release.set).start()
    for t in threads:
        t.join(10)
    assert order == ["first done", "second runs"]
    assert budget.spent == Cost(0.0, 200) and budget.reserved == Cost() and budget.in_flight == 0
    budget.spend(Cost(0.0, 800))
    with (
        pytest.raises(BudgetExceeded, match="token budget reached: 1000 of 1000"),
        budget.call(Cost(0.0, 1)),
    ):
        pass


def test_kill_mid_round_then_resume_loses_and_redoes_nothing(tmp_path):
    answers = {"round1/coder": kernel("FAST2"), "round2/coder": kernel("FAST3")}
    opt, first, _ = make(tmp_path, answers, rounds=2, fail_after=3)
    with pytest.raises(KeyboardInterrupt):
        opt.run_task()
    assert first.calls == ["round1/planner", "round1/coder", "round2/planner"]
    opt2, second, gpu2 = make(tmp_path, answers, rounds=2)
    state = opt2.run_task()
    assert state.status == "done" and state.best.outcome.score == 3.0
    assert second.calls == ["round2/coder"]  # nothing finished is asked again
    assert [n for n, _, _ in gpu2.evaluated] == ["round2-try0"]  # the rest from the run dir
    assert sum(1 for _ in (tmp_path / "ledger.jsonl").open()) == 4


def test_a_truncated_answer_is_never_kept_in_the_run_directory(tmp_path):
    class Cut(Scripted):
        def complete(self, messages, options, key):
            c = super().complete(messages, options, key)
            c.truncated = "coder" in key
            return c

    opt, provider, _ = make(tmp_path, {"round1/coder": kernel("FAST2")})
    opt.provider = Cut(provider.answers)
    state = opt.run_task()
    assert state.status == "failed" and "cut" in state.detail
    steps = tmp_path / "vector_add-fp32" / "steps"
    assert (steps / "round1__planner.json").exists()
    assert not (steps / "round1__coder.json").exists()


def test_profile_modes(tmp_path):
    opt, _, gpu = make(tmp_path, {"round1/coder": kernel("FAST2")}, profile="none")
    opt.run_task()
    assert gpu.profiled == []
    planner = (tmp_path / "vector_add-fp32" / "steps" / "round1__planner.md").read_text()
    assert "(no profile: profiling is off (--profile none))" in planner


def test_the_outcome_round_trips_through_the_run_directory():
    o = OUTCOMES["WRONG"]
    assert Outcome.from_dict(o.to_dict()) == o
    assert ok(2.0).sol == 0.2 and not ok(1.005).faster_beyond_noise and ok(1.1).faster_beyond_noise


def test_a_provider_error_fails_the_task_with_one_line(tmp_path):
    class Down(Scripted):
        def complete(self, messages, options, key):
            raise ProviderError("openai:gpt: HTTP 500: boom")

    opt, _, _ = make(tmp_path, {})
    opt.provider = Down({})
    state = opt.run_task()
    assert state.status == "failed" and state.detail == "openai:gpt: HTTP 500: boom"


def test_the_planner_sees_the_flag_screen_of_the_best(tmp_path):
    answers = {"round1/coder": kernel("SCREENED"), "round2/coder": kernel("SLOW")}
    opt, provider, _ = make(tmp_path, answers, rounds=2)
    state = opt.run_task()
    assert state.best.flags == ["-O3", "-maxrregcount=64"]
    text = prompt(provider, "round2/planner")
    assert "build flags `-O3 -maxrregcount=64`" in text
    assert (
        "- `-O3 -maxrregcount=64`: P 2.200\n- `-O3`: P 1.900\n- `-O3 --use_fast_math`: wrong"
        in text
    )
