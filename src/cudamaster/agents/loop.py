"""The optimization loop for one (operator, dtype): a beam search over kernels.

Each round the planner sees the beam (the best B correct kernels so far, the best first, with
its profile) and writes N plans with distinct strategies; each plan is coded from the parent it
names and built (a compile error goes to the debug agent at once: no GPU needed). Then, on the
GPU: every candidate is screened (checked, and timed briefly against the baseline of the same
session); one that failed goes to the debug agent and is screened again; one that could become
the new best gets the full interleaved evaluation with the baseline, the library and the
current best, whose numbers are the ones reported. Where different correct kernels lead on
different cases, a merge makes one file that dispatches on the sizes, held to the same checks.
A task stops at its rounds, at --sol-target, or after --patience rounds without a new best.

Every answer and every evaluation is kept in the run directory once whole, so running the loop
again replays them and asks nothing twice; a step that waits for a model's answer
(AnswerPending) or for a GPU (NeedsGpu) lets its siblings go as far as they can first. Once the
run is told to stop (Ctrl-C), a task finishes the step it is in and begins no other.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import threading
import time
from dataclasses import asdict, dataclass, field
from functools import cached_property, partial
from typing import Any, Literal

from .. import formula
from ..llm.base import AnswerPending, Message, Options, Provider, ProviderError, Usage
from ..llm.complete import complete
from ..profile.summary import count_tokens
from ..tasks import Task
from . import brief as facts
from . import dispatch, templates
from .backend import Backend, NeedsGpu, Submission
from .budget import Budget, BudgetExceeded, Cost
from .history import candidate
from .outcome import Outcome, ProfileView
from .parse import (
    Plan,
    debugger_flags,
    extract_code,
    parse_flags,
    plan_items,
    resend_request,
    split_plans,
)
from .pending import gather
from .rundir import RunDir, code_hash
from .state import Status, Stop, TaskState, Version

log = logging.getLogger(__name__)

FlagMode = Literal["measure", "agent"]
#: What the planner is asked to spread its plans over.
STRATEGIES = (
    "memory traffic (bytes moved, coalescing, vector widths, reuse through shared memory or "
    "registers)",
    "latency hiding and occupancy (more work in flight per thread or SM, async copies, "
    "pipelining, register and shared-memory budgets)",
    "work decomposition and algorithm (how the work is split over blocks, warps and threads; a "
    "different algorithm; tensor cores where the data type allows)",
    "launch overhead for small sizes (fewer launches and host calls, fusing, a path for the "
    "small cases)",
)


class Interrupted(Exception):
    """The run was told to stop (Ctrl-C): the task begins no further step."""


@dataclass
class LoopOptions:
    rounds: int = 3
    candidates: int = 4  # per round, each from its own plan
    beam: int = 2  # the best correct kernels kept as the next round's parents
    patience: int | None = 2  # stop a task after this many rounds without a new best
    merge: bool = True  # try a per-size dispatch of kernels that lead on different cases
    debug_attempts: int = 3
    profile: str = "filtered"  # filtered | full | none
    flags: FlagMode = "measure"  # measure: screened on the GPU; agent: the compiler agent's
    sol_target: float | None = None  # stop early once the best reaches this fraction
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    llm: Options = field(default_factory=Options)


@dataclass
class Draft:
    """A candidate on its way: its plan and parent, its code and flags, what became of it."""

    label: str  # round2-c1
    key: str  # its steps' prefix: round2/c1
    plan: Plan
    parent: Version
    code: str | None = None
    answer: str = ""  # the last answer that gave (or failed to give) its code
    flags: tuple[str, ...] = ("-O3",)
    debugs: int = 0
    attempts: list[str] = field(default_factory=list)
    failure: Outcome | None = None  # why it does not build (or has no code), if so
    screened: Outcome | None = None
    full: Outcome | None = None

    @property
    def submission(self) -> Submission:
        assert self.code is not None
        return Submission(self.label, self.code, self.flags)

    @property
    def ready(self) -> bool:
        """Built, and not screened yet."""
        return self.code is not None and self.failure is None and self.screened is None

    @property
    def last(self) -> Outcome:
        outcome = self.full or self.screened or self.failure
        assert outcome is not None
        return outcome


class Optimizer:
    def __init__(self, task: Task, variant: str, provider: Provider, run: RunDir,
                 backend: Backend, options: LoopOptions, suite: str = "paper",
                 budget: Budget | None = None,
                 stop: threading.Event | None = None) -> None:  # fmt: skip
        """``stop``: once set, the task finishes the step it is in and begins no other."""
        self.task, self.variant, self.provider, self.run = task, variant, provider, run
        self.stop = stop
        self.backend, self.options, self.suite = backend, options, suite
        self.dir = run.task_dir(task.name, variant)
        self.budget = budget or Budget(options.max_cost_usd, options.max_tokens,
                                       Cost(*run.spent()))  # fmt: skip

    @cached_property
    def brief(self) -> facts.Brief:
        return facts.Brief.of(self.task, self.variant, self.suite, self.backend.device())

    # -- memoized pieces --------------------------------------------------------------------
    def _begin(self, step: str) -> None:
        """Interrupted, instead of beginning ``step``, once the run is told to stop."""
        if self.stop is not None and self.stop.is_set():
            raise Interrupted(f"the run was stopped before {step}")

    def _converse(self, key: str, messages: list[Message]) -> str:
        """The answer to ``messages``, asked once: replayed from the run directory after."""
        done = self.run.step(self.dir, key)
        if done is not None:
            return str(done["text"])
        self._begin(f"asking for {key}")
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

    def _screen(self, subs: list[Submission]) -> list[Outcome]:
        """Each submission's screening, run once (all that lack one, in one session)."""
        digests = [code_hash(s.source, s.flags) for s in subs]
        saved = [self.run.load_json(self.dir, f"evals/{d}-screen.json") for d in digests]
        todo = [s for s, x in zip(subs, saved, strict=True) if x is None]
        if todo:
            self._begin("screening " + ", ".join(s.name for s in todo))
            for s in todo:
                self.run.save_code(self.dir, s.name, s.source)
            t0 = time.monotonic()
            fresh = iter(self.backend.screen(todo, variants=self.options.flags == "measure"))
            self.run.record_gpu(self.dir, "screen", time.monotonic() - t0, len(todo))
            for i, (d, x) in enumerate(zip(digests, saved, strict=True)):
                if x is None:
                    saved[i] = next(fresh).to_dict()
                    self.run.save_json(self.dir, f"evals/{d}-screen.json", saved[i])
        return [Outcome.from_dict(x) for x in saved if x is not None]

    def _full(self, subs: list[Submission]) -> list[Outcome]:
        """The full evaluation of ``subs`` in one session, run once."""
        key = hashlib.sha256(" ".join(sorted(code_hash(s.source, s.flags) + s.name
                                             for s in subs)).encode()).hexdigest()[:16]  # fmt: skip
        saved = self.run.load_json(self.dir, f"evals/full-{key}.json")
        if saved is None:
            self._begin("evaluating " + ", ".join(s.name for s in subs))
            for s in subs:
                self.run.save_code(self.dir, s.name, s.source)
            t0 = time.monotonic()
            outcomes = self.backend.evaluate(subs)
            self.run.record_gpu(self.dir, "full", time.monotonic() - t0, len(subs))
            saved = {s.name: o.to_dict() for s, o in zip(subs, outcomes, strict=True)}
            self.run.save_json(self.dir, f"evals/full-{key}.json", saved)
        return [Outcome.from_dict(saved[s.name]) for s in subs]

    def _profile(self, version: Version) -> ProfileView | None:
        mode = self.options.profile
        if mode == "none" or not version.outcome.cases:
            return None
        case = max(version.outcome.cases, key=lambda c: c.weight).index
        digest = code_hash(version.source, tuple(version.flags))
        saved = self.run.load_json(self.dir, f"profiles/{digest}-{mode}.json")
        if saved is not None:
            return ProfileView(**saved)
        self._begin(f"profiling {version.label}")
        t0 = time.monotonic()
        view = self.backend.profile(version.submission, mode, case)
        self.run.record_gpu(self.dir, "profile", time.monotonic() - t0, 1)
        self.run.save_json(self.dir, f"profiles/{digest}-{mode}.json", asdict(view))
        return view

    def _save(self, state: TaskState) -> None:
        self.run.save_state(self.dir, state)

    # -- the loop ---------------------------------------------------------------------------
    def run_task(self) -> TaskState:
        state = self.run.load_state(self.dir)
        if state.status == Status.DONE:
            return state
        self._state = state
        try:
            self._loop(state)
            state.status = Status.DONE
        except AnswerPending as exc:
            state.status, state.detail = Status.WAITING, str(exc)
        except NeedsGpu as exc:
            state.status, state.detail = Status.NEEDS_GPU, str(exc)
        except BudgetExceeded as exc:
            state.status, state.detail = Status.STOPPED, str(exc)
        except ProviderError as exc:
            state.status, state.detail = Status.FAILED, str(exc)
        except Interrupted as exc:
            state.status, state.detail = Status.INTERRUPTED, f"{exc} (resume continues it)"
        self._save(state)
        return state

    @property
    def _baseline(self) -> Version:
        assert self._state.baseline is not None
        return self._state.baseline

    @property
    def _weights(self) -> str:
        """Each case's weight in P, as the coder is told."""
        return facts.weights(self._baseline.outcome.cases)

    def _stop_reason(self, state: TaskState) -> tuple[Stop, str] | None:
        """Why no further round starts, if none does: (reason, detail)."""
        assert state.best is not None
        sol, target = state.best.outcome.sol, self.options.sol_target
        if target is not None and sol is not None and sol >= target:
            return Stop.SOL_TARGET, f"{sol:.0%} of the speed of light reached"
        patience = self.options.patience
        if patience and state.round - state.last_gain >= patience:
            return Stop.PATIENCE, f"no new best in {state.round - state.last_gain} rounds"
        allowed = self.options.rounds + state.extra_rounds
        if state.round >= allowed:
            return Stop.ROUNDS, f"{allowed} rounds done"
        return None

    def _loop(self, state: TaskState) -> None:
        if state.baseline is None:
            src = self.task.source("baseline", self.variant)
            assert src is not None
            base = Submission("baseline", src.read_text())
            (outcome,) = self._full([base])
            if not outcome.ok:
                raise ProviderError(
                    f"the baseline itself failed: {outcome.verdict} {outcome.detail}"
                )
            state.baseline = state.best = Version("baseline", base.source, ["-O3"], outcome)
            state.beam, state.trajectory = [state.best], [1.0]
            self._save(state)
        while (stop := self._stop_reason(state)) is None:
            r = state.round + 1
            # the round works on a copy: one that stops half way (for an answer, a GPU) leaves
            # the saved state as it was, and replays from its start with every step memoized
            done = copy.deepcopy(state)
            self._round(done, r)
            done.round = r
            assert done.best is not None
            done.trajectory.append(done.best.score)
            done.beams.append([v.label for v in done.beam])
            state.__dict__.update(done.__dict__)
            self._save(state)
        state.stop_reason, state.detail = stop
        assert state.best is not None
        self._profile(state.best)  # so that results can say its class after the run

    def _round(self, state: TaskState, r: int) -> None:
        best, base = state.best, state.baseline
        assert best is not None and base is not None
        view = self._profile(best)
        plans = self._plans(state, r, view)
        by_label = {v.label: v for v in state.beam}
        drafts = [
            Draft(f"round{r}-c{k}", f"round{r}/c{k}", plan, by_label.get(plan.parent, best))
            for k, plan in enumerate(plans, 1)
        ]
        gather([partial(self._write, d) for d in drafts])
        self._screen_all(drafts)
        self._evaluate_promising(state, drafts)
        self._conclude(state, r, drafts)
        if self.options.merge:
            self._merge(state, r, drafts)

    def _plans(self, state: TaskState, r: int, view: ProfileView | None) -> list[Plan]:
        best, base = state.best, state.baseline
        assert best is not None and base is not None
        n = self.options.candidates
        plan, _ = self._ask(
            f"round{r}/planner", "planner", best=best, score=facts.score_line(best.outcome),
            table=facts.case_table(best.outcome), trials=facts.trials(best.outcome),
            cases=base.outcome.cases, weights=facts.weights(base.outcome.cases),
            others=facts.parents(state.beam[1:]),
            others_labels=[v.label for v in state.beam[1:]], history=facts.history(state.history),
            profile=view if view and view.text else None, n=n, strategies=STRATEGIES,
            profile_missing=(view.error if view else "profiling is off (--profile none)"),
        )  # fmt: skip
        plans = split_plans(plan, n)
        if len(plans) < n:
            log.warning("%s round %d: %d plans asked, %d given", self.dir.name, r, n, len(plans))
        return plans

    # -- one candidate: code, build, debug ---------------------------------------------------
    def _write(self, d: Draft) -> None:
        """Code the draft's plan from its parent, then build it until it builds (or the debug
        attempts run out)."""
        answer, prompt = self._ask(
            f"{d.key}/coder", "coder", parent=d.parent, plan=d.plan.text,
            build=self.brief.build(d.flags),
            weights=self._weights, screened=self.options.flags == "measure",
        )  # fmt: skip
        d.answer, d.code = answer, self._code(f"{d.key}/coder", answer, prompt)
        if self.options.flags == "agent" and d.code is not None:
            d.flags = self._agent_flags(d)
        self._until_built(d)

    def _until_built(self, d: Draft) -> None:
        while True:
            if d.code is None:
                d.failure = Outcome("no_code", "the answer had no code block defining the entry "
                                    "function")  # fmt: skip
            else:
                d.failure = self.backend.compile(d.submission)
                if d.failure is None:
                    return
            d.attempts.append(f"try{d.debugs} {d.failure.verdict}")
            if d.debugs >= self.options.debug_attempts:
                return
            self._debug(d, d.failure)

    def _debug(self, d: Draft, outcome: Outcome) -> None:
        d.debugs += 1
        key = f"{d.key}/debug{d.debugs}"
        answer, prompt = self._ask(
            key, "debugger", outcome=outcome, failures=facts.failures(outcome),
            build=self.brief.build(d.flags), plan=d.plan.text, source=d.code or d.answer,
            baseline=self._baseline.source,
        )  # fmt: skip
        d.answer, d.code = answer, self._code(key, answer, prompt) or d.code
        if (asked := debugger_flags(answer)) is not None:
            d.flags = asked[0]

    def _agent_flags(self, d: Draft) -> tuple[str, ...]:
        assert d.code is not None
        text, _ = self._ask(f"{d.key}/compiler", "compiler", source=d.code,
                            build=self.brief.build(("-O3",)),
                            resources=d.parent.outcome.resources)  # fmt: skip
        flags, rejected = parse_flags(text)
        if rejected:
            log.info("%s %s: flags refused: %s", self.dir.name, d.label, rejected)
        return flags

    # -- the GPU stages -----------------------------------------------------------------------
    def _screen_all(self, drafts: list[Draft]) -> None:
        """Screen every built draft in one session; debug the ones that failed and screen their
        fixes, until each is correct or out of attempts."""
        while True:
            todo = [d for d in drafts if d.ready]
            if todo:
                for d, outcome in zip(todo, self._screen([d.submission for d in todo]),
                                      strict=True):  # fmt: skip
                    d.screened = outcome
                    d.attempts.append(f"try{d.debugs} {outcome.verdict}")
            retry = [d for d in drafts if d.screened is not None and not d.screened.ok
                     and d.debugs < self.options.debug_attempts]  # fmt: skip
            if not retry:
                return
            gather([partial(self._fix, d) for d in retry])

    def _fix(self, d: Draft) -> None:
        assert d.screened is not None
        failed, d.screened = d.screened, None
        self._debug(d, failed)
        self._until_built(d)

    def _promising(self, state: TaskState, d: Draft) -> bool:
        """Its screening leaves room for it to beat the best (and the baseline)."""
        assert state.best is not None
        s = d.screened
        if s is None or not s.ok or s.score is None:
            return False
        return s.score + (s.noise or 0.0) > max(state.best.score, 1.0)

    def _evaluate_promising(self, state: TaskState, drafts: list[Draft]) -> None:
        """The full evaluation of the drafts that could beat the best, beside the best itself
        (re-measured in the same session, so the choice compares numbers of one session)."""
        promising = [d for d in drafts if self._promising(state, d)]
        if not promising:
            return
        assert state.best is not None
        subs = [Submission(d.label, d.submission.source, tuple(d.screened.flags))  # type: ignore[union-attr]
                for d in promising]  # fmt: skip
        with_best = state.best.label != "baseline"
        if with_best:
            subs.insert(0, state.best.submission)
        outcomes = self._full(subs)
        if with_best:
            self._remeasured(state, outcomes.pop(0))
        for d, outcome in zip(promising, outcomes, strict=True):
            outcome.trials = outcome.trials or d.screened.trials  # type: ignore[union-attr]
            d.full = outcome
            d.attempts.append(f"full {outcome.verdict}")

    def _remeasured(self, state: TaskState, outcome: Outcome) -> None:
        """The best's new measurement replaces its old one (which won a selection, and so is
        biased upward); a best that now fails (an unseen case) leaves the beam."""
        best = state.best
        assert best is not None and state.baseline is not None
        if outcome.ok:
            outcome.trials = outcome.trials or best.outcome.trials  # its flag screen's builds
            best.outcome = outcome
            return
        log.warning("%s: the best (%s) failed its re-evaluation: %s %s", self.dir.name,
                    best.label, outcome.verdict, outcome.detail[:200])  # fmt: skip
        state.beam = [v for v in state.beam if v.label != best.label]
        state.best = next((v for v in state.beam if v.outcome.stage == "full"), state.baseline)

    def _conclude(self, state: TaskState, r: int, drafts: list[Draft]) -> None:
        """A new best where a fully evaluated draft beats the best beyond noise; the beam; the
        record of every draft for the planner."""
        best = state.best
        assert best is not None
        winners = [d for d in drafts if d.full is not None and d.full.ok
                   and d.full.faster_beyond_noise and d.full.score is not None
                   and d.full.score > best.score]  # fmt: skip
        winner = max(winners, key=lambda d: d.full.score or 0.0, default=None)  # type: ignore[union-attr]
        versions = {v.label: v for v in state.beam if v.label != "baseline"}
        for label, version in self._correct(drafts).items():
            versions[label] = version
            self._best_candidate(state, version.outcome)
        if winner is not None:
            state.best, state.last_gain = versions[winner.label], r
        ranked = sorted(versions.values(), key=lambda v: -v.score)
        assert state.best is not None
        state.beam = [state.best, *[v for v in ranked if v.label != state.best.label]]
        state.beam = state.beam[: max(1, self.options.beam)]
        for d in drafts:
            screen = d.screened.score if d.screened is not None else None
            state.history.append(candidate(
                r, d.label, d.parent.label, d.parent.source, d.code, plan_items(d.plan.text),
                d.attempts, d.last, d is winner, d.plan.strategy, screen,
            ))  # fmt: skip

    @staticmethod
    def _correct(drafts: list[Draft]) -> dict[str, Version]:
        """The drafts correct at their last stage (one that fails its full evaluation is not),
        each as a version with that stage's outcome."""
        out = {}
        for d in drafts:
            outcome = d.full or d.screened
            if (
                d.code is not None
                and outcome is not None
                and outcome.ok
                and outcome.score is not None
            ):
                out[d.label] = Version(d.label, d.code, list(outcome.flags), outcome)
        return out

    @staticmethod
    def _best_candidate(state: TaskState, outcome: Outcome) -> None:
        """The best correct LLM-written kernel's P, for the success table: a full evaluation's
        where there is one (a screening is never reported as P); a correct kernel that was
        only screened (too slow to earn a full evaluation) still counts as correct (tau 0)."""
        prev = state.best_candidate
        full = outcome.stage == "full"
        rank = (full, outcome.score or 0.0)
        if prev is None or rank > (bool(prev.get("full")), prev.get("score") or 0.0):
            state.best_candidate = {"score": outcome.score, "noise": outcome.noise, "full": full}

    # -- per-size dispatch --------------------------------------------------------------------
    def _merge(self, state: TaskState, r: int, drafts: list[Draft]) -> None:
        """Where correct kernels (the beam's and this round's) lead on different cases: one
        file that dispatches on the sizes, screened and evaluated like any candidate. The rule
        is chosen on their per-case speedups, screened or full; the merge's own evaluation is
        what counts."""
        best = state.best
        assert best is not None and state.baseline is not None
        kept = {v.label: v for v in state.beam if v.label != "baseline"}
        for label, version in self._correct(drafts).items():
            kept.setdefault(label, version)
        pool = list(kept.values())
        if len(pool) < 2:
            return
        cases = self.task.cases(self.suite)
        values = [self._scalars(c.params) for c in cases]
        speedups = [[c.vs_baseline for c in v.outcome.cases] for v in pool]
        weights = [c.weight for c in pool[0].outcome.cases]
        rule = dispatch.choose(values, speedups, weights)
        if rule is None or rule.predicted <= best.score + (best.outcome.noise or 0.0):
            return
        label = f"round{r}-merge"
        paths = (pool[rule.below], pool[rule.above])
        try:
            source = dispatch.merge([v.source for v in pool], self.task.symbol(self.variant),
                                    self.brief.signature, rule)  # fmt: skip
        except dispatch.MergeError as exc:
            log.info("%s: no merge of %s and %s: %s", self.dir.name, *[p.label for p in paths], exc)
            return
        common = [f for f in paths[0].flags if f in paths[1].flags] or ["-O3"]
        plan = Plan(f"Per-size dispatch: {paths[0].label} where {rule.arg} < "
                    f"{rule.threshold}, else {paths[1].label} (predicted P "
                    f"{rule.predicted:.3f})", best.label, "per-size dispatch")  # fmt: skip
        d = Draft(label, f"round{r}/merge", plan, best, code=source, flags=tuple(common))
        d.failure = self.backend.compile(d.submission)
        d.attempts.append(f"try0 {d.failure.verdict if d.failure else 'built'}")
        if d.failure is None:
            (d.screened,) = self._screen([d.submission])
            d.attempts.append(f"try0 {d.screened.verdict}")
            self._evaluate_promising(state, [d])
        self._conclude(state, r, [d])

    def _scalars(self, params: dict[str, int | float]) -> dict[str, int]:
        """The entry's integer arguments on a case with ``params``."""
        names = self.task.names(params, self.variant)
        return {a.name: int(formula.evaluate(a.value, names)) for a in self.task.spec.args
                if a.role == "scalar" and a.dtype == "i32" and a.value is not None}  # fmt: skip
