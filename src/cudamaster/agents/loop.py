"""The optimization loop for one (operator, dtype): plan, code, compile, debug, evaluate,
profile, for R rounds, keeping the best correct and faster implementation by the score.

GPU work comes in through two callables (evaluate, profile), so the loop's control flow is
tested on the CPU with a scripted model; agents/gpu.py supplies the real ones.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..llm.base import AnswerPending, Message, Options, Provider, ProviderError
from ..tasks import Task
from . import templates
from .parse import ALLOWED_FLAGS, extract_code, parse_flags
from .rundir import RunDir, code_hash

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    """What the evaluator said about one candidate."""

    verdict: str  # ok | compile_error | wrong | crash | timeout | forbidden | ...
    detail: str = ""
    score: float | None = None  # P = sum(T*S)/sum(T) against the baseline
    geomean: float | None = None
    sol: float | None = None  # fraction of the speed of light on the largest case
    summary: str = ""  # per-case table for the planner
    resources: str = ""  # ptxas registers, spills, shared memory

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"


Evaluate = Callable[[str, tuple[str, ...], str], Outcome]  # (source, flags, name)
Profile = Callable[[str, tuple[str, ...], str, str], str | None]  # (source, flags, name, mode)


@dataclass
class LoopOptions:
    rounds: int = 3
    debug_attempts: int = 3
    profile: str = "filtered"  # filtered | full | none
    sol_target: float | None = None  # stop early once the best reaches this fraction
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    llm: Options = field(default_factory=Options)


class BudgetExceeded(Exception):
    pass


@dataclass
class TaskState:
    status: str = "running"  # running | done | waiting | stopped | failed
    detail: str = ""
    round: int = 0
    best: dict[str, Any] = field(default_factory=dict)
    baseline: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    best_candidate_score: float | None = None  # the best correct LLM-written kernel's score


class Optimizer:
    def __init__(self, task: Task, variant: str, provider: Provider, run: RunDir,
                 evaluate: Evaluate, profile: Profile, device: dict[str, Any],
                 options: LoopOptions) -> None:  # fmt: skip
        self.task, self.variant, self.provider, self.run = task, variant, provider, run
        self.evaluate_fn, self.profile_fn = evaluate, profile
        self.device, self.options = device, options
        self.dir = run.task_dir(task.name, variant)
        self.signature = _signature(task, variant)

    # -- memoized pieces --------------------------------------------------------------------
    def _ask(self, key: str, agent: str, **context: Any) -> str:
        done = self.run.step(self.dir, key)
        if done is not None:
            return done["text"]
        self._check_budget()
        prompt = [Message("user", templates.render(agent, **context))]
        completion = self.provider.complete(prompt, self.options.llm, key=f"{self.dir.name}/{key}")
        self.run.record_step(self.dir, key, [m.__dict__ for m in prompt], completion,
                             self.provider.label)  # fmt: skip
        return completion.text

    def _check_budget(self) -> None:
        cost, tokens = self.run.spent()
        o = self.options
        if o.max_cost_usd is not None and cost >= o.max_cost_usd:
            raise BudgetExceeded(f"cost budget reached: ${cost:.2f} of ${o.max_cost_usd:.2f}")
        if o.max_tokens is not None and tokens >= o.max_tokens:
            raise BudgetExceeded(f"token budget reached: {tokens} of {o.max_tokens}")

    def _evaluate(self, source: str, flags: tuple[str, ...], name: str) -> Outcome:
        digest = code_hash(source, flags)
        saved = self.run.load_json(self.dir, f"evals/{digest}.json")
        if saved is not None:
            return Outcome(**saved)
        self.run.save_code(self.dir, name, source)
        outcome = self.evaluate_fn(source, flags, name)
        self.run.save_json(self.dir, f"evals/{digest}.json", asdict(outcome))
        return outcome

    def _profile(self, source: str, flags: tuple[str, ...], name: str) -> str | None:
        mode = self.options.profile
        if mode == "none":
            return None
        digest = code_hash(source, flags)
        saved = self.run.load_json(self.dir, f"profiles/{digest}-{mode}.json")
        if saved is not None:
            return saved["text"]
        text = self.profile_fn(source, flags, name, mode)
        self.run.save_json(self.dir, f"profiles/{digest}-{mode}.json", {"text": text})
        return text

    # -- the loop ---------------------------------------------------------------------------
    def run_task(self) -> TaskState:
        saved = self.run.load_json(self.dir, "state.json")
        state = TaskState(**saved) if saved else TaskState()
        if state.status == "done":
            return state
        try:
            self._loop(state)
            state.status = "done"
            state.detail = ""
        except AnswerPending as exc:
            state.status, state.detail = "waiting", str(exc)
        except BudgetExceeded as exc:
            state.status, state.detail = "stopped", str(exc)
        except ProviderError as exc:
            state.status, state.detail = "failed", str(exc)
        self.run.save_json(self.dir, "state.json", asdict(state))
        return state

    def _loop(self, state: TaskState) -> None:
        if not state.baseline:
            src = self.task.source("baseline", self.variant)
            assert src is not None
            base = src.read_text()
            outcome = self._evaluate(base, ("-O3",), "baseline")
            if not outcome.ok:
                raise ProviderError(
                    f"the baseline itself failed: {outcome.verdict} {outcome.detail}"
                )
            state.baseline = {"label": "baseline", "source": base, "flags": ["-O3"],
                              "outcome": asdict(outcome)}  # fmt: skip
            state.best = dict(state.baseline)
            self.run.save_json(self.dir, "state.json", asdict(state))
        for r in range(state.round + 1, self.options.rounds + 1):
            self._round(state, r)
            state.round = r
            self.run.save_json(self.dir, "state.json", asdict(state))
            sol = state.best["outcome"].get("sol")
            target = self.options.sol_target
            if target is not None and sol is not None and sol >= target:
                log.info("%s: %.0f%% of the speed of light reached", self.dir.name, 100 * sol)
                break
        best = state.best  # profiled too, so that results can say its class after the run
        self._profile(best["source"], tuple(best["flags"]), best["label"])

    def _round(self, state: TaskState, r: int) -> None:
        best = state.best
        best_outcome = Outcome(**best["outcome"])
        profile = self._profile(best["source"], tuple(best["flags"]), best["label"])
        plan = self._ask(
            f"round{r}/planner", "planner", task=self.task, variant=self.variant,
            signature=self.signature, tol=self.task.spec.tolerance[self.variant],
            device=self.device, profile=profile, history=state.history,
            best={"label": best["label"], "source": best["source"],
                  "evaluation": best_outcome.summary or best_outcome.verdict},
        )  # fmt: skip
        answer = self._ask(
            f"round{r}/coder", "coder", task=self.task, variant=self.variant,
            signature=self.signature, best_source=best["source"], plan=plan,
            sizes=self._sizes(),
        )  # fmt: skip
        code = extract_code(answer)
        flags: tuple[str, ...] = ("-O3",)
        outcome = Outcome("no_code", "the answer had no ```cuda code block")
        if code is not None:
            flags_text = self._ask(
                f"round{r}/compiler", "compiler", device=self.device, source=code,
                allowlist=", ".join((*ALLOWED_FLAGS, "-maxrregcount=N")),
                resources=best_outcome.resources,
            )  # fmt: skip
            flags, rejected = parse_flags(flags_text)
            if rejected:
                log.info("%s round %d: flags refused: %s", self.dir.name, r, rejected)
        name = f"round{r}"
        for attempt in range(self.options.debug_attempts + 1):
            if code is not None:
                outcome = self._evaluate(code, flags, f"{name}-try{attempt}")
                if outcome.ok:
                    break
            if attempt == self.options.debug_attempts:
                break
            answer = self._ask(
                f"round{r}/debug{attempt + 1}", "debugger", task=self.task,
                variant=self.variant, signature=self.signature,
                failure_kind=outcome.verdict, failure=outcome.detail,
                source=code or answer,
            )  # fmt: skip
            code = extract_code(answer) or code
        if outcome.ok and outcome.score is not None:
            prev = state.best_candidate_score
            state.best_candidate_score = outcome.score if prev is None else max(prev, outcome.score)
        kept = outcome.ok and (outcome.score or 0) > (best_outcome.score or 0)
        if kept:
            assert code is not None
            state.best = {"label": name, "source": code, "flags": list(flags),
                          "outcome": asdict(outcome)}  # fmt: skip
        state.history.append({
            "round": r,
            "summary": (f"plan: {_first_line(plan)}; result: {outcome.verdict}"
                        + (f", score {outcome.score:.3f}" if outcome.score is not None else "")
                        + (f" ({outcome.detail[:200]})" if not outcome.ok else "")
                        + ("; kept as the new best" if kept else "; not kept")),
        })  # fmt: skip

    def _sizes(self) -> str:
        return "; ".join(c.label for c in self.task.cases("paper"))


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip(" #*-")
        if line:
            return line[:160]
    return ""


def _signature(task: Task, variant: str) -> str:
    from ..dtypes import concrete

    ctype = {"f32": "float", "bf16": "__nv_bfloat16", "i32": "int"}
    parts = []
    for a in task.spec.args:
        t = ctype[concrete(a.dtype, variant)]
        if a.role == "scalar":
            parts.append(f"{t} {a.name}")
        else:
            const = "const " if a.role_for(variant) == "input" else ""
            parts.append(f"{const}{t}* {a.name}")
    return f"void {task.symbol(variant)}({', '.join(parts)})"
