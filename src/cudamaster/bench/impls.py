"""A folder of implementations laid out as MSKernelBench lays it out (`bench --impls DIR`):
``<op>.cu`` for FP32, ``<op>_bf16.cu`` for BF16, any subset of the operators, in DIR or its
subfolders (MSKernelBench keeps ``optimized/fp32`` and ``optimized/bf16`` side by side).

Every ``.cu`` file gets a row with its status, and no file ends the run: ``misnamed`` (no
operator and dtype by that name), ``duplicate`` (another file is that operator and dtype),
``not_selected`` (outside --ops or --dtype), a refusal before running (``compile_error``,
``missing_symbol``, ``forbidden``: no GPU time is spent on it), or the verdict of its
evaluation (``ok``, ``wrong``, ``wrong_on_unseen``, ``crash``, ...). An operator that --ops names
without a file for a dtype asked is a ``missing`` row. A kernel that defines
``<symbol>_optimized`` (MSKernelBench's optimized kernels) but not ``<symbol>`` is called by that
name. Each file is evaluated in one session with the operator's baseline and library baseline
per suite (bench/batch.py), labelled by the folder's name: each operator and dtype has at most one
file, so the folder is one implementation across tasks (one series in `cudamaster report`, one
side of `cudamaster compare`), and each result names its file.
"""

from __future__ import annotations

import difflib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from ..errors import UserError
from ..formatting import percent
from ..report import CaseScore, ImplScore, score_impl
from ..tasks import Task, discover
from .build import BuildError, build
from .evaluate import Impl, ImplResult, optimized_entry, prepare
from .score import weighted_score
from .symbols import exported_symbols

if TYPE_CHECKING:
    from .batch import Finished, Job

#: Statuses of a file that is not evaluated (the others are the evaluation's verdicts).
PENDING = "pending"  # to be evaluated (or being evaluated)
MISSING = "missing"
MISNAMED = "misnamed"
DUPLICATE = "duplicate"
NOT_SELECTED = "not_selected"
NO_BASELINE = "no_baseline"
LAYOUT = "an implementation is <op>.cu (FP32) or <op>_bf16.cu (BF16), e.g. vector_add.cu"


@dataclass
class ScoreSummary:
    """An implementation's verdict and scores on one suite: P against the baseline and against
    the library (complexity-weighted mean speedups) with their uncertainties, the geometric-mean
    speedup over the baseline, and the speed-of-light fraction on the case that weighs most."""

    verdict: str
    detail: str
    score: float | None  # P vs the baseline; None unless correct on every case
    noise: float | None  # P's uncertainty, absolute
    library_score: float | None  # P vs the library (same weights); None without a library
    library_noise: float | None
    geomean: float | None
    sol: float | None


@dataclass
class ImplSummary(ScoreSummary):
    """ScoreSummary with the implementation's label and every case's numbers."""

    label: str
    cases: list[CaseScore]


def summarize(score: ImplScore) -> ImplSummary:
    """An ImplScore (report.score_impl) summed up: P against the library beside P against the
    baseline, and the speed of light on the heaviest case."""
    weights = [c.complexity for c in score.cases]

    def weighted(values: list[float | None]) -> float | None:
        if score.score is None or any(v is None for v in values):
            return None
        try:
            return weighted_score(weights, [v for v in values if v is not None])
        except ValueError:  # no case, or one that weighs nothing
            return None

    heaviest = max(score.cases, key=lambda c: c.complexity, default=None)
    return ImplSummary(
        verdict=score.verdict,
        detail=score.detail,
        score=score.score,
        noise=score.noise,
        library_score=weighted([c.vs_library for c in score.cases]),
        library_noise=weighted([c.vs_library_u for c in score.cases]),
        geomean=score.geomean,
        sol=heaviest.sol_fraction if heaviest else None,
        label=score.label,
        cases=score.cases,
    )


def summary_from_dict(data: dict[str, Any]) -> ImplSummary:
    """summarize() of an ImplScore as report_json wrote it."""
    known = {f.name for f in fields(CaseScore)}
    cases = [CaseScore(**{k: v for k, v in c.items() if k in known}) for c in data["cases"]]
    return summarize(
        ImplScore(
            label=data["label"],
            verdict=data["verdict"],
            detail=data.get("detail", ""),
            score=data.get("score"),
            geomean=data.get("geomean"),
            cases=cases,
            noise=data.get("noise"),
        )
    )


@dataclass
class ImplFile:
    """One file of the folder (or, ``missing``, one that --ops asked for) and what became of it."""

    path: str  # relative to the folder (missing: the name expected)
    operator: str | None
    dtype: str | None
    status: str  # see the module's docstring
    detail: str = ""
    entry: str | None = None  # the extern "C" function called
    suites: dict[str, ScoreSummary] = field(default_factory=dict)  # per suite evaluated
    build_s: float | None = None  # its compilation and static checks (next to none if cached)
    eval_s: float | None = None  # its evaluations' wall time, baseline and library included
    wall_s: float | None = None  # build_s + eval_s: what the bench spent on this file

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ImplFile:
        known = {f.name for f in fields(cls)}
        kept = {k: v for k, v in data.items() if k in known}
        scored = {f.name for f in fields(ScoreSummary)}
        kept["suites"] = {
            s: ScoreSummary(**{k: x for k, x in v.items() if k in scored})
            for s, v in data.get("suites", {}).items()
        }
        return cls(**kept)


def parse_name(name: str, known: dict[str, Task]) -> tuple[str | None, str | None, str]:
    """(operator, dtype, "") of a file name, or (None, None, why it names none)."""
    stem = name.removesuffix(".cu")
    if stem in known:
        return stem, "fp32", ""
    base, sep, suffix = stem.rpartition("_")
    if sep and suffix == "bf16" and base in known:
        return base, "bf16", ""
    if stem.startswith("test_") and parse_name(stem.removeprefix("test_") + ".cu", known)[0]:
        return None, None, f"{name}: a test program, not an implementation ({LAYOUT})"
    lower = {n.lower(): n for n in known}
    if stem.lower() in lower:
        return (
            None,
            None,
            (f"{name}: operator names are case-sensitive: did you mean {lower[stem.lower()]}.cu?"),
        )
    op = lower.get(base.lower()) if sep else None
    if op is not None and suffix.lower() == "bf16":
        return None, None, f"{name}: names are case-sensitive: did you mean {op}_bf16.cu?"
    if op is not None:
        return (
            None,
            None,
            (
                f"{name}: {suffix!r} names no dtype of the benchmark: {op}.cu is "
                f"the FP32 implementation, {op}_bf16.cu the BF16 one"
            ),
        )
    close = difflib.get_close_matches(stem, list(known), n=1)
    hint = f" (did you mean {close[0]}.cu?)" if close else " (`cudamaster tasks` lists them)"
    return None, None, f"{name} names no operator{hint}: {LAYOUT}"


def expected_name(op: str, dtype: str) -> str:
    return f"{op}.cu" if dtype == "fp32" else f"{op}_bf16.cu"


def scan(folder: Path, selected: list[Task], variants: list[str], named: bool) -> list[ImplFile]:
    """Every .cu file under ``folder``, with the operator and dtype it is for or why it is none;
    those of ``selected`` operators and ``variants`` are ``pending``. With ``named`` (the user
    listed ``selected`` with --ops), each selected operator and dtype without a file is a
    ``missing`` row. A folder that does not exist, or holds no .cu file, is a UserError."""
    if not folder.exists():
        raise UserError(f"--impls {folder}: no such folder")
    if not folder.is_dir():
        raise UserError(
            f"--impls {folder} is a file: name the folder that holds the implementations ({LAYOUT})"
        )
    paths = sorted(p for p in folder.rglob("*.cu") if p.is_file())
    if not paths:
        raise UserError(f"--impls {folder} holds no .cu file: {LAYOUT}")
    known = discover()
    wanted = {t.name for t in selected}
    files: list[ImplFile] = []
    taken: dict[tuple[str, str], str] = {}
    for p in paths:
        rel = p.relative_to(folder).as_posix()
        op, dtype, why = parse_name(p.name, known)
        if op is None or dtype is None:
            files.append(ImplFile(rel, None, None, MISNAMED, why))
            continue
        f = ImplFile(rel, op, dtype, PENDING)
        if op not in wanted:
            f.status, f.detail = NOT_SELECTED, f"{op} is not among --ops"
        elif dtype not in variants:
            f.status, f.detail = NOT_SELECTED, f"{dtype} is not among --dtype {','.join(variants)}"
        elif (op, dtype) in taken:
            f.status, f.detail = DUPLICATE, f"{taken[op, dtype]} is the {dtype} {op} evaluated"
        elif known[op].source("baseline", dtype) is None:
            f.status, f.detail = NO_BASELINE, f"{op} has no {dtype} baseline to compare with"
        else:
            taken[op, dtype] = rel
        files.append(f)
    if named:
        present = {(f.operator, f.dtype) for f in files}
        for t in selected:
            for v in variants:
                if (t.name, v) not in present:
                    name = expected_name(t.name, v)
                    files.append(
                        ImplFile(
                            name,
                            t.name,
                            v,
                            MISSING,
                            f"--ops names {t.name}: {folder} has no {name}",
                        )
                    )
    return files


def label_of(folder: Path) -> str:
    """The label of a folder's implementations: its name, unless that is a standard label."""
    name = folder.resolve().name or "impls"
    return f"{name} (impls)" if name in ("baseline", "library") else name


def candidates(folder: Path, files: list[ImplFile]) -> dict[str, Impl]:
    """The pending files as implementations, by path, labelled by the folder's name."""
    label = label_of(folder)
    return {f.path: Impl(label, (folder / f.path).resolve()) for f in files if f.status == PENDING}


def auto_entry(impl: Impl, symbol: str, arch: str) -> Impl:
    """``impl`` called by ``<symbol>_optimized`` where it defines that and not ``symbol`` (an
    optimized kernel of MSKernelBench's); unchanged otherwise, or where it does not build (its
    evaluation says why)."""
    if impl.entry is not None:
        return impl
    try:
        exported = exported_symbols(build(impl.source, arch, impl.links, impl.extra_flags).library)
    except BuildError:
        return impl
    optimized = optimized_entry(symbol)
    if symbol not in exported and optimized in exported:
        return replace(impl, entry=optimized)
    return impl


def jobs(
    files: list[ImplFile],
    impls: dict[str, Impl],
    tasks: dict[str, Task],
    suites: list[str],
    arch: str,
    built_s: dict[Path, float],
) -> list[Job]:
    """One evaluation per pending file and suite. Each file's entry is settled first, and a file
    refused before running (compile_error, missing_symbol, forbidden) gets that status, and no
    evaluation. ``built_s``: each source's build time (batch.build_all)."""
    from .batch import Job

    pending = [f for f in files if f.status == PENDING]

    def check(f: ImplFile) -> Impl | None:
        assert f.operator is not None and f.dtype is not None
        t0 = time.monotonic()
        symbol = tasks[f.operator].symbol(f.dtype)
        impl = auto_entry(impls[f.path], symbol, arch)
        pre = ImplResult(impl.label, str(impl.source))
        prepare(impl, arch, symbol, pre)
        f.entry = pre.entry
        f.build_s = round(built_s.get(impl.source, 0.0) + time.monotonic() - t0, 3)
        f.wall_s = f.build_s
        if pre.verdict != "pending":
            f.status, f.detail = pre.verdict, pre.detail
            return None
        impls[f.path] = impl
        return impl

    with ThreadPoolExecutor(max(1, min(len(pending), os.cpu_count() or 4))) as pool:
        checked = list(pool.map(check, pending))
    return [
        Job(tasks[f.operator], f.dtype, s, (impl,), f.path)
        for f, impl in zip(pending, checked, strict=True)
        if impl is not None and f.operator is not None and f.dtype is not None
        for s in suites
    ]


def record(files: list[ImplFile], finished: Finished) -> None:
    """A settled evaluation of a file into its row: the suite's verdict and scores, its wall time,
    and the file's status (the first suite that failed, else ok)."""
    job = finished.job
    f = next((f for f in files if f.path == job.file), None)
    if f is None or not job.candidates:
        return
    result = finished.report.impl(job.candidates[0].label)
    if result is None:
        return
    scored = summarize(score_impl(job.task, finished.report, result, finished.device))
    f.suites[job.suite] = ScoreSummary(
        **{k.name: getattr(scored, k.name) for k in fields(ScoreSummary)}
    )
    f.eval_s = round((f.eval_s or 0.0) + finished.report.wall_s, 3)
    f.wall_s = round((f.build_s or 0.0) + f.eval_s, 3)
    bad = [(s, r) for s, r in f.suites.items() if r.verdict != "ok"]
    if bad:
        suite, first = bad[0]
        f.status = first.verdict
        f.detail = f"{suite} suite: {first.detail}" if len(f.suites) > 1 else first.detail
    else:
        f.status, f.detail = "ok", ""


def json_fields(folder: Path, files: list[ImplFile]) -> dict[str, Any]:
    """The results file's fields for a folder: its path, every file's row, and the mean wall
    time per file evaluated (compiled and checked at least)."""
    walls = [f.wall_s for f in files if f.wall_s is not None]
    return {
        "impls_dir": str(folder),
        "impls_mean_wall_s": round(sum(walls) / len(walls), 3) if walls else None,
        "impls": [asdict(f) for f in files],
    }


def _num(x: float | None, u: float | None = None) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}" if not u else f"{x:.3g} ± {u:.2g}"


def files_table(folder: Path, files: list[ImplFile], width: int = 100) -> Table:
    """One row per file and suite evaluated (one per file otherwise): status, P against the
    baseline with its noise, P against the library, geometric mean, speed of light on the
    heaviest case, the file's wall time, and why it failed (cut at ``width`` characters)."""
    ok = sum(f.status == "ok" for f in files)
    table = Table(title=f"implementations in {folder}: {ok} of {len(files)} rows ok")
    for col in (
        "file",
        "operator",
        "dtype",
        "suite",
        "status",
        "P vs base",
        "P vs lib",
        "geomean",
        "SOL",
        "s",
        "detail",
    ):
        table.add_column(col, overflow="fold")

    def cut(text: str) -> str:
        text = " ".join(text.split())
        return escape(text if len(text) <= width else text[: width - 3] + "...")

    for f in files:
        wall = f"{f.wall_s:.1f}" if f.wall_s is not None else "-"
        rows: list[tuple[str, ScoreSummary | None]] = list(f.suites.items()) or [("-", None)]
        for k, (suite, s) in enumerate(rows):
            verdict = s.verdict if s else f.status
            status = verdict if verdict == "ok" else f"[red]{escape(verdict)}[/red]"
            detail = s.detail if s else f.detail
            table.add_row(
                escape(f.path) if k == 0 else "",
                f.operator or "-",
                f.dtype or "-",
                suite,
                status,
                _num(s.score, s.noise) if s else "-",
                _num(s.library_score, s.library_noise) if s else "-",
                _num(s.geomean) if s else "-",
                percent(s.sol) if s else "-",
                wall if k == 0 else "",
                cut(detail),
            )
    return table


def status_counts(files: list[ImplFile]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in files:
        counts[f.status] = counts.get(f.status, 0) + 1
    return counts
