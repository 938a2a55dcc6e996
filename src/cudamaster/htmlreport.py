"""`cudamaster report`: one self-contained HTML page (plotly's JavaScript inside it, nothing
fetched when it is viewed) from bench JSON and optimizer run directories: the cumulative
success curve over tau, P per operator beside the library's, the speed-of-light fraction per
operator, an optimizer run's best P per round, and the tables, sortable by a click on a header."""

from __future__ import annotations

import html
import importlib
from pathlib import Path
from typing import Any

from .bench.score import TAUS, success_table
from .compare import compare, totals_line
from .errors import UserError
from .extras import install_line
from .formatting import percent
from .reportfigures import figures, series, successes
from .resultset import ResultSet


def require_plotly() -> Any:
    """plotly's ``io`` module, or the one-line error naming the extra that installs it."""
    try:
        return importlib.import_module("plotly.io")
    except ImportError:
        raise UserError(f"the HTML report needs plotly: {install_line('report')}") from None


# -- tables ---------------------------------------------------------------------------------
def _cell(text: str, value: float | str | None = None) -> str:
    """A cell; ``value`` is what a click on its header sorts by (the text by default)."""
    v = "" if value is None else str(value)
    return f'<td data-v="{html.escape(v)}">{html.escape(text)}</td>'


def _table(title: str, head: list[str], rows: list[str]) -> str:
    ths = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(f"<tr>{r}</tr>" for r in rows)
    return (
        f'<h2>{html.escape(title)}</h2><table class="sortable"><thead><tr>{ths}</tr>'
        f"</thead><tbody>{body}</tbody></table>"
    )


def _num(x: float | None, spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def scores_table(sets: list[ResultSet]) -> str:
    rows = []
    for s in sets:
        for t in s.tasks:
            lib = t.library.score if t.library else None
            for e in t.impls:
                vs_lib = e.score / lib if e.score is not None and lib else None
                rows.append(
                    "".join(
                        [
                            _cell(s.name),
                            _cell(t.key.op),
                            _cell(t.key.dtype),
                            _cell(t.key.suite),
                            _cell(e.label),
                            _cell(e.verdict),
                            _cell(_num(e.score), e.score),
                            _cell(_num(e.noise, ".2g"), e.noise),
                            _cell(_num(vs_lib), vs_lib),
                            _cell(percent(e.sol), e.sol),
                            _cell(e.detail),
                        ]
                    )
                )
    head = [
        "input",
        "operator",
        "dtype",
        "suite",
        "impl",
        "verdict",
        "P",
        "noise",
        "P / library's P",
        "SOL",
        "detail",
    ]
    return _table("Scores (P against the baseline, with its noise)", head, rows)


def success_rows(sets: list[ResultSet]) -> str:
    rows = []
    for se in series(sets, derived=False):
        cells = [_cell(se.name)]
        for r in success_table(successes(se), TAUS):
            cells.append(_cell(f"{r.solved}/{r.total} ({r.rate:.0%})", r.rate))
        rows.append("".join(cells))
    head = ["implementation", *(f"tau {t}" for t in TAUS)]
    return _table("Cumulative success (tau > 0: P - noise > tau)", head, rows)


def trajectory_table(sets: list[ResultSet]) -> str:
    rows = []
    for s in sets:
        if s.kind != "run":
            continue
        for t in s.tasks:
            best = t.trajectory[-1] if t.trajectory else None
            rows.append(
                "".join(
                    [
                        _cell(s.name),
                        _cell(str(t.key)),
                        _cell(t.status),
                        _cell(_num(best), best),
                        _cell(" ".join(f"{x:.2f}" for x in t.trajectory) or "-"),
                    ]
                )
            )
    head = ["input", "task", "status", "best P", "best P per round"]
    return _table("The optimizer's search", head, rows) if rows else ""


def compare_table(sets: list[ResultSet]) -> str:
    """With two inputs, the second against the first (cudamaster compare)."""
    if len(sets) != 2:
        return ""
    c = compare(sets[0], sets[1])
    rows = [
        "".join(
            [
                _cell(r.op),
                _cell(r.dtype),
                _cell(r.suite),
                _cell(r.impl),
                _cell(_num(r.a), r.a),
                _cell(_num(r.b), r.b),
                _cell(_num(r.ratio), r.ratio),
                _cell(r.status),
            ]
        )
        for r in c.rows
    ]
    head = ["operator", "dtype", "suite", "impl", "P in A", "P in B", "B/A", "status"]
    title = f"B/A: A = {sets[0].name}, B = {sets[1].name}"
    return _table(title, head, rows) + f"<p>{html.escape(totals_line(c.totals))}</p>"


# -- the page -------------------------------------------------------------------------------
_STYLE = """body{font-family:sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;font-size:13px;margin-bottom:1em}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:left}
th{background:#eee;cursor:pointer;user-select:none}th.asc::after{content:" \\25b2"}
th.desc::after{content:" \\25bc"}.plot{min-height:480px}"""

#: a click on a header sorts its table by that column (numbers as numbers, "-" last)
_SORT_JS = """document.querySelectorAll("table.sortable th").forEach(function (th, col) {
  th.addEventListener("click", function () {
    var body = th.closest("table").tBodies[0], rows = Array.from(body.rows);
    var asc = !th.classList.contains("asc");
    th.parentNode.querySelectorAll("th").forEach(function (h) { h.className = ""; });
    th.className = asc ? "asc" : "desc";
    function key(r) { var v = r.cells[col].dataset.v, n = Number(v);
      return v === "" ? null : isNaN(n) ? v : n; }
    rows.sort(function (a, b) {
      var x = key(a), y = key(b);
      if (x === null || y === null) return x === y ? 0 : x === null ? 1 : -1;
      var c = typeof x === "number" && typeof y === "number" ? x - y
        : String(x).localeCompare(String(y));
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});"""


def _inputs(sets: list[ResultSet]) -> str:
    kinds = {
        "bench": "bench JSON",
        "impls": "bench JSON with other implementations",
        "run": "optimizer run",
    }
    items = "".join(
        f"<li>{html.escape(str(s.source))}: {kinds[s.kind]}, {len(s.tasks)} tasks"
        + (f", on {html.escape(s.device)}" if s.device else "")
        + "</li>"
        for s in sets
    )
    return f"<ul>{items}</ul>"


def render(sets: list[ResultSet]) -> str:
    pio = require_plotly()
    plotly_js = importlib.import_module("plotly.offline").get_plotlyjs()
    plots = "".join(
        '<div class="plot">'
        + pio.to_html(
            fig, include_plotlyjs=False, full_html=False, div_id=name, config={"displaylogo": False}
        )
        + "</div>"
        for name, fig in figures(sets).items()
    )
    tables = scores_table(sets) + success_rows(sets) + trajectory_table(sets) + compare_table(sets)
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>CUDAMaster report</title>'
        f"<style>{_STYLE}</style><script>{plotly_js}</script></head><body>"
        f"<h1>CUDAMaster report</h1>{_inputs(sets)}{plots}{tables}"
        f"<script>{_SORT_JS}</script></body></html>"
    )


def write_report(sets: list[ResultSet], out: Path) -> None:
    text = render(sets)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text)
    tmp.replace(out)
