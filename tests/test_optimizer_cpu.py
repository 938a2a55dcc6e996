"""The optimizer's control flow and prompts with a scripted model and a fake backend (no GPU,
no API): what each agent is told, how the beam is kept, what is screened and what is evaluated
in full, the merge, the stops, and what survives a kill or a machine without a GPU."""

from __future__ import annotations

import json
import shutil
import threading

import pytest

from cudamaster.agents.backend import NeedsGpu, save_device
from cudamaster.agents.budget import Budget, BudgetExceeded, Cost
from cudamaster.agents.loop import LoopOptions, Optimizer
from cudamaster.agents.outcome import Outcome
from cudamaster.agents.pending import gather
from cudamaster.agents.rundir import RunDir
from cudamaster.llm.base import AnswerPending, ProviderError
from cudamaster.profile.summary import count_tokens
from cudamaster.tasks import get_task
from optimizer_fakes import (
    FakeBackend,
    FakeCpu,
    Scripted,
    kernel,
    ok,
    plans,
    wrong,
)

ONE = {"candidates": 1, "merge": False}  # the old loop's shape: one plan, one candidate a round


def make(tmp_path, answers, rounds=1, backend=None, **opts):
    provider = Scripted(answers, opts.pop("fail_after", None), opts.pop("pending", ()))
    backend = backend or FakeBackend()
    opt = Optimizer(get_task("vector_add"), "fp32", provider, RunDir(tmp_path), backend,
                    LoopOptions(rounds=rounds, **opts))  # fmt: skip
    return opt, provider, backend


def prompt(provider, step) -> str:
    return provider.prompts[step][-1].content


# -- one candidate a round: what each agent is told ------------------------------------------


def test_a_faster_correct_kernel_becomes_the_best(tmp_path):
    opt, provider, backend = make(tmp_path, {"round1/c1/coder": kernel("P 2.0")}, **ONE)
    state = opt.run_task()
    assert state.status == "done" and state.best.label == "round1-c1"
    assert state.best.outcome.score == pytest.approx(2.0) and state.best.outcome.stage == "full"
    assert provider.calls == ["round1/planner", "round1/c1/coder"]  # flags measured, not asked
    assert backend.names("screen") == [["round1-c1"]] and backend.variants == [True]
    assert backend.screens[0][0].flags == ("-O3",)
    assert backend.names("evaluate") == [["baseline"], ["round1-c1"]]
    steps = tmp_path / "vector_add-fp32" / "steps"
    assert (steps / "round1__planner.md").read_text().startswith("## user")
    assert (steps / "round1__c1__coder.json").exists()
    assert (tmp_path / "ledger.jsonl").read_text().count("\n") == 2


def test_the_planner_is_told_the_objective_the_gpu_each_case_and_the_profiled_case(tmp_path):
    opt, provider, backend = make(tmp_path, {"round1/c1/coder": kernel("P 2.0")}, candidates=3)
    opt.run_task()
    text = prompt(provider, "round1/planner")
    # the objective: P, each case's weight, what is timed
    assert "P = sum_i T_i*S_i / sum_i T_i" in text and "(N)" in text
    assert "case 0 (N=1024): 0.29% of P" in text and "case 4 (N=262144): 75.07% of P" in text
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
    assert "| 4: N=262144 | 75.1% | 3.15 MB | 262 kFLOP | 500 us (1.0%) | 500 us | 1.00x" in text
    # the profile of the heaviest case, which it says
    assert backend.profiled == [("baseline", "filtered", 4), ("round1-c1", "filtered", 4)]
    assert "Nsight Compute on case 4 (N=262144)" in text
    # N plans on distinct strategies, each naming its parent
    assert "Write 3 plans" in text and "## Plan 1\nParent:" in text and "latency hiding" in text
    assert count_tokens(text) < 3500


def test_history_keeps_every_candidate_kept_or_not_with_how_far_it_got(tmp_path):
    answers = {"round1/c1/coder": kernel("P 2.0\n__shared__ float s[32];"),
               "round2/c1/coder": kernel("WRONG"), "round3/c1/coder": kernel("P 0.5")}  # fmt: skip
    answers["round1/planner"] = (
        "Diagnosis: one block.\nOptimizations:\n1. Use the whole grid. Expect 10x.\n2. Use float4."
    )
    opt, provider, _ = make(tmp_path, answers, rounds=3, debug_attempts=1, patience=None, **ONE)
    state = opt.run_task()
    assert [c.kept for c in state.history] == [True, False, False]
    assert [c.stage for c in state.history] == ["full", "screen", "screen"]
    assert state.history[2].screen_score == pytest.approx(0.5)
    text = prompt(provider, "round3/planner")
    assert "- round1-c1 (from baseline): ok, P 2.000 +- 0.028 (full evaluation); kept as the new " \
           "best" in text  # fmt: skip
    assert "plan: Use the whole grid.; Use float4." in text
    assert "speedup per case: 2.00, 2.00, 2.00, 2.00, 2.00" in text
    assert (
        "lines against baseline; kernels removed: vector_add_kernel; now uses shared memory" in text
    )
    assert "- round2-c1 (from round1-c1): wrong; not kept" in text
    assert "attempts: try0 wrong, try1 wrong" in text and "failure: case 0: C wrong" in text


def test_the_coder_gets_the_tolerance_semantics_compute_capability_and_exact_build(tmp_path):
    opt, provider, _ = make(tmp_path, {"round1/c1/coder": kernel("P 2.0")}, **ONE)
    opt.run_task()
    text = prompt(provider, "round1/c1/coder")
    assert "rtol = " in text and "Compute capability 90" in text
    assert ("nvcc -O3 -Xcompiler -fPIC -shared -cudart shared -Xptxas -v -DCCCL_DISABLE_NVTX "
            "-gencode arch=compute_90a,code=[sm_90a,compute_90a] -o") in text  # fmt: skip
    assert "Every build targets sm_90a" in text and "wgmma" in text  # Hopper's own, said
    assert "fastest correct build is kept" in text and "75.07% of P" in text
    baseline = get_task("vector_add").source("baseline", "fp32").read_text()
    assert "starts from (baseline)" in text and baseline in text
    semantics = get_task("softmax").spec.semantics_note
    opt2 = Optimizer(get_task("softmax"), "fp32", provider, RunDir(tmp_path / "s"), FakeBackend(),
                     LoopOptions(rounds=1, **ONE))  # fmt: skip
    opt2.run_task()
    assert semantics[:60] in prompt(provider, "round1/c1/coder")


def test_the_debugger_gets_plan_flags_baseline_compile_log_every_failure_and_sanitizers(tmp_path):
    answers = {"round1/c1/coder": kernel("COMPILE_ERROR"), "round1/c1/debug1": kernel("WRONG"),
               "round1/c1/debug2": kernel("P 2.0")}  # fmt: skip
    opt, provider, backend = make(tmp_path, answers, **ONE)
    state = opt.run_task()
    assert state.best.outcome.score == pytest.approx(2.0)
    compile_fix = prompt(provider, "round1/c1/debug1")
    assert "It failed: compile_error" in compile_fix and "1 error detected" in compile_fix
    assert "Optimizations:\n1. Unroll." in compile_fix  # the plan
    assert "code=[sm_90a,compute_90a]" in compile_fix  # the build
    baseline = get_task("vector_add").source("baseline", "fp32").read_text()
    assert baseline in compile_fix
    wrong_fix = prompt(provider, "round1/c1/debug2")
    assert wrong_fix.count("expected 0.5, got nan") == 5  # every failing case
    assert "compute-sanitizer --tool racecheck" in wrong_fix and "1 hazard" in wrong_fix
    assert "compute-sanitizer --tool initcheck" in wrong_fix
    # the compile error is fixed before any GPU work; the wrong result after its screening
    assert [what for what, _ in backend.events] == ["evaluate", "compile", "compile", "screen",
                                                    "compile", "screen", "evaluate"]  # fmt: skip
    assert state.history[0].attempts == ["try0 compile_error", "try1 wrong", "try2 ok", "full ok"]


def test_a_debug_answer_may_change_the_flags(tmp_path):
    fixed = "Fast math breaks it.\nnvcc flags: -O3 -lineinfo\n" + kernel("P 2.0")
    answers = {"round1/c1/coder": kernel("WRONG"), "round1/c1/debug1": fixed}
    opt, _, backend = make(tmp_path, answers, flags="agent", **ONE)
    state = opt.run_task()
    assert [s[0].flags for s in backend.screens] == [("-O3",), ("-O3", "-lineinfo")]
    assert backend.variants == [False, False]
    assert backend.evaluations[-1][0].flags == ("-O3", "-lineinfo")
    assert state.best.flags == ["-O3", "-lineinfo"]


def test_the_compiler_agent_is_an_option_and_its_flags_are_not_screened(tmp_path):
    answers = {
        "round1/c1/coder": kernel("P 2.0"),
        "round1/c1/compiler": '{"flags": ["-O3", "-lineinfo"]}',
    }
    opt, provider, backend = make(tmp_path, answers, flags="agent", **ONE)
    opt.run_task()
    assert provider.calls == ["round1/planner", "round1/c1/coder", "round1/c1/compiler"]
    assert backend.screens[0][0].flags == ("-O3", "-lineinfo") and backend.variants == [False]


def test_no_code_in_the_answer_asks_once_for_the_whole_file(tmp_path):
    answers = {"round1/c1/coder": "I would tile it with 32x32 blocks.",
               "round1/c1/coder/resend": kernel("P 2.0")}  # fmt: skip
    opt, provider, _ = make(tmp_path, answers, **ONE)
    state = opt.run_task()
    assert state.best.label == "round1-c1"
    resend = provider.prompts["round1/c1/coder/resend"]
    assert [m.role for m in resend] == ["user", "assistant", "user"]
    assert resend[1].content == answers["round1/c1/coder"]
    assert "Send the whole file again" in resend[2].content
    assert not any("debug" in c for c in provider.calls)


def test_a_baseline_resubmitted_is_not_kept_as_faster(tmp_path):
    opt, _, backend = make(tmp_path, {"round1/c1/coder": kernel("P 1.005")}, **ONE)
    state = opt.run_task()
    assert backend.names("evaluate")[-1] == ["round1-c1"]  # it could have won: evaluated
    assert state.best.label == "baseline"  # P 1.005 within its noise of 1
    assert state.best_candidate == {"score": pytest.approx(1.005), "full": True,
                                    "noise": pytest.approx(0.01407, abs=1e-4)}  # fmt: skip


def test_debug_attempts_are_bounded_and_a_slower_kernel_is_not_kept(tmp_path):
    answers = {"round1/c1/coder": kernel("WRONG"), "round2/c1/coder": kernel("P 0.5")}
    opt, provider, _ = make(tmp_path, answers, rounds=2, debug_attempts=2, **ONE)
    state = opt.run_task()
    debug = [c for c in provider.calls if "round1/c1/debug" in c]
    assert debug == [
        "round1/c1/debug1",
        "round1/c1/debug1/resend",
        "round1/c1/debug2",
        "round1/c1/debug2/resend",
    ]  # no code in them: the whole file asked once more
    assert state.best.label == "baseline" and len(state.history) == 2


def test_a_correct_kernel_too_slow_for_a_full_evaluation_counts_as_correct_only(tmp_path):
    from cudamaster.agents.results import TaskResult

    opt, _, _ = make(tmp_path, {"round1/c1/coder": kernel("P 0.5")}, rounds=1, **ONE)
    state = opt.run_task()
    assert state.best.label == "baseline" and state.history[0].stage == "screen"
    assert state.best_candidate == {"score": 0.5, "noise": pytest.approx(0.007), "full": False}
    row = TaskResult(**dict.fromkeys(TaskResult.__dataclass_fields__, None) | {
        "candidate_score": 0.5, "candidate_full": False})  # fmt: skip
    assert row.scored is not None and row.scored.score == 0.0  # tau 0 only, no screened P


def test_every_gpu_session_is_logged_with_its_wall_time_once(tmp_path):
    opt, _, _ = make(tmp_path, {"round1/c1/coder": kernel("P 2.0")}, rounds=1, **ONE)
    opt.run_task()
    opt.run_task()  # a replay runs no session again
    kinds = [json.loads(line)["kind"] for line in (tmp_path / "gpu.jsonl").read_text().splitlines()]
    # the baseline, the profile of the best before round 1, the screen, the full evaluation
    # beside nothing (the best was the baseline), the profile of the new best
    assert kinds == ["full", "profile", "screen", "full", "profile"]
    assert set(RunDir(tmp_path).gpu_seconds()) == {"vector_add-fp32"}


def test_token_budget_stops_cleanly(tmp_path):
    answers = {"round1/c1/coder": kernel("P 2.0")}
    opt, provider, _ = make(tmp_path, answers, rounds=3, max_tokens=400, **ONE)
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
    answers = {"round1/c1/coder": kernel("P 2.0"), "round2/c1/coder": kernel("P 3.0")}
    opt, first, _ = make(tmp_path, answers, rounds=2, fail_after=3, **ONE)
    with pytest.raises(KeyboardInterrupt):
        opt.run_task()
    assert first.calls == ["round1/planner", "round1/c1/coder", "round2/planner"]
    opt2, second, backend2 = make(tmp_path, answers, rounds=2, **ONE)
    state = opt2.run_task()
    assert state.status == "done" and state.best.outcome.score == pytest.approx(3.0)
    assert second.calls == ["round2/c1/coder"]  # nothing finished is asked again
    assert backend2.names("compile") == [["round2-c1"]]  # the rest from the run directory
    assert backend2.names("screen") == [["round2-c1"]]
    assert backend2.names("evaluate") == [["round1-c1", "round2-c1"]]
    assert sum(1 for _ in (tmp_path / "ledger.jsonl").open()) == 4


def test_a_truncated_answer_is_never_kept_in_the_run_directory(tmp_path):
    class Cut(Scripted):
        def complete(self, messages, options, key):
            c = super().complete(messages, options, key)
            c.truncated = "coder" in key
            return c

    opt, provider, _ = make(tmp_path, {"round1/c1/coder": kernel("P 2.0")}, **ONE)
    opt.provider = Cut(provider.answers)
    state = opt.run_task()
    assert state.status == "failed" and "cut" in state.detail
    steps = tmp_path / "vector_add-fp32" / "steps"
    assert (steps / "round1__planner.json").exists()
    assert not (steps / "round1__c1__coder.json").exists()


@pytest.mark.parametrize("mode", ["none", "full"])
def test_profile_modes(tmp_path, mode):
    opt, _, backend = make(tmp_path, {"round1/c1/coder": kernel("P 2.0")}, profile=mode, **ONE)
    opt.run_task()
    planner = (tmp_path / "vector_add-fp32" / "steps" / "round1__planner.md").read_text()
    if mode == "none":
        assert backend.profiled == []
        assert "(no profile: profiling is off (--profile none))" in planner
    else:
        assert backend.profiled == [("baseline", "full", 4), ("round1-c1", "full", 4)]
        assert "Bottleneck: memory-latency-bound (full)" in planner


def test_the_outcome_round_trips_through_the_run_directory():
    o = wrong("screen")
    assert Outcome.from_dict(o.to_dict()) == o
    assert ok(2.0).sol == pytest.approx(0.2)
    assert not ok(1.005).faster_beyond_noise and ok(1.1).faster_beyond_noise


def test_a_provider_error_fails_the_task_with_one_line(tmp_path):
    class Down(Scripted):
        def complete(self, messages, options, key):
            raise ProviderError("openai:gpt: HTTP 500: boom")

    opt, _, _ = make(tmp_path, {})
    opt.provider = Down({})
    state = opt.run_task()
    assert state.status == "failed" and state.detail == "openai:gpt: HTTP 500: boom"


def test_the_planner_sees_the_flag_screen_of_the_best_after_its_full_evaluations(tmp_path):
    answers = {"round1/c1/coder": kernel("SCREENED\n// P 2.2"),
               "round2/c1/coder": kernel("P 1.5\n// SCREEN 2.5")}  # fmt: skip
    opt, provider, backend = make(tmp_path, answers, rounds=3, **ONE)
    state = opt.run_task()
    assert state.best.label == "round1-c1" and state.best.flags == ["-O3", "-maxrregcount=64"]
    assert backend.evaluations[1][0].flags == ("-O3", "-maxrregcount=64")  # the screen's choice
    assert backend.names("evaluate")[2] == ["round1-c1", "round2-c1"]  # re-measured in round 2
    screen = "- `-O3 -maxrregcount=64`: P 2.200\n- `-O3`: P 1.900\n- `-O3 --use_fast_math`: wrong"
    for r in (2, 3):
        text = prompt(provider, f"round{r}/planner")
        assert "build flags `-O3 -maxrregcount=64`" in text and screen in text


# -- the beam -----------------------------------------------------------------------------------

BEAM_ANSWERS = {
    "round1/planner": plans("baseline", "baseline", "baseline"),
    "round1/c1/coder": kernel("P 2.0"), "round1/c2/coder": kernel("P 3.0"),
    "round1/c3/coder": kernel("P 0.5"),
    "round2/planner": plans("round1-c1", "round1-c2", "nobody"),
    "round2/c1/coder": kernel("P 2.5"), "round2/c2/coder": kernel("WRONG"),
    "round2/c3/coder": kernel("P 0.4"),
}  # fmt: skip


def beam_run(tmp_path, beam: int):
    return make(tmp_path, BEAM_ANSWERS, rounds=2, candidates=3, beam=beam, patience=None,
                merge=False, debug_attempts=0)  # fmt: skip


def test_each_plan_is_coded_from_the_parent_it_names(tmp_path):
    opt, provider, _ = beam_run(tmp_path, beam=2)
    state = opt.run_task()
    coders = [f"round{r}/c{k}/coder" for r in (1, 2) for k in (1, 2, 3)]
    assert sorted(provider.calls) == sorted(["round1/planner", "round2/planner", *coders])
    for k, parent in [(1, "round1-c1"), (2, "round1-c2"), (3, "round1-c2")]:  # nobody: the best
        text = prompt(provider, f"round2/c{k}/coder")
        assert f"starts from ({parent})" in text
        assert f"// P {'2.0' if parent == 'round1-c1' else '3.0'}" in text  # its source
        assert [j for j in (1, 2, 3) if f"1. Idea {j}." in text] == [k]  # its own plan alone
    assert [(c.parent, c.strategy) for c in state.history if c.round == 2] == [
        ("round1-c1", "strategy 1"), ("round1-c2", "strategy 2"), ("round1-c2", "strategy 3")
    ]  # fmt: skip
    planner = prompt(provider, "round2/planner")
    assert "## The other parents you may start from" in planner
    assert "### round1-c1 (build flags `-O3`): P = 2.000 +- 0.028 (full evaluation)" in planner
    assert "// P 2.0" in planner  # its source
    assert "(round1-c2, round1-c1)" in planner  # the labels it may name


@pytest.mark.parametrize("beam, beams", [
    (1, [["round1-c2"], ["round1-c2"]]),
    (2, [["round1-c2", "round1-c1"], ["round1-c2", "round2-c1"]]),
    (3, [["round1-c2", "round1-c1", "round1-c3"], ["round1-c2", "round2-c1", "round1-c1"]]),
])  # fmt: skip
def test_the_beam_is_the_best_then_the_fastest_other_correct_versions(tmp_path, beam, beams):
    opt, _, _ = beam_run(tmp_path, beam)
    state = opt.run_task()
    # round 1: round1-c2 (P 3) beats round1-c1 (P 2) in full; round1-c3 (P 0.5) only screened
    # round 2: round2-c1 screens at 2.5 (no chance against 3), round2-c2 is wrong, c3 slow
    assert state.beams == beams
    assert [v.label for v in state.beam] == beams[-1] and state.best.label == "round1-c2"
    # a member never evaluated in full is held at its screening
    stages = {v.label: v.outcome.stage for v in state.beam}
    assert stages["round1-c2"] == "full" and stages.get("round2-c1", "screen") == "screen"


def test_a_draft_that_fails_its_full_evaluation_is_kept_out_of_the_beam(tmp_path):
    answers = {"round1/planner": plans("baseline", "baseline"), "round1/c1/coder": kernel("P 2.0"),
               "round1/c2/coder": kernel("P 3.0\n// UNSEEN_AT_FULL")}  # fmt: skip
    opt, _, backend = make(tmp_path, answers, candidates=2, beam=3, merge=False)
    state = opt.run_task()
    assert backend.names("evaluate")[-1] == ["round1-c1", "round1-c2"]
    assert state.best.label == "round1-c1" and [v.label for v in state.beam] == ["round1-c1"]
    c2 = state.history[1]
    assert (c2.verdict, c2.stage, c2.screen_score) == (
        "wrong_on_unseen",
        "full",
        pytest.approx(3.0),
    )
    assert state.best_candidate["score"] == pytest.approx(2.0)


# -- screening, then the full evaluation --------------------------------------------------------


def test_every_built_draft_is_screened_at_once_and_only_those_that_could_win_in_full(tmp_path):
    answers = {
        "round1/planner": plans(*["baseline"] * 4),
        "round1/c1/coder": kernel("P 2.0"),
        "round1/c2/coder": kernel("P 0.5"),
        "round1/c3/coder": kernel("COMPILE_ERROR"),
        "round1/c4/coder": kernel("P 1.5"),
    }
    opt, _, backend = make(tmp_path, answers, candidates=4, debug_attempts=0, merge=False)
    state = opt.run_task()
    assert backend.names("screen") == [["round1-c1", "round1-c2", "round1-c4"]]  # one session
    assert backend.names("evaluate") == [["baseline"], ["round1-c1", "round1-c4"]]
    stages = {c.label: (c.stage, c.verdict) for c in state.history}
    assert stages == {
        "round1-c1": ("full", "ok"),
        "round1-c2": ("screen", "ok"),
        "round1-c3": ("", "compile_error"),
        "round1-c4": ("full", "ok"),
    }
    assert state.best.label == "round1-c1"


def test_the_best_is_remeasured_beside_its_challengers_and_a_lucky_screen_does_not_win(tmp_path):
    answers = {"round1/c1/coder": kernel("P 2.0"),
               "round2/planner": plans("round1-c1", "round1-c1"),
               "round2/c1/coder": kernel("P 1.9\n// SCREEN 2.4"),  # fast only when screened
               "round2/c2/coder": kernel("P 1.5")}  # fmt: skip
    opt, _, backend = make(tmp_path, answers, rounds=2, candidates=2, merge=False)
    state = opt.run_task()
    assert backend.names("evaluate") == [["baseline"], ["round1-c1"], ["round1-c1", "round2-c1"]]
    assert state.best.label == "round1-c1" and state.last_gain == 1
    assert state.best.outcome.detail == "session 3"  # the new measurement replaced the old
    assert state.trajectory == pytest.approx([1.0, 2.0, 2.0])
    round2 = {c.label: (c.stage, c.kept) for c in state.history if c.round == 2}
    assert round2 == {"round2-c1": ("full", False), "round2-c2": ("screen", False)}


def test_a_runtime_failure_at_screening_is_debugged_and_screened_again_alone(tmp_path):
    answers = {"round1/planner": plans("baseline", "baseline"),
               "round1/c1/coder": kernel("WRONG"), "round1/c2/coder": kernel("P 2.0"),
               "round1/c1/debug1": kernel("P 2.5")}  # fmt: skip
    opt, provider, backend = make(tmp_path, answers, candidates=2, merge=False)
    state = opt.run_task()
    assert backend.names("screen") == [["round1-c1", "round1-c2"], ["round1-c1"]]
    assert backend.names("evaluate")[-1] == ["round1-c1", "round1-c2"]
    assert [c for c in provider.calls if "debug" in c] == ["round1/c1/debug1"]
    assert "It failed: wrong" in prompt(provider, "round1/c1/debug1")
    assert state.best.label == "round1-c1" and state.history[0].attempts == [
        "try0 wrong", "try1 ok", "full ok"
    ]  # fmt: skip


# -- the merge ----------------------------------------------------------------------------------

# one thread per element: ahead on the small sizes (its marker: per-case speedups for the fake)
SMALL = """// P 4,4,4,1,1
#include <cuda_runtime.h>

__global__ void add(const float* A, const float* B, float* C, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) C[i] = A[i] + B[i];
}

extern "C" void vector_add(const float* A, const float* B, float* C, int N) {
    add<<<(N + 255) / 256, 256>>>(A, B, C, N);
    cudaDeviceSynchronize();
}
"""

# float4 loads over a grid-stride loop: ahead on the large sizes
LARGE = """// P 0.5,0.5,0.5,3,3
#include <cuda_runtime.h>

#define THREADS 512

__global__ void add(const float* A, const float* B, float* C, int N) {
    int stride = gridDim.x * blockDim.x, n4 = N / 4;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 a = reinterpret_cast<const float4*>(A)[i];
        float4 b = reinterpret_cast<const float4*>(B)[i];
        reinterpret_cast<float4*>(C)[i] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    }
    for (int i = 4 * n4 + blockIdx.x * blockDim.x + threadIdx.x; i < N; i += stride)
        C[i] = A[i] + B[i];
}

extern "C" void vector_add(const float* A, const float* B, float* C, int N) {
    add<<<264, THREADS>>>(A, B, C, N);
    cudaDeviceSynchronize();
}
"""
MERGE_ANSWERS = {
    "round1/planner": plans("baseline", "baseline"),
    "round1/c1/coder": f"```cuda\n{SMALL}```",
    "round1/c2/coder": f"```cuda\n{LARGE}```",
}


@pytest.mark.skipif(not shutil.which("nvcc"), reason="needs nvcc")
def test_kernels_leading_on_different_sizes_merge_into_a_dispatcher_that_builds_and_wins(tmp_path):
    backend = FakeBackend(nvcc=tmp_path / "builds")
    opt, _, _ = make(tmp_path / "run", MERGE_ANSWERS, candidates=2, backend=backend)
    state = opt.run_task()
    assert backend.built == {"round1-c1": None, "round1-c2": None, "round1-merge": None}  # nvcc
    assert backend.names("screen") == [["round1-c1", "round1-c2"], ["round1-merge"]]
    # LARGE (P 2.85) won the round; the merge is evaluated beside it, and beats it
    assert backend.names("evaluate")[1:] == [["round1-c1", "round1-c2"],
                                             ["round1-c2", "round1-merge"]]  # fmt: skip
    best = state.best
    assert best.label == "round1-merge" and state.beams == [["round1-merge", "round1-c2"]]
    assert [c.vs_baseline for c in best.outcome.cases] == [4, 4, 4, 3, 3]  # the faster path's
    assert best.outcome.score == pytest.approx((4 * 21 + 3 * 320) / 341)
    assert best.source.startswith("// cudamaster dispatch: vector_add() runs path 1 when N < 32768")
    merge = state.history[-1]
    assert (merge.label, merge.strategy, merge.kept, merge.stage) == (
        "round1-merge", "per-size dispatch", True, "full"
    )  # fmt: skip


def test_a_merge_may_pick_any_two_kernels_of_the_pool_and_names_them(tmp_path):
    answers = {"round1/planner": plans("baseline", "baseline", "baseline"),
               "round1/c1/coder": kernel("P 4,4,4,1,1"), "round1/c2/coder": kernel("P 1.5"),
               "round1/c3/coder": kernel("P 0.5,0.5,0.5,3,3")}  # fmt: skip
    opt, _, _ = make(tmp_path, answers, candidates=3)
    state = opt.run_task()
    # the pool is the beam (round1-c3, round1-c2), then round1-c1: the rule takes its 3rd and 1st
    merge = state.history[-1]
    assert merge.label == "round1-merge" and merge.kept
    assert merge.optimizations[0].startswith(
        "Per-size dispatch: round1-c1 where N < 32768, else round1-c3"
    )


@pytest.mark.parametrize("c1, c2, merge", [
    ("P 2.0", "P 3.0", True),  # the second leads on every case: nothing to merge
    ("P 4,4,4,1,1", "P 0.5,0.5,0.5,3,3", False),  # each leads somewhere, but merging is off
])  # fmt: skip
def test_no_merge_when_one_kernel_leads_everywhere_or_merging_is_off(tmp_path, c1, c2, merge):
    answers = {"round1/planner": plans("baseline", "baseline"),
               "round1/c1/coder": kernel(c1), "round1/c2/coder": kernel(c2)}  # fmt: skip
    opt, _, backend = make(tmp_path, answers, candidates=2, merge=merge)
    state = opt.run_task()
    assert backend.names("screen") == [["round1-c1", "round1-c2"]]
    assert [c.label for c in state.history] == ["round1-c1", "round1-c2"]
    assert state.best.label == "round1-c2"


# -- when a task stops --------------------------------------------------------------------------


def test_a_task_stops_after_patience_rounds_without_a_new_best(tmp_path):
    answers = {
        f"round{r}/c1/coder": kernel(f"P {p}")
        for r, p in [(1, 0.5), (2, 2.0), (3, 0.5), (4, 1.5), (5, 3.0)]
    }
    opt, provider, _ = make(tmp_path, answers, rounds=5, patience=2, **ONE)
    state = opt.run_task()
    assert (state.status, state.stop_reason, state.round) == ("done", "patience", 4)
    assert state.detail == "no new best in 2 rounds" and state.last_gain == 2
    assert "round5/planner" not in provider.calls


def test_the_speed_of_light_target_stops_a_task(tmp_path):
    answers = {f"round{r}/c1/coder": kernel(f"P {p}") for r, p in [(1, 3.0), (2, 6.0), (3, 9.0)]}
    opt, provider, _ = make(tmp_path, answers, rounds=3, sol_target=0.5, **ONE)
    state = opt.run_task()  # a tenth of its speedup: 30%, then 60% of the speed of light
    assert (state.stop_reason, state.round, state.detail) == (
        "sol_target",
        2,
        "60% of the speed of light reached",
    )
    assert "round3/planner" not in provider.calls


# -- waiting for an answer, or for a GPU --------------------------------------------------------


def test_a_pending_answer_does_not_hold_back_its_siblings(tmp_path):
    answers = {
        "round1/planner": plans("baseline", "baseline", "baseline"),
        "round1/c1/coder": kernel("P 2.0"),
        "round1/c2/coder": kernel("COMPILE_ERROR"),
        "round1/c2/debug1": kernel("P 1.5"),
        "round1/c3/coder": kernel("P 3.0"),
    }
    opt, provider, backend = make(tmp_path, answers, candidates=3, debug_attempts=1,
                                  pending=("round1/c1/coder",))  # fmt: skip
    state = opt.run_task()
    assert state.status == "waiting" and "round1/c1/coder" in state.detail
    # its siblings were coded, built, and debugged as far as they could go without it
    assert {"round1/c2/coder", "round1/c2/debug1", "round1/c3/coder"} <= set(provider.calls)
    assert sorted(n for (n,) in backend.names("compile")) == ["round1-c2", "round1-c2",
                                                               "round1-c3"]  # fmt: skip
    assert backend.names("screen") == [] and state.round == 0 and state.history == []
    opt2, again, backend2 = make(tmp_path, answers, candidates=3, debug_attempts=1)
    state = opt2.run_task()
    assert again.calls == ["round1/c1/coder"]  # the only step still to ask
    assert backend2.names("screen") == [["round1-c1", "round1-c2", "round1-c3"]]
    assert state.status == "done" and state.best.label == "round1-c3"


def test_without_a_gpu_a_task_asks_and_builds_every_candidate_then_waits_for_one(tmp_path):
    answers = {
        "round1/planner": plans("baseline", "baseline", "baseline"),
        **{f"round1/c{k}/coder": kernel(f"P {k}.5") for k in (1, 2, 3)},
    }
    opts = {"candidates": 3, "merge": False}
    # a new run on a machine without a GPU: the baseline's evaluation needs one; nothing asked
    opt, provider, _ = make(tmp_path, answers, backend=FakeCpu(tmp_path), **opts)
    state = opt.run_task()
    assert state.status == "needs_gpu" and provider.calls == []
    assert state.detail == "1 evaluation(s) to run (no GPU found)" and state.baseline is None
    # on a GPU: the baseline is evaluated and profiled; then the planner's answer is pending
    opt, _, _ = make(tmp_path, answers, pending=("round1/planner",), **opts)
    assert opt.run_task().status == "waiting"
    save_device(tmp_path, opt.backend.device())  # as the runner does where it sees a GPU
    # without a GPU again: the planner and every coder asked, every candidate built
    cpu = FakeCpu(tmp_path)
    opt, provider, _ = make(tmp_path, answers, backend=cpu, **opts)
    state = opt.run_task()
    assert state.status == "needs_gpu" and state.detail.startswith("3 candidate(s) to screen")
    assert sorted(provider.calls) == ["round1/c1/coder", "round1/c2/coder", "round1/c3/coder",
                                      "round1/planner"]  # fmt: skip
    assert sorted(n for (n,) in cpu.fake.names("compile")) == ["round1-c1", "round1-c2",
                                                                "round1-c3"]  # fmt: skip
    code = tmp_path / "vector_add-fp32" / "code"
    assert sorted(p.name for p in code.glob("round1-*.cu")) == [
        f"round1-c{k}.cu" for k in (1, 2, 3)
    ]
    # on a GPU: every candidate screened in one session, nothing asked again
    opt, provider, gpu = make(tmp_path, answers, **opts)
    state = opt.run_task()
    assert provider.calls == [] and gpu.names("screen") == [["round1-c1", "round1-c2", "round1-c3"]]
    assert state.status == "done" and state.best.label == "round1-c3"


def test_a_round_cut_short_after_its_candidates_concluded_is_recorded_once(tmp_path):
    class KilledAtTheMerge(FakeBackend):
        def screen(self, subs, variants):
            if any(s.name.endswith("-merge") for s in subs):
                raise KeyboardInterrupt("killed")
            return super().screen(subs, variants)

    answers = {"round1/planner": plans("baseline", "baseline"),
               "round1/c1/coder": kernel("P 4,4,4,1,1"),
               "round1/c2/coder": kernel("P 0.5,0.5,0.5,3,3")}  # fmt: skip
    opt, _, _ = make(tmp_path, answers, candidates=2, backend=KilledAtTheMerge())
    with pytest.raises(KeyboardInterrupt):
        opt.run_task()
    save_device(tmp_path, opt.backend.device())
    # without a GPU the round replays to the merge's screening, and keeps nothing of itself
    opt, _, _ = make(tmp_path, answers, candidates=2, backend=FakeCpu(tmp_path))
    state = opt.run_task()
    assert state.status == "needs_gpu" and state.detail.startswith("1 candidate(s) to screen")
    assert (state.round, state.history, state.best.label) == (0, [], "baseline")
    opt, _, gpu = make(tmp_path, answers, candidates=2)
    state = opt.run_task()
    assert gpu.names("screen") == [["round1-merge"]]
    assert [c.label for c in state.history] == ["round1-c1", "round1-c2", "round1-merge"]
    assert state.best.label == "round1-merge" and state.trajectory == pytest.approx(
        [1.0, (4 * 21 + 3 * 320) / 341]
    )


def test_gather_lets_every_step_run_then_raises_an_error_before_a_pending_answer_before_a_gpu():
    ran: list[str] = []

    def step(name: str, exc: Exception | None = None):
        def job():
            ran.append(name)
            if exc is not None:
                raise exc

        return job

    gpu, answer, bug = NeedsGpu("screen"), AnswerPending("c2.prompt.md"), ValueError("bug")
    raises = {"a": gpu, "b": answer, "c": bug, "d": None}
    for names, raised in [("abcd", bug), ("abd", answer), ("ad", gpu)]:
        ran.clear()
        with pytest.raises(type(raised)) as caught:
            gather([step(n, raises[n]) for n in names])
        assert caught.value is raised and sorted(ran) == list(names)  # every step ran
    assert gather([lambda: 1, lambda: 2]) == [1, 2]


def test_hopper_builds_for_sm_90a_and_other_gpus_for_their_own_arch():
    from dataclasses import replace

    from cudamaster.agents.brief import arch_note
    from cudamaster.device import nvcc_arch
    from optimizer_fakes import DEVICE

    assert (nvcc_arch("90"), nvcc_arch("80"), nvcc_arch("100")) == ("sm_90a", "sm_80", "sm_100")
    ampere = replace(DEVICE, compute_capability="80")
    assert ampere.arch == "sm_80" and arch_note(ampere) == ""
    assert "setmaxnreg" in arch_note(DEVICE) and DEVICE.arch == "sm_90a"
