"""What the planner is told about every earlier candidate: its plan's optimizations, the
attempts it took, its verdict, per-case speedups, and what changed in the code."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from .outcome import Outcome

#: Techniques worth naming when a candidate adds or drops them (regex on the source).
FEATURES = {
    "shared memory": r"__shared__",
    "warp shuffles": r"__shfl_\w*sync",
    "vector loads (float4/int4/float2)": r"\b(?:float4|float2|int4|uint4|__nv_bfloat162)\b",
    "async copies (cp.async/TMA)": r"cp\.async|cuda::memcpy_async|__pipeline|cuda::barrier",
    "tensor cores (wmma/mma)": r"\bwmma::|\bmma\.sync|\bmma_sync\b|wgmma",
    "CUB/Thrust": r"\bcub::|\bthrust::",
    "cooperative groups": r"cooperative_groups",
    "read-only loads (__ldg)": r"__ldg\b",
    "explicit unrolling": r"#pragma\s+unroll",
    "atomics": r"\batomic\w+\(",
    "streams/graphs": r"cudaStream\w+|cudaGraph\w+",
}
_KERNEL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?[\w:<>,\s*]*?\b(\w+)\s*\(")


def kernels(source: str) -> list[str]:
    """Names of the __global__ functions defined in ``source``, in order."""
    return list(dict.fromkeys(_KERNEL.findall(source)))


def features(source: str) -> set[str]:
    return {name for name, pattern in FEATURES.items() if re.search(pattern, source)}


def diff_summary(parent: str, child: str, parent_label: str) -> str:
    """One line: lines added and removed against the parent, kernels and techniques that came
    or went."""
    added = removed = 0
    for line in difflib.unified_diff(parent.splitlines(), child.splitlines(), lineterm="", n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    parts = [f"+{added}/-{removed} lines against {parent_label}"]
    old_k, new_k = kernels(parent), kernels(child)
    if gone := [k for k in old_k if k not in new_k]:
        parts.append("kernels removed: " + ", ".join(gone))
    if came := [k for k in new_k if k not in old_k]:
        parts.append("kernels added: " + ", ".join(came))
    old_f, new_f = features(parent), features(child)
    if new_f - old_f:
        parts.append("now uses " + ", ".join(sorted(new_f - old_f)))
    if old_f - new_f:
        parts.append("no longer uses " + ", ".join(sorted(old_f - new_f)))
    return "; ".join(parts)


@dataclass
class Candidate:
    """One round's candidate, as the planner of later rounds sees it."""

    round: int
    label: str
    parent: str  # the label of the version it started from
    optimizations: list[str]
    attempts: list[str]  # "try0 compile_error", "try1 ok", ...
    verdict: str
    flags: list[str]
    score: float | None
    noise: float | None
    speedups: list[float | None] = field(default_factory=list)  # per case, vs the baseline
    diff: str = ""
    detail: str = ""  # why it failed (short)
    kept: bool = False  # became the best
    strategy: str = ""  # the plan's strategy, as the planner named it
    stage: str = ""  # how far it got: "" (never ran), "screen" or "full" (outcome.stage)
    screen_score: float | None = None  # P at screening (score and noise: the last stage's)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Candidate:
        return cls(**data)


def candidate(round_: int, label: str, parent: str, parent_source: str, code: str | None,
              items: list[str], attempts: list[str], outcome: Outcome, kept: bool,
              strategy: str = "", screen_score: float | None = None) -> Candidate:  # fmt: skip
    """The record of one candidate, as its last stage left it."""
    return Candidate(
        round=round_,
        label=label,
        parent=parent,
        optimizations=items,
        attempts=attempts,
        verdict=outcome.verdict,
        flags=list(outcome.flags),
        score=outcome.score,
        noise=outcome.noise,
        speedups=[c.vs_baseline for c in outcome.cases],
        diff=diff_summary(parent_source, code, parent) if code else "no code",
        detail="" if outcome.ok else outcome.detail.splitlines()[0][:300] if outcome.detail else "",
        kept=kept,
        strategy=strategy,
        stage=outcome.stage,
        screen_score=screen_score,
    )
