"""What `cudamaster mcp` does for a coding agent, without the MCP SDK (mcp_server.py serves it):
list the operators, give one operator's specification, and evaluate or profile a candidate
source through the same evaluator as `cudamaster eval` and `cudamaster profile` (static checks,
kernel sandbox, unseen cases, timing against the baseline and the library).

Each tool answers a pydantic model, with ``text()`` its readable form. A bad input (an unknown
operator, a case out of range) is a UserError; everything the evaluator says about a source
(compile errors, refusals, wrong results, no GPU) is an answer, never an exception.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from .agents.backend import compile_check
from .agents.brief import TIMED, case_table, score_line, signature, tolerance
from .agents.gpu import case_detail, outcome_of
from .agents.outcome import CaseOutcome, Outcome
from .bench.build import nvcc_version
from .bench.evaluate import Evaluator, Impl, ImplResult, prepare, standard_impls
from .bench.unseen import label as unseen_label
from .device import DeviceFacts, build_arch, facts
from .errors import UserError
from .formatting import percent
from .profile.run import profile as run_profile
from .report import score_impl
from .tasks import Case, Task, discover, get_task

log = logging.getLogger(__name__)

Dtype = Literal["fp32", "bf16"]
#: The suite that P is scored on (the paper's sizes).
SUITE = "paper"
#: One evaluation or profile at a time: no timing shares the GPU with another.
_GPU = threading.Lock()


# -- answers ---------------------------------------------------------------------------------
class Answer(BaseModel):
    """A tool's answer: its fields for programs, text() for whoever reads it."""

    def text(self) -> str:
        raise NotImplementedError


class Operator(BaseModel):
    name: str
    category: str
    summary: str
    dtypes: list[str] = Field(description="The dtypes with a baseline: fp32, bf16.")
    library: str | None = Field(description="The vendor-library baseline, if there is one.")


class Operators(Answer):
    operators: list[Operator]

    def text(self) -> str:
        lines = [
            f"{len(self.operators)} operators (operator_spec(op, dtype) gives one's "
            "signature, sizes, tolerance and baseline):"
        ]
        lines += [
            f"- {o.name} ({o.category}; {', '.join(o.dtypes)}): {o.summary}" for o in self.operators
        ]
        return "\n".join(lines)


class Argument(BaseModel):
    name: str
    role: str = Field(description="input, output, inplace, accumulate or scalar.")
    c_type: str
    shape: str | None = Field(
        default=None, description="Element count per dimension, in case params."
    )
    value: str | None = Field(default=None, description="A scalar's value, from the case params.")


class SuiteCase(BaseModel):
    index: int
    params: dict[str, int | float]
    weight: float | None = Field(
        default=None, description="This case's share of P (T_i / sum of T)."
    )


class Tolerance(BaseModel):
    rtol: float
    atol: float
    mtol: float
    budget: float = Field(description="Fraction of the elements that may fail (0: none).")
    rule: str


class OperatorSpec(Answer):
    name: str
    dtype: str
    category: str
    summary: str
    semantics: str | None = Field(description="What the summary leaves open, if anything.")
    signature: str = Field(description='The extern "C" entry the source must define.')
    arguments: list[Argument]
    paper_suite: list[SuiteCase] = Field(description="The cases P is scored on.")
    large_suite: list[SuiteCase]
    unseen: str = Field(description="The shape space unseen cases are drawn from.")
    tolerance: Tolerance
    complexity: str = Field(description="T, the case weight in P, as a formula of the params.")
    library: str | None
    timed: str = Field(description="What is timed, per call.")
    baseline_source: str

    def text(self) -> str:
        lines = [
            f"{self.name} ({self.category}), {self.dtype}: {self.summary}",
            "",
            f'entry point: extern "C" {self.signature}',
            "(T* pointers are device buffers; const ones are inputs; scalars by value)",
        ]
        for a in self.arguments:
            what = f"shape [{a.shape}]" if a.shape else f"= {a.value}" if a.value else ""
            lines.append(f"  {a.name}: {a.role} {a.c_type} {what}".rstrip())
        if self.semantics:
            lines += ["", f"semantics: {self.semantics}"]
        lines += ["", f"paper suite (P is scored here; T = {self.complexity}):"]
        lines += [
            f"  {c.index}: {_params(c.params)} ({c.weight:.1%} of P)"
            for c in self.paper_suite
            if c.weight is not None
        ]
        lines.append("large suite: " + "; ".join(_params(c.params) for c in self.large_suite))
        lines += [
            f"unseen cases (checked on every evaluation, never timed): {self.unseen}",
            "",
            f"tolerance: {self.tolerance.rule}",
            "",
            f"library baseline: {self.library or 'none'}",
            "",
            self.timed,
            "",
            "baseline source:",
            self.baseline_source,
        ]
        return "\n".join(lines)


class UnseenCase(BaseModel):
    index: int
    label: str
    verdict: str
    detail: str = ""


class Evaluation(Answer):
    """A candidate's evaluation, as the optimizer's agents read it (agents/gpu.py outcome_of)."""

    operator: str
    dtype: str
    suite: str = SUITE
    verdict: str = Field(
        description="ok, or why not: compile_error, missing_symbol, forbidden, wrong, "
        "wrong_on_unseen, wrong_when_timed, wrong_on_fresh_inputs, inputs_mutated, crash, "
        "runtime_error, timeout, sandbox_violation, ...; needs_gpu: built and checked, not run."
    )
    correct: bool
    detail: str = ""
    gpu: str | None = None
    score: float | None = Field(
        default=None,
        description="P = sum(T_i*S_i) / sum(T_i) over the suite, "
        "S_i the speedup over the naive baseline (correct only).",
    )
    noise: float | None = Field(default=None, description="P's uncertainty, absolute.")
    geomean: float | None = None
    library_score: float | None = Field(default=None, description="The library's P, same baseline.")
    sol: float | None = Field(default=None, description="Speed-of-light fraction, heaviest case.")
    cases: list[CaseOutcome] = Field(default_factory=list)
    unseen_seed: int | None = None
    unseen: list[UnseenCase] = Field(default_factory=list)
    baseline_verdict: str | None = None
    library_verdict: str | None = None
    resources: list[str] = Field(default_factory=list, description="ptxas, per kernel.")
    compile_log: str = Field(
        default="", description="The compiler's output, when the build failed."
    )

    def text(self) -> str:
        where = f" on {self.gpu}" if self.gpu else ""
        lines = [f"{self.operator} {self.dtype}, {self.suite} suite{where}: {self.verdict}"]
        if self.detail:
            lines.append(self.detail)
        if self.compile_log:
            lines += ["compiler output (its last lines):", self.compile_log]
        if self.score is not None:
            lib = f"; the library: P = {self.library_score:.3f}" if self.library_score else ""
            sol = f"; speed of light {percent(self.sol)} on the heaviest case" if self.sol else ""
            lines.append(score_line(self._outcome()) + lib + sol)
        if self.cases:
            lines += ["", case_table(self._outcome())]
        failing = [c for c in self.cases if c.verdict not in ("ok", "skipped") and c.detail]
        lines += [f"case {c.index} ({c.label}): {c.verdict}: {c.detail}" for c in failing]
        if self.unseen_seed is not None:
            bad = [u for u in self.unseen if u.verdict != "ok"]
            lines.append(
                f"unseen cases (seed {self.unseen_seed}): {len(self.unseen) - len(bad)}"
                f" of {len(self.unseen)} ok"
            )
            lines += [f"  unseen case {u.index} ({u.label}): {u.verdict}: {u.detail}" for u in bad]
        if self.baseline_verdict not in (None, "ok"):
            lines.append(
                f"the baseline itself: {self.baseline_verdict} (the GPU or the harness "
                "is at fault, not only this source)"
            )
        if self.resources:
            lines += ["kernels:", *(f"  {r}" for r in self.resources)]
        return "\n".join(lines)

    def _outcome(self) -> Outcome:
        return Outcome(
            self.verdict, score=self.score, noise=self.noise, geomean=self.geomean, cases=self.cases
        )


class Profile(Answer):
    operator: str
    dtype: str
    ok: bool
    verdict: str = Field(
        description="ok, a refusal (compile_error, missing_symbol, forbidden), "
        "needs_gpu, or profile_missing (error says why)."
    )
    case: int | None = None
    label: str | None = None
    gpu: str | None = None
    bottleneck: str | None = Field(
        default=None,
        description="compute-bound, memory-bandwidth-bound or memory-latency-bound.",
    )
    summary: str = Field(
        default="", description="The Nsight Compute summary, filtered to the class."
    )
    kernels: list[str] = Field(default_factory=list)
    error: str = ""
    compile_log: str = ""

    def text(self) -> str:
        where = f", case {self.case} ({self.label})" if self.case is not None else ""
        gpu = f" on {self.gpu}" if self.gpu else ""
        head = f"{self.operator} {self.dtype}{where}{gpu}: "
        if not self.ok:
            log_ = (
                f"\ncompiler output (its last lines):\n{self.compile_log}"
                if self.compile_log
                else ""
            )
            return f"{head}{self.verdict}: {self.error}{log_}"
        return f"{head}{self.bottleneck or 'unclassified'}\n{self.summary}"


# -- the tools -------------------------------------------------------------------------------
def list_operators() -> Operators:
    """Every operator: name, category, summary, dtypes, library baseline."""
    ops = []
    for t in discover().values():
        dtypes = [v for v in ("fp32", "bf16") if t.source("baseline", v)]
        has_lib = any(t.source("library", v) for v in ("fp32", "bf16"))
        ops.append(
            Operator(
                name=t.name,
                category=t.spec.category,
                summary=t.spec.summary,
                dtypes=dtypes,
                library=t.spec.library if has_lib else None,
            )
        )
    return Operators(operators=ops)


def operator_spec(op: str, dtype: Dtype = "fp32") -> OperatorSpec:
    """What a source for ``op`` in ``dtype`` must be, and how it is judged and scored."""
    task = _task(op, dtype)
    spec = task.spec
    paper = task.cases(SUITE)
    weights = [task.complexity(c.params, dtype) for c in paper]
    tol = spec.tolerance[dtype]
    space = spec.unseen
    dims = "; ".join(
        f"{k} in {v if isinstance(v, str) else list(v)}" for k, v in space.dims.items()
    )
    unseen = dims + (f"; where {'; '.join(space.where)}" if space.where else "")
    unseen += f"; input values: {', '.join(space.values)}"
    baseline = task.source("baseline", dtype)
    assert baseline is not None  # _task checked it
    return OperatorSpec(
        name=task.name,
        dtype=dtype,
        category=spec.category,
        summary=spec.summary,
        semantics=spec.semantics_note,
        signature=signature(task, dtype),
        arguments=_arguments(task, dtype),
        paper_suite=[
            SuiteCase(index=c.index, params=c.params, weight=w / sum(weights))
            for c, w in zip(paper, weights, strict=True)
        ],
        large_suite=[SuiteCase(index=c.index, params=c.params) for c in task.cases("large")],
        unseen=unseen,
        tolerance=Tolerance(
            rtol=tol.rtol,
            atol=tol.atol,
            mtol=tol.mtol,
            budget=tol.budget,
            rule=tolerance(task, dtype),
        ),
        complexity=spec.metrics.complexity,
        library=spec.library if task.source("library", dtype) else None,
        timed=TIMED,
        baseline_source=baseline.read_text(),
    )


def evaluate(op: str, dtype: Dtype, source: str) -> Evaluation:
    """Build ``source`` (one .cu file), refuse it if it calls what it must not, then on the GPU
    check it on unseen and suite cases and time it against the baseline and the library."""
    task = _task(op, dtype)
    with _candidate(source) as path, _GPU:
        device, why = _device()
        arch = device.arch if device else build_arch()
        answer = Evaluation(
            operator=task.name,
            dtype=dtype,
            verdict="pending",
            correct=False,
            gpu=device.name if device else None,
        )
        checked = _check(task, dtype, path, arch)
        answer.resources = checked.resources
        if checked.verdict != "pending":
            answer.verdict, answer.detail = checked.verdict, checked.detail
            answer.compile_log = checked.compile_log
            return answer
        if device is None:
            answer.verdict = "needs_gpu"
            answer.detail = (
                f"built for {arch} (nvcc {nvcc_version()}), defines "
                f'extern "C" {task.symbol(dtype)} and passes the static checks; '
                f"correctness and timing need a GPU ({why})"
            )
            return answer
        ev = Evaluator(task, dtype, SUITE, device.arch, progress=log.info)
        report = ev.run([*standard_impls(task, dtype), Impl("candidate", path)])
    cand = report.impl("candidate")
    assert cand is not None
    outcome = outcome_of(task, dtype, report, cand, device, ())
    base, lib = report.impl("baseline"), report.impl("library")
    answer.verdict, answer.correct, answer.detail = outcome.verdict, outcome.ok, outcome.detail
    answer.score, answer.noise, answer.geomean = outcome.score, outcome.noise, outcome.geomean
    answer.sol, answer.cases, answer.resources = outcome.sol, outcome.cases, outcome.resources
    answer.unseen_seed = report.unseen_seed
    answer.unseen = [
        UnseenCase(
            index=c.index,
            label=unseen_label(Case("unseen", c.index, c.params)),
            verdict=c.verdict,
            detail="" if c.ok else case_detail(task, dtype, c),
        )
        for c in cand.unseen
    ]
    answer.baseline_verdict = base.verdict if base else None
    answer.library_verdict = lib.verdict if lib else None
    if lib is not None:
        answer.library_score = score_impl(task, report, lib, device).score
    return answer


def profile(op: str, dtype: Dtype, source: str, case: int = -1) -> Profile:
    """Nsight Compute on one paper-suite case (the last by default) of ``source``: its
    bottleneck class and the summary filtered to it, as `cudamaster profile` prints."""
    task = _task(op, dtype)
    n = len(task.cases(SUITE))
    if not -n <= case < n:
        raise UserError(
            f"case {case}: the {SUITE} suite of {op} has cases 0 to {n - 1} (or -1, the last)"
        )
    with _candidate(source) as path, _GPU:
        device, why = _device()
        arch = device.arch if device else build_arch()
        answer = Profile(
            operator=task.name,
            dtype=dtype,
            ok=False,
            verdict="pending",
            gpu=device.name if device else None,
        )
        checked = _check(task, dtype, path, arch)
        if checked.verdict != "pending":
            answer.verdict, answer.error = checked.verdict, checked.detail
            answer.compile_log = checked.compile_log
            return answer
        if device is None:
            answer.verdict, answer.error = "needs_gpu", f"a profile needs a GPU ({why})"
            return answer
        rep = run_profile(
            task,
            dtype,
            Impl("candidate", path),
            device.arch,
            case_index=case,
            out_dir=path.parent / "ncu",
            device=device,
        )
    answer.case, answer.label = rep.case, rep.label
    if not rep.result.ok:
        answer.verdict, answer.error = "profile_missing", rep.result.error or "no profile"
        return answer
    answer.ok, answer.verdict, answer.bottleneck = True, "ok", rep.bottleneck
    answer.summary = rep.summaries["filtered"].text
    answer.kernels = [k.name for k in rep.result.kernels]
    return answer


# -- helpers ---------------------------------------------------------------------------------
def _task(op: str, dtype: str) -> Task:
    task = get_task(op)
    if task.source("baseline", dtype) is None:
        raise UserError(f"{op} has no {dtype} variant")
    return task


def _params(params: dict[str, int | float]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def _arguments(task: Task, dtype: str) -> list[Argument]:
    """The entry's parameters, their C types as signature() declares them."""
    declared = signature(task, dtype).split("(", 1)[1].rstrip(")").split(", ")
    c_types = {p.rsplit(" ", 1)[1]: p.rsplit(" ", 1)[0] for p in declared}
    return [
        Argument(
            name=a.name,
            role=a.role_for(dtype),
            c_type=c_types[a.name],
            shape=a.shape,
            value=a.value or a.dist,
        )
        for a in task.spec.args
    ]


@contextmanager
def _candidate(source: str) -> Iterator[Path]:
    """``source`` as candidate.cu in a temporary directory of its own, removed after the call."""
    with tempfile.TemporaryDirectory(prefix="cudamaster-mcp-") as tmp:
        path = Path(tmp) / "candidate.cu"
        path.write_text(source)
        yield path


def _device() -> tuple[DeviceFacts | None, str]:
    """GPU 0's facts, or None and why there are none."""
    try:
        return facts(), ""
    except UserError as exc:
        return None, str(exc)


@dataclass
class _Checked:
    """What was found before anything runs: "pending" (passed), or the refusal."""

    verdict: str
    detail: str = ""
    compile_log: str = ""
    resources: list[str] = field(default_factory=list)


def _check(task: Task, dtype: str, path: Path, arch: str) -> _Checked:
    """Build and inspect the candidate before anything runs, as the evaluator does first: the
    compiler's errors, the entry point, the static checks, and each kernel's resources."""
    failed = compile_check(path, arch, ())
    if failed is not None:
        return _Checked(failed.verdict, failed.detail, failed.compile_log)
    pre = ImplResult("candidate", str(path))
    prepare(Impl("candidate", path), arch, task.symbol(dtype), pre)
    resources = [
        f"{k.kernel}: {k.registers} registers, {k.shared_bytes} B shared, "
        f"{k.spill_stores} B spill stores, {k.stack_bytes} B stack"
        for k in (pre.build.resources if pre.build else [])
    ]
    return _Checked(pre.verdict, pre.detail, resources=resources)
