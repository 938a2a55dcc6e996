"""The optimization loop for one (operator, dtype): plan, code, build, debug, evaluate,
profile, for R rounds, keeping the best correct implementation that is faster beyond the
measurement's noise.

GPU work comes in through two callables (evaluate, profile), so the loop's control flow is
tested on the CPU with a scripted model; agents/gpu.py supplies the real ones. Every answer is
kept in the run directory under its step key once it is whole (a truncated answer never is),
so a resumed run replays them and asks nothing twice.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

from ..device import DeviceFacts
from ..llm.base import AnswerPending, Message, Options, Provider, ProviderError, Usage
from ..llm.complete import complete
from ..profile.summary import count_tokens
from ..tasks import Task
from . import brief as facts
from . import templates
from .budget import Budget, BudgetExceeded, Cost
from .history import Candidate, candidate
from .outcome import Outcome, ProfileView
from .parse import debugger_flags, extract_code, parse_flags, plan_items, resend_request
from .rundir import RunDir, code_hash

log = logging.getLogger(__name__)

FlagMode = Literal["measure", "agent"]


class Evaluate(Protocol):
    def __call__(self, source: str, flags: tuple[str, ...], name: str, screen: bool) -> Outcome: ...


class Profile(Protocol):
    def __call__(self, source: str, flags: tuple[str, ...], name: str, mode: str,
                 case: int) -> ProfileView: ...  # fmt: skip


@dataclass
class LoopOptions:
    rounds: int = 3
    debug_attempts: int = 3
    profile: str = "filtered"  # filtered | full | none
    flags: FlagMode = "measure"  # measure: screened on the GPU; agent: the compiler agent's
    sol_target: float | None = None  # stop early once the best reaches this fraction
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    llm: Options = field(default_factory=Options)


@dataclass
class Version:
    """An implementation the loop holds: the baseline, or a kept candidate."""

    label: str
    source: str
    flags: list[str]
    outcome: Outcome

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Version:
        return cls(data["label"], data["source"], list(data["flags"]),
                   Outcome.from_dict(data["outcome"]))  # fmt: skip


@dataclass
class TaskState:
    status: str = "running"  # running | done | waiting | stopped | failed
    detail: str = ""
    round: int = 0
    baseline: Version | None = None
    best: Version | None = None
    history: list[Candidate] = field(default_factory=list)
    best_candidate: dict[str, float | None] | None = None  # the best correct LLM kernel's P

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskState:
        data = dict(data)
        for key in ("baseline", "best"):
            data[key] = Version.from_dict(data[key]) if data.get(key) else None
        data["history"] = [Candidate.from_dict(c) for c in data.get("history", [])]
        return cls(**data)


class Optimizer:
    def __init__(self, task: Task, variant: str, provider: Provider, run: RunDir,
                 evaluate: Evaluate, profile: Profile, device: DeviceFacts, options: LoopOptions,
                 suite: str = "paper", budget: Budget | None = None) -> None:  # fmt: skip
        self.task, self.variant, self.provider, self.run = task, variant, provider, run
        self.evaluate_fn, self.profile_fn = evaluate, profile
        self.device, self.options, self.suite = device, options, suite
        self.dir = run.task_dir(task.name, variant)
        self.brief = facts.Brief.of(task, variant, suite, device)
        self.budget = budget or Budget(options.max_cost_usd, options.max_tokens,
                                       Cost(*run.spent()))  # fmt: skip

    # -- memoized pieces --------------------------------------------------------------------
    def _converse(self, key: str, messages: list[Message]) -> str:
        """The answer to ``messages``, asked once: replayed from the run directory after."""
        done = self.run.step(self.dir, key)
        if done is not None:
            return str(done["text"])
        cap = self.provider.output_cap(self.options.llm)
        prompt_tokens = sum(count_tokens(m.content) or len(m.content) // 3 for m in messages)
        worst = Cost(self.provider.cost(Usage(prompt_tokens, cap)) or 0.0, prompt_tokens + cap)
        with self.budget.call(worst):
            completion = complete(self.provider, messages, self.options.llm,
                                  key=f"{self.dir.name}/{key}")  # fmt: skip
            self.run.record_step(self.dir, key, [m.__dict__ for m in messages], completion,
                                 self.provider.label)  # fmt: skip
            u = completion.usage
            self.budget.spend(Cost(completion.cost_usd or 0.0, u.input_tokens + u.output_tokens))
        return completion.text

    def _ask(self, key: str, agent: str, **context: Any) -> tuple[str, list[Message]]:
        prompt = [Message("user", templates.render(agent, brief=self.brief, **context))]
        return self._converse(key, prompt), prompt

    def _code(self, key: str, answer: str, prompt: list[Message]) -> str | None:
        """The file in ``answer``; failing that, once, the answer to "send the whole file"."""
        symbol = self.task.symbol(self.variant)
        code = extract_code(answer, symbol)
        if code is not None:
            return code
        again = [*prompt, Message("assistant", answer),
                 Message("user", resend_request(symbol, self.brief.signature))]  # fmt: skip
        return extract_code(self._converse(f"{key}/resend", again), symbol)

    def _evaluate(self, source: str, flags: tuple[str, ...], name: str) -> Outcome:
        screen = self.options.flags == "measure" and name != "baseline"
        digest = code_hash(source, flags) + ("-screened" if screen else "")
        saved = self.run.load_json(self.dir, f"evals/{digest}.json")
        if saved is not None:
            return Outcome.from_dict(saved)
        self.run.save_code(self.dir, name, source)
        outcome = self.evaluate_fn(source, flags, name, screen)
        self.run.save_json(self.dir, f"evals/{digest}.json", outcome.to_dict())
        return outcome

    def _profile(self, version: Version) -> ProfileView | None:
        mode = self.options.profile
        if mode == "none" or not version.outcome.cases:
            return None
        case = max(version.outcome.cases, key=lambda c: c.weight).index
        digest = code_hash(version.source, tuple(version.flags))
        saved = self.run.load_json(self.dir, f"profiles/{digest}-{mode}.json")
        if saved is not None:
            return ProfileView(**saved)
        view = self.profile_fn(version.source, tuple(version.flags), version.label, mode, case)
        self.run.save_json(self.dir, f"profiles/{digest}-{mode}.json", asdict(view))
        return view

    def _save(self, state: TaskState) -> None:
        self.run.save_json(self.dir, "state.json", asdict(state))

    # -- the loop ---------------------------------------------------------------------------
    def run_task(self) -> TaskState:
        saved = self.run.load_json(self.dir, "state.json")
        state = TaskState.from_dict(saved) if saved else TaskState()
        if state.status == "done":
            return state
        try:
            self._loop(state)
            state.status, state.detail = "done", ""
        except AnswerPending as exc:
            state.status, state.detail = "waiting", str(exc)
        except BudgetExceeded as exc:
            state.status, state.detail = "stopped", str(exc)
        except ProviderError as exc:
            state.status, state.detail = "failed", str(exc)
        self._save(state)
        return state

    def _loop(self, state: TaskState) -> None:
        if state.baseline is None:
            src = self.task.source("baseline", self.variant)
            assert src is not None
            base = src.read_text()
            outcome = self._evaluate(base, ("-O3",), "baseline")
            if not outcome.ok:
                raise ProviderError(
                    f"the baseline itself failed: {outcome.verdict} {outcome.detail}"
                )
            state.baseline = state.best = Version("baseline", base, ["-O3"], outcome)
            self._save(state)
        for r in range(state.round + 1, self.options.rounds + 1):
            self._round(state, r)
            state.round = r
            self._save(state)
            assert state.best is not None
            sol, target = state.best.outcome.sol, self.options.sol_target
            if target is not None and sol is not None and sol >= target:
                log.info("%s: %.0f%% of the speed of light reached", self.dir.name, 100 * sol)
                break
        assert state.best is not None
        self._profile(state.best)  # so that results can say its class after the run

    def _round(self, state: TaskState, r: int) -> None:
        best, base = state.best, state.baseline
        assert best is not None and base is not None
        view = self._profile(best)
        plan, _ = self._ask(
            f"round{r}/planner", "planner", best=best, score=facts.score_line(best.outcome),
            table=facts.case_table(best.outcome), trials=facts.trials(best.outcome),
            cases=base.outcome.cases,
            weights=facts.weights(base.outcome.cases), history=facts.history(state.history),
            profile=view if view and view.text else None,
            profile_missing=(view.error if view else "profiling is off (--profile none)"),
        )  # fmt: skip
        flags: tuple[str, ...] = ("-O3",)  # measure mode screens the variants beside it
        answer, prompt = self._ask(
            f"round{r}/coder", "coder", best=best, plan=plan, build=self.brief.build(flags),
            weights=facts.weights(base.outcome.cases), screened=self.options.flags == "measure",
        )  # fmt: skip
        code = self._code(f"round{r}/coder", answer, prompt)
        if self.options.flags == "agent" and code is not None:
            flags = self._agent_flags(r, code, best)
        name, attempts = f"round{r}", []
        outcome = Outcome("no_code", "the answer had no code block defining the entry function")
        for attempt in range(self.options.debug_attempts + 1):
            if code is not None:
                outcome = self._evaluate(code, flags, f"{name}-try{attempt}")
            attempts.append(f"try{attempt} {outcome.verdict if code is not None else 'no_code'}")
            if outcome.ok or attempt == self.options.debug_attempts:
                break
            key = f"round{r}/debug{attempt + 1}"
            answer, prompt = self._ask(
                key, "debugger", outcome=outcome, failures=facts.failures(outcome),
                build=self.brief.build(flags), plan=plan, source=code or answer,
                baseline=base.source,
            )  # fmt: skip
            code = self._code(key, answer, prompt) or code
            if (asked := debugger_flags(answer)) is not None:
                flags = asked[0]
        self._conclude(state, r, best, plan, code, attempts, outcome)

    def _agent_flags(self, r: int, code: str, best: Version) -> tuple[str, ...]:
        text, _ = self._ask(f"round{r}/compiler", "compiler", source=code,
                            build=self.brief.build(("-O3",)),
                            resources=best.outcome.resources)  # fmt: skip
        flags, rejected = parse_flags(text)
        if rejected:
            log.info("%s round %d: flags refused: %s", self.dir.name, r, rejected)
        return flags

    def _conclude(self, state: TaskState, r: int, best: Version, plan: str, code: str | None,
                  attempts: list[str], outcome: Outcome) -> None:  # fmt: skip
        """Keep the candidate if it beats the best, and record it for the planner."""
        if outcome.ok and outcome.score is not None:
            prev = (state.best_candidate or {}).get("score")
            if prev is None or outcome.score > prev:
                state.best_candidate = {"score": outcome.score, "noise": outcome.noise}
        kept = (
            code is not None
            and outcome.ok
            and outcome.faster_beyond_noise
            and (outcome.score or 0.0) > (best.outcome.score or 0.0)
        )
        label = f"round{r}"
        if kept:
            assert code is not None
            state.best = Version(label, code, list(outcome.flags), outcome)
        state.history.append(candidate(r, label, best.label, best.source, code, plan_items(plan),
                                       attempts, outcome, kept))  # fmt: skip
