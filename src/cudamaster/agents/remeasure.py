"""Two optimizer runs' best kernels measured again, against each other: per task the runs
share, one full evaluation session with the baseline, the library, A's best and B's best
(interleaved, as every full evaluation is). B/A then carries none of the drift between the
sessions, rounds or GPUs that each run's own numbers came from, and both bests face the same
fresh unseen shapes. The result is a ``compare.Comparison``, read like any other."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..compare import Comparison, compare, with_noise
from ..errors import UserError
from ..resultset import BASELINE, ImplEntry, ResultSet, TaskEntry, TaskKey
from ..tasks import Task, get_task
from .backend import Backend, Submission
from .outcome import Outcome
from .rundir import RunDir
from .state import Version

#: A backend for one task: (task, variant, suite) -> Backend.
BackendFor = Callable[[Task, str, str], Backend]
KEPT_BASELINE = "baseline (kept)"  # the label of a best that is the baseline itself


@dataclass
class Remeasured:
    """One task's session: each run's best (its label) and what the session said of it."""

    key: TaskKey
    a_best: str
    b_best: str
    a: Outcome
    b: Outcome

    def line(self) -> str:
        """What the session said, in a line: each best's P (or its verdict)."""
        said = [
            f"{run}'s {label} " + (f"P {with_noise(o.score, o.noise)}" if o.ok else o.verdict)
            for run, label, o in (("A", self.a_best, self.a), ("B", self.b_best, self.b))
        ]
        return f"{self.key}: {', '.join(said)}"


@dataclass
class _Run:
    suite: str
    bests: dict[tuple[str, str], Version | None]  # per task; None: the task kept no kernel


def _read(root: Path) -> _Run:
    run = RunDir.existing(root)
    manifest = run.read_manifest()
    bests = {(op, variant): run.load_state(run.task_dir(op, variant)).best
             for op, variant in manifest["tasks"]}  # fmt: skip
    return _Run(str(manifest.get("suite") or "paper"), bests)


def remeasure(
    a: Path,
    b: Path,
    backend_for: BackendFor,
    on_task: Callable[[Remeasured], None] | None = None,
) -> tuple[Comparison, list[Remeasured]]:
    """Every task of both runs with a best kernel on both sides, evaluated in one session each
    (``on_task`` hears of each as it ends). Tasks in one run only, or without a best kernel in
    one, are listed without a measurement."""
    ra, rb = _read(a), _read(b)
    if ra.suite != rb.suite:
        raise UserError(
            f"{a} ran the {ra.suite} suite and {b} the {rb.suite} suite: compare --measure "
            "times both on one suite; compare runs of one"
        )
    sa, sb = ResultSet(a, "run", []), ResultSet(b, "run", [])
    measured: list[Remeasured] = []
    device: str | None = None
    for op, variant in [*ra.bests, *(k for k in rb.bests if k not in ra.bests)]:
        key = TaskKey(op, variant, ra.suite)
        va, vb = ra.bests.get((op, variant)), rb.bests.get((op, variant))
        if va is None or vb is None:
            for side, run, v in ((sa, ra, va), (sb, rb, vb)):
                if (op, variant) in run.bests:
                    side.tasks.append(TaskEntry(key, [_unmeasured(v)]))
            continue
        backend = backend_for(get_task(op), variant, ra.suite)
        device = backend.device().name
        m = _session(key, backend, va, vb)
        measured.append(m)
        sa.tasks.append(TaskEntry(key, [_entry(m.a_best, m.a)]))
        sb.tasks.append(TaskEntry(key, [_entry(m.b_best, m.b)]))
        if on_task is not None:
            on_task(m)
    sa.device = sb.device = device
    return compare(sa, sb), measured


def _session(key: TaskKey, backend: Backend, va: Version, vb: Version) -> Remeasured:
    """One evaluation: the baseline, and each best that is not the baseline itself."""
    subs = {"baseline": Submission("baseline", "", ())}
    names = []
    for side, v in (("a", va), ("b", vb)):
        name = "baseline" if v.label == BASELINE else f"{side}-{v.label}"
        subs.setdefault(name, Submission(name, v.source, tuple(v.flags)))
        names.append(name)
    outcomes = dict(zip(subs, backend.evaluate(list(subs.values())), strict=True))
    base = outcomes["baseline"]
    if base.ok:  # P = 1 exactly: the reference of this session's every P
        base.noise = 0.0
    return Remeasured(key, _label(va), _label(vb), outcomes[names[0]], outcomes[names[1]])


def _entry(label: str, outcome: Outcome) -> ImplEntry:
    return ImplEntry(label, outcome.verdict, outcome.score, outcome.noise, outcome.sol,
                     detail=outcome.detail)  # fmt: skip


def _unmeasured(best: Version | None) -> ImplEntry:
    if best is None:
        return ImplEntry("best", "no best kernel", None, None, detail="the run kept no kernel")
    return ImplEntry(_label(best), "not measured", None, None,
                     detail="the other run has no kernel for this task")  # fmt: skip


def _label(v: Version) -> str:
    return KEPT_BASELINE if v.label == BASELINE else v.label
