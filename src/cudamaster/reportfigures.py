"""The HTML report's figures as plotly figure JSON (plain dicts, plotted in the browser): the
cumulative success curve over tau, P per task beside the library's, the speed-of-light fraction
per task, and an optimizer run's best P per round."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .bench.score import TAUS, Scored, success_table
from .resultset import BASELINE, LIBRARY, ImplEntry, ResultSet, TaskKey

TAU_MAX = 8.0


@dataclass
class Series:
    """One implementation's results in one input: a trace in each figure."""

    name: str
    label: str
    results: ResultSet


def series(sets: list[ResultSet], baseline: bool = False, derived: bool = True) -> list[Series]:
    """Per input, every implementation label in the order met (the baseline only if asked,
    derived ones unless told not to): named by its label alone when there is one input, else
    'INPUT: label'."""
    out = []
    for s in sets:
        labels = dict.fromkeys(
            i.label for t in s.tasks for i in t.impls if derived or not i.derived
        )
        for label in labels:
            if label != BASELINE or baseline:
                out.append(Series(label if len(sets) == 1 else f"{s.name}: {label}", label, s))
    return out


def _keys(sets: list[ResultSet]) -> list[TaskKey]:
    return list(dict.fromkeys(t.key for s in sets for t in s.tasks))


def successes(se: Series) -> list[Scored | None]:
    """What the success table counts, over the tasks this implementation was run on."""
    return [e.success for t in se.results.tasks if (e := t.impl(se.label)) is not None]


def entry(se: Series, key: TaskKey) -> ImplEntry | None:
    """The series' implementation on task KEY, if it ran there."""
    task = se.results.task(key)
    return task.impl(se.label) if task else None


def tau_points(results: list[Scored | None]) -> list[float]:
    """The paper's taus and every tau in [0, 8] where the count changes (a P - noise; just
    above 0 for those counted at 0 alone): the curve drawn as steps through them is exact."""
    steps = {r.score - r.noise for r in results if r is not None}
    after_zero = {1e-6} if any(s <= 0 for s in steps) else set()
    return sorted({*TAUS, *after_zero, *(s for s in steps if 0 < s < TAU_MAX)})


def success_figure(sets: list[ResultSet]) -> dict[str, Any]:
    """Per implementation, the fraction of its tasks counted at each tau of [0, 8] (a step
    curve), marked at the paper's taus."""
    data = []
    for se in series(sets, derived=False):
        results = successes(se)
        rows = success_table(results, tau_points(results))
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": se.name,
                "x": [r.tau for r in rows],
                "y": [r.rate for r in rows],
                "line": {"shape": "hv"},
                "marker": {"size": [9 if r.tau in TAUS else 0 for r in rows]},
                "text": [f"{r.solved}/{r.total}" for r in rows],
                "hovertemplate": "tau %{x}: %{text} (%{y:.0%})",
            }
        )
    title = "Cumulative success: the fraction of tasks with P - noise > tau (tau = 0: correct)"
    layout = {
        "title": {"text": title},
        "xaxis": {"title": {"text": "tau"}, "range": [0, TAU_MAX], "tickvals": list(TAUS)},
        "yaxis": {"title": {"text": "fraction of tasks"}, "range": [0, 1.05], "tickformat": ".0%"},
    }
    return {"data": data, "layout": layout}


def score_figure(sets: list[ResultSet]) -> dict[str, Any]:
    """Each implementation's P per task, the library's among them, on a log scale."""
    keys = _keys(sets)
    data = []
    for se in series(sets):
        entries = [entry(se, k) for k in keys]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": se.name,
                "x": [str(k) for k in keys],
                "y": [e.score if e else None for e in entries],
                "error_y": {"type": "data", "array": [e.noise if e else None for e in entries]},
                "marker": {"size": 8, "symbol": "diamond" if se.label == LIBRARY else "circle"},
            }
        )
    layout = {
        "title": {"text": "P per task (against the baseline = 1; log scale), the library's beside"},
        "yaxis": {"type": "log", "title": {"text": "P"}},
        "scattermode": "group",  # each implementation beside the others, not on top
        "xaxis": {"tickangle": -60, "automargin": True},
        "shapes": [
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "y0": 1,
                "y1": 1,
                "line": {"dash": "dot", "color": "grey"},
            }
        ],
    }
    return {"data": data, "layout": layout}


def sol_figure(sets: list[ResultSet]) -> dict[str, Any]:
    keys = _keys(sets)
    data = []
    for se in series(sets, baseline=True):
        entries = [entry(se, k) for k in keys]
        data.append(
            {
                "type": "bar",
                "name": se.name,
                "x": [str(k) for k in keys],
                "y": [e.sol if e else None for e in entries],
            }
        )
    layout = {
        "title": {"text": "Fraction of the speed of light on each task's heaviest case"},
        "barmode": "group",
        "yaxis": {"tickformat": ".0%", "title": {"text": "speed-of-light fraction"}},
        "xaxis": {"tickangle": -60, "automargin": True},
    }
    return {"data": data, "layout": layout}


def trajectory_figure(sets: list[ResultSet]) -> dict[str, Any] | None:
    """Per optimizer task, the best P after each round (round 0: the baseline); None when no
    input is an optimizer run."""
    runs = [s for s in sets if s.kind == "run"]
    data = []
    for s in runs:
        for t in s.tasks:
            name = str(t.key) if len(runs) == 1 else f"{s.name}: {t.key}"
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": name,
                    "x": list(range(len(t.trajectory))),
                    "y": t.trajectory,
                }
            )
    if not data:
        return None
    layout = {
        "title": {
            "text": "The optimizer's best P after each round (round 0: the baseline; log scale)"
        },
        "xaxis": {"title": {"text": "round"}, "dtick": 1},
        "yaxis": {"type": "log", "title": {"text": "best P"}},
    }
    return {"data": data, "layout": layout}


def figures(sets: list[ResultSet]) -> dict[str, dict[str, Any]]:
    """The page's figures by name."""
    out = {"success": success_figure(sets), "scores": score_figure(sets), "sol": sol_figure(sets)}
    if (trajectory := trajectory_figure(sets)) is not None:
        out["trajectory"] = trajectory
    return out
