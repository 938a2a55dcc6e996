"""Bench JSON (`cudamaster bench`, with or without `--impls`; `eval --json`'s one result) and
optimizer run directories, read into one typed form: per task (operator, dtype, suite), each
implementation's score P with its noise, its speed-of-light fraction and what the success table
counts; per optimizer task, the best P per round. `compare` and `report` read nothing else."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .bench.score import Scored
from .errors import UserError

if TYPE_CHECKING:
    from .agents.rundir import RunDir

log = logging.getLogger(__name__)

BASELINE, LIBRARY = "baseline", "library"
#: The label of an optimizer run's best kernel for each task (its own label is in ``detail``).
OPTIMIZED = "optimized"


@dataclass(frozen=True, order=True)
class TaskKey:
    op: str
    dtype: str  # fp32 | bf16
    suite: str  # paper | large

    def __str__(self) -> str:
        return f"{self.op} {self.dtype} {self.suite}"


@dataclass
class ImplEntry:
    """One implementation of one task: its P against the baseline (None unless correct on every
    case) and P's noise (absolute; None where it was not measured)."""

    label: str
    verdict: str
    score: float | None
    noise: float | None
    sol: float | None = None  # the speed-of-light fraction on the heaviest case
    detail: str = ""
    #: what the cumulative success table counts for it (None: no correct kernel)
    success: Scored | None = None
    #: computed from other implementations' measurements, without a noise (an optimizer run's
    #: library): shown, never counted (success table) nor judged beyond noise (compare)
    derived: bool = False


@dataclass
class TaskEntry:
    key: TaskKey
    impls: list[ImplEntry]
    trajectory: list[float] = field(default_factory=list)  # an optimizer task's best P per round
    status: str = ""  # an optimizer task's status (agents/state.py)

    def impl(self, label: str) -> ImplEntry | None:
        return next((i for i in self.impls if i.label == label), None)

    @property
    def library(self) -> ImplEntry | None:
        return self.impl(LIBRARY)

    @property
    def scored(self) -> list[ImplEntry]:
        """Every implementation but the baseline (whose P is 1 by definition)."""
        return [i for i in self.impls if i.label != BASELINE]


@dataclass
class ResultSet:
    source: Path
    kind: str  # bench | impls | run
    tasks: list[TaskEntry]
    device: str | None = None

    @property
    def name(self) -> str:
        return self.source.name

    def task(self, key: TaskKey) -> TaskEntry | None:
        return next((t for t in self.tasks if t.key == key), None)


def load(path: Path) -> ResultSet:
    """Read PATH, a bench JSON file or an optimizer run directory; anything else is a UserError
    that says what PATH is."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file or directory (give bench JSON or a run directory)")
    if path.is_dir():
        return _load_run(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path} is not JSON ({type(exc).__name__}: {exc})") from None
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        results, device = data["results"], _device_name(data.get("device"))
    elif isinstance(data, dict) and "report" in data and "scores" in data:  # eval --json
        results, device = [data], None
    else:
        raise UserError(
            f"{path} is JSON but not bench JSON (no 'results' list): give the file "
            "`cudamaster bench --out` wrote, or an optimizer run directory"
        )
    tasks: dict[TaskKey, TaskEntry] = {}
    for n, result in enumerate(results):
        try:
            entry = _bench_task(result)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UserError(
                f"{path}: result {n} is not a bench result ({type(exc).__name__}: {exc})"
            ) from None
        if entry.key in tasks:
            log.warning("%s: %s appears twice; the later result is kept", path, entry.key)
        tasks[entry.key] = entry
        device = device or _device_name(result.get("device_facts"))
    others = any(i.label not in (BASELINE, LIBRARY) for t in tasks.values() for i in t.impls)
    return ResultSet(path, "impls" if others else "bench", list(tasks.values()), device)


def _device_name(facts: Any) -> str | None:
    return facts.get("name") if isinstance(facts, dict) else None


def _bench_task(result: dict[str, Any]) -> TaskEntry:
    report = result["report"]
    key = TaskKey(str(report["task"]), str(report["variant"]), str(report["suite"]))
    impls = []
    for s in result["scores"]:
        score, noise = _num(s["score"]), _num(s.get("noise"))
        cases = s["cases"]
        heaviest = max(cases, key=lambda c: int(c["complexity"]), default=None)
        impls.append(
            ImplEntry(
                label=str(s["label"]),
                verdict=str(s["verdict"]),
                score=score,
                noise=noise,
                sol=_num(heaviest.get("sol_fraction")) if heaviest else None,
                detail=s.get("detail", ""),
                success=Scored(score, noise or 0.0) if score is not None else None,
            )
        )
    return TaskEntry(key, impls)


def _num(x: Any) -> float | None:
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise TypeError(f"expected a number, got {x!r}")
    return float(x)


def _load_run(path: Path) -> ResultSet:
    from .agents.rundir import RunDir

    run = RunDir.existing(path)  # a UserError for anything but a run directory
    try:
        return _read_run(run, path)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # JSONDecodeError too
        raise UserError(
            f"{path}: a run directory whose files cannot be read ({type(exc).__name__}: {exc})"
        ) from None


def _read_run(run: RunDir, path: Path) -> ResultSet:
    from .agents import results as res

    manifest = run.read_manifest()
    suite = str(manifest.get("suite") or "paper")
    tasks = []
    for (op, variant), row in zip(manifest["tasks"], res.results(path), strict=True):
        base = run.load_state(run.task_dir(op, variant)).baseline
        impls = []
        if base is not None:
            out = base.outcome
            impls.append(ImplEntry(BASELINE, out.verdict, out.score, out.noise, row.baseline_sol))
        if base is not None and (lib := _library_from(base.outcome.cases)) is not None:
            impls.append(
                ImplEntry(
                    LIBRARY,
                    "ok",
                    lib[0],
                    None,
                    lib[1],
                    detail="derived from the baseline's per-case ratios",
                    derived=True,
                )
            )
        impls.append(
            ImplEntry(
                OPTIMIZED,
                row.status,
                row.score,
                row.noise,
                row.sol,
                detail=f"best: {row.best}",
                success=row.scored,
            )
        )
        tasks.append(
            TaskEntry(TaskKey(op, variant, suite), impls, list(row.trajectory), row.status)
        )
    return ResultSet(path, "run", tasks)


def _library_from(cases: list[Any]) -> tuple[float, float | None] | None:
    """The library's P against the baseline, and its speed-of-light fraction on the heaviest
    case, from the baseline's cases (vs_library there is t_library / t_baseline)."""
    if not cases or any(not c.vs_library for c in cases):
        return None
    score = sum(c.weight / c.vs_library for c in cases)
    heaviest = max(cases, key=lambda c: c.weight)
    return score, heaviest.sol / heaviest.vs_library if heaviest.sol is not None else None
