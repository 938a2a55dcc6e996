"""A task's state as the run directory keeps it (state.json): the baseline, the best, the beam
of parents, every candidate tried, the trajectory of the best's P, why the task stopped."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .backend import Submission
from .history import Candidate
from .outcome import Outcome


class Status(StrEnum):
    """A task's status (a str: state.json keeps the word)."""

    RUNNING = "running"
    DONE = "done"  # its rounds, its patience or the speed-of-light target ended it
    WAITING = "waiting"  # for a model's answer (exchange)
    NEEDS_GPU = "needs_gpu"  # its next step needs a GPU: resume it on one
    STOPPED = "stopped"  # a budget
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # the run stopped before it went on


class Stop(StrEnum):
    """What ended a task that is done."""

    NONE = ""
    ROUNDS = "rounds"
    SOL_TARGET = "sol_target"
    PATIENCE = "patience"


@dataclass
class Version:
    """An implementation the loop holds: the baseline, the best, or a member of the beam. Its
    outcome is its latest full evaluation, or its screening where it had none (outcome.stage)."""

    label: str
    source: str
    flags: list[str]
    outcome: Outcome

    @property
    def score(self) -> float:
        return self.outcome.score or 0.0

    @property
    def submission(self) -> Submission:
        return Submission(self.label, self.source, tuple(self.flags))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Version:
        return cls(data["label"], data["source"], list(data["flags"]),
                   Outcome.from_dict(data["outcome"]))  # fmt: skip


@dataclass
class TaskState:
    status: Status = Status.RUNNING
    detail: str = ""
    round: int = 0
    baseline: Version | None = None
    best: Version | None = None
    beam: list[Version] = field(default_factory=list)  # the next round's parents, best first
    history: list[Candidate] = field(default_factory=list)
    best_candidate: dict[str, Any] | None = None  # the best correct LLM kernel: score, noise, full
    trajectory: list[float] = field(default_factory=list)  # the best's P after each round (0: 1)
    beams: list[list[str]] = field(default_factory=list)  # the beam's labels after each round
    last_gain: int = 0  # the last round that gave a new best
    extra_rounds: int = 0  # rounds handed over by tasks that stopped early
    stop_reason: Stop = Stop.NONE

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskState:
        data = dict(data)
        for key in ("baseline", "best"):
            data[key] = Version.from_dict(data[key]) if data.get(key) else None
        data["beam"] = [Version.from_dict(v) for v in data.get("beam", [])]
        data["history"] = [Candidate.from_dict(c) for c in data.get("history", [])]
        data["status"] = Status(data.get("status", Status.RUNNING))
        data["stop_reason"] = Stop(data.get("stop_reason", Stop.NONE))
        return cls(**data)

    def gained_last_round(self) -> bool:
        return self.round > 0 and self.last_gain == self.round
