"""What the evaluator said about one candidate, in the form the agents read and the run
directory keeps (JSON, read back with ``Outcome.from_dict``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class CaseOutcome:
    """One case of the evaluation: what it weighs in P, what it moves, how fast it ran."""

    index: int
    label: str
    weight: float  # T_i / sum(T): this case's share of the score P
    bytes: float | None  # compulsory bytes moved (the task's formula)
    flops: float | None
    verdict: str
    time_ms: float | None = None  # cold-L2 median
    spread: float | None = None  # IQR / median of the candidate's timed calls
    baseline_ms: float | None = None
    vs_baseline: float | None = None
    vs_baseline_u: float | None = None  # the speedup's uncertainty (bench/ratio.py)
    vs_library: float | None = None
    sol: float | None = None  # fraction of the speed of light
    detail: str = ""  # why the case failed, with its first mismatches


@dataclass
class FlagTrial:
    """One build of the candidate, screened in the same evaluation as the others."""

    flags: list[str]
    verdict: str
    score: float | None = None
    detail: str = ""


@dataclass
class Outcome:
    """One candidate's evaluation: the verdict, the score with its noise, every case, the build,
    and, for failures, what the debug agent needs (compile log, sanitizer reports)."""

    verdict: str  # ok | compile_error | wrong | crash | timeout | forbidden | no_code | ...
    detail: str = ""
    flags: list[str] = field(default_factory=list)  # the reported build's nvcc flags
    score: float | None = None  # P = sum(T*S)/sum(T) against the baseline (correct only)
    noise: float | None = None  # P's uncertainty, absolute (report.ImplScore.noise)
    geomean: float | None = None
    cases: list[CaseOutcome] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)  # ptxas, one line per kernel
    compile_log: str = ""  # the build log's tail, when the build failed
    sanitizer: dict[str, str] = field(default_factory=dict)  # tool -> its report
    trials: list[FlagTrial] = field(default_factory=list)  # the flag screen, fastest first
    #: "screen": a brief check and timing against the baseline alone, to decide what earns a
    #: full evaluation (never reported); "full": the interleaved evaluation with the baseline
    #: and the library, whose numbers are reported
    stage: str = ""
    gpu: str = ""  # the UUID of the GPU that measured it (a run may use several)

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    @property
    def sol(self) -> float | None:
        """The speed-of-light fraction on the case that weighs most."""
        heaviest = max(self.cases, key=lambda c: c.weight, default=None)
        return heaviest.sol if heaviest else None

    @property
    def faster_beyond_noise(self) -> bool:
        """P exceeds 1 by more than its noise: faster than the baseline, not by chance."""
        return self.score is not None and self.score - (self.noise or 0.0) > 1.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        data = dict(data)
        known = {f.name for f in fields(CaseOutcome)}  # a run kept before a field was dropped
        data["cases"] = [
            CaseOutcome(**{k: v for k, v in c.items() if k in known}) for c in data.get("cases", [])
        ]
        data["trials"] = [FlagTrial(**t) for t in data.get("trials", [])]
        return cls(**data)


@dataclass
class ProfileView:
    """What the planner reads of a profile: the summary of one case, or why there is none."""

    case: str  # "3 (N=64 C=4096)"
    text: str | None
    error: str | None = None
