"""The cudamaster command line."""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import json
import logging
import os
import re
import sys
import tempfile
import time
import tomllib
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .errors import UserError
from .formatting import percent

if TYPE_CHECKING:
    from .agents.remeasure import Remeasured
    from .compare import Comparison

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False)
# tables written to a pipe or a file (CI logs, device runs) get room instead of 80 columns
_WIDTH = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 180
console = Console(width=_WIDTH)
UNSEEN_OPTION = typer.Option(
    "--unseen",
    min=0,
    help="Extra cases drawn from the operator's shape space for this run and checked (never "
    "timed) besides the suite's; 0 for none [default: 6].",
)
UNSEEN_SEED_OPTION = typer.Option(
    "--unseen-seed",
    min=0,
    help="Replay the unseen cases of an earlier run (its report records the seed).",
)
err_console = Console(stderr=True)


# Options with a fixed set of values are enums, so that --help lists exactly what each command
# takes: one dtype or suite where a command evaluates one, "both" only where it runs both.
class Dtype(StrEnum):
    fp32 = "fp32"
    bf16 = "bf16"
    both = "both"


class OneDtype(StrEnum):
    fp32 = "fp32"
    bf16 = "bf16"


class Suite(StrEnum):
    paper = "paper"
    large = "large"
    both = "both"


class OneSuite(StrEnum):
    paper = "paper"
    large = "large"


class Summary(StrEnum):
    """A profile summary: filtered (the planner's default), full, or none."""

    filtered = "filtered"
    full = "full"
    none = "none"


class Flags(StrEnum):
    measure = "measure"
    agent = "agent"


class Effort(StrEnum):
    low = "low"
    medium = "medium"
    high = "high"


def _variants(d: Dtype | OneDtype) -> list[str]:
    return ["fp32", "bf16"] if d == Dtype.both else [d.value]


def _suites(s: Suite | OneSuite) -> list[str]:
    return ["paper", "large"] if s == Suite.both else [s.value]


def _op_names(ops: str | None) -> list[str] | None:
    """--ops as names (None: every operator); an empty list is refused, not read as all."""
    if ops is None:
        return None
    names = [o.strip() for o in ops.split(",") if o.strip()]
    if not names:
        raise UserError(f"--ops {ops!r} names no operator: give names like vector_add,softmax "
                        "(see `cudamaster tasks`)")  # fmt: skip
    return names


def _optimize_tasks(ops: str, dtype: Dtype) -> list[tuple[str, str]]:
    """--ops of optimize as (operator, dtype) pairs: OP:fp32 or OP:bf16 names its own dtype,
    a bare OP takes --dtype's."""
    tasks = []
    for name in _op_names(ops) or []:
        op, sep, variant = name.partition(":")
        if sep and variant not in ("fp32", "bf16"):
            raise UserError(f"--ops {name!r}: the dtype after ':' is fp32 or bf16 (e.g. "
                            f"{op}:bf16)")  # fmt: skip
        tasks += [(op.strip(), variant)] if sep else [(op, v) for v in _variants(dtype)]
    return list(dict.fromkeys(tasks))


def _picked_cases(text: str | None, task, suite: str) -> list[int] | None:
    """--cases as indices of the suite's cases, checked before any work (None: every case)."""
    if text is None:
        return None
    n = len(task.cases(suite))
    try:
        picked = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        picked = []
    if not picked:
        raise UserError(f"--cases {text!r} is not a list of case indices: give e.g. --cases 0,3 "
                        f"(the {suite} suite of {task.name} has cases 0-{n - 1})")  # fmt: skip
    if bad := [i for i in picked if not 0 <= i < n]:
        raise UserError(f"--cases: the {suite} suite of {task.name} has no case {bad[0]}: give "
                        f"indices from 0 to {n - 1} (`cudamaster tasks {task.name}` lists "
                        "them)")  # fmt: skip
    return sorted(set(picked))


def _check_writable(path: Path, option: str = "--out", directory: bool = False) -> None:
    """Fail now, before any work, if ``path`` (a file, or with ``directory`` a folder) cannot
    be written: probe its folder (or the nearest existing one above it) with a file or folder
    made and removed at once. Creates nothing that stays."""
    folder = path if directory else path.parent
    if not directory and path.is_dir():
        raise UserError(f"{option} {path} is a directory: name a file, e.g. {path / 'out.json'}")
    if not directory and path.exists() and not os.access(path, os.W_OK):
        raise UserError(f"{option} {path} is not writable: choose another path")
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"{option} {path}: {existing} is a file, not a directory: choose "
                        "another path")  # fmt: skip
    try:
        if existing == folder:
            fd, probe = tempfile.mkstemp(dir=folder, prefix=".cudamaster-probe-")
            os.close(fd)
            os.unlink(probe)
        else:
            os.rmdir(tempfile.mkdtemp(dir=existing, prefix=".cudamaster-probe-"))
    except OSError as exc:
        raise UserError(f"{option} {path} cannot be written ({exc.strerror or exc} in "
                        f"{existing}): choose a writable path") from None  # fmt: skip


def _save_report(data: dict, out: Path, stem: str) -> None:
    """Write the JSON report to ``out``; if that fails (after an evaluation: nothing computed
    may be lost), write it to a file in the current directory, else in the temp directory,
    and raise a UserError saying where it went."""
    from .report import write_json

    try:
        write_json(data, out)
        return
    except OSError as exc:
        why = exc.strerror or str(exc)
    name = f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json"
    for folder in (Path.cwd(), Path(tempfile.gettempdir())):
        try:
            write_json(data, folder / name)
        except OSError:
            continue
        raise UserError(f"--out {out} could not be written ({why}): the report was saved to "
                        f"{folder / name} instead")  # fmt: skip
    raise UserError(f"--out {out} could not be written ({why}), nor a copy in the current or "
                    "the temp directory: rerun with --json to print the report")  # fmt: skip


def _version() -> str:
    """The installed package's version, else (running from a source tree) pyproject's."""
    try:
        return importlib.metadata.version("cudamaster")
    except importlib.metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


def _print_version(value: bool) -> None:
    if value:
        print(f"cudamaster {_version()}")
        raise typer.Exit()


@app.callback()
def _main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
):
    """CUDAMaster: MSKernelBench's honest evaluator and an LLM kernel optimizer."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=err_console, show_path=False)],
    )


@app.command("tasks")
def tasks_cmd(
    op: Annotated[
        str | None,
        typer.Argument(metavar="OP", help="One operator: print its card instead of the list."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the README's library-baseline table.")
    ] = False,
) -> None:
    """List the operators: category, dtypes, library baseline, cases per suite. With OP, that
    operator's card: C signatures, semantics, suites, tolerances, baselines, unseen shapes."""
    from .tasks import discover, get_task

    if op is not None:
        if markdown:
            raise UserError("--markdown prints the table of every operator: drop OP or --markdown")
        card = task_card(get_task(op))
        if as_json:
            print(json.dumps(card, indent=1))
        else:
            console.print(card_text(card), markup=False, highlight=False, soft_wrap=True)
        return
    tasks = discover()
    rows: list[dict[str, Any]] = []
    for t in tasks.values():
        dtypes = [v for v in ("fp32", "bf16") if t.source("baseline", v)]
        libs = [v for v in ("fp32", "bf16") if t.source("library", v)]
        rows.append(
            {
                "name": t.name,
                "category": t.spec.category,
                "dtypes": dtypes,
                "library": t.spec.library if libs else None,
                "library_dtypes": libs,
                "paper_cases": len(t.spec.suites["paper"]),
                "large_cases": len(t.spec.suites["large"]),
            }
        )
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    if markdown:
        print(library_table(tasks))
        return
    table = Table(title=f"MSKernelBench: {len(rows)} operators (`cudamaster tasks OP`: one card)")
    for col in ("operator", "category", "dtypes", "library baseline", "library dtypes", "paper",
                "large"):  # fmt: skip
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            r["name"],
            r["category"],
            ", ".join(r["dtypes"]),
            r["library"] or "-",  # whole: its clauses say what each dtype uses
            ", ".join(r["library_dtypes"]) or "-",
            str(r["paper_cases"]),
            str(r["large_cases"]),
        )
    console.print(table, markup=False, highlight=False)


def task_card(task) -> dict[str, Any]:
    """One operator's card: what a kernel for it must be and how it is judged, from task.toml."""
    from .agents.brief import signature

    spec = task.spec
    variants = ("fp32", "bf16")

    def files(kind: str) -> dict[str, str | None]:
        return {v: (p.name if (p := task.source(kind, v)) else None) for v in variants}

    return {
        "name": task.name,
        "category": spec.category,
        "summary": spec.summary,
        "signatures": {v: f'extern "C" {signature(task, v)}' for v in variants},
        "semantics_note": spec.semantics_note,
        "suites": {s: [dict(c.params) for c in task.cases(s)] for s in ("paper", "large")},
        "tolerance": {v: spec.tolerance[v].model_dump() for v in variants},
        "paper_rule": spec.paper_rule.model_dump(),
        "baseline": files("baseline"),
        "library": spec.library,
        "library_files": files("library"),
        "library_note": spec.library_note,
        "unseen": spec.unseen.model_dump(),
        "folder": str(task.folder),
    }


def card_text(card: dict[str, Any]) -> str:
    """task_card as text, every field whole."""

    def params(p: dict) -> str:
        return " ".join(f"{k}={v}" for k, v in p.items())

    def present(f: dict[str, str | None]) -> str:
        have = [f"{name} ({v.upper()})" for v, name in f.items() if name]
        return ", ".join(have) or "none"

    lines = [f"{card['name']} ({card['category']}): {card['summary']}", "", "signatures:"]
    lines += [f"  {v.upper()}: {sig}" for v, sig in card["signatures"].items()]
    lines.append("  (T* pointers are device buffers; const ones are inputs; scalars by value)")
    if card["semantics_note"]:
        lines += ["", f"semantics: {card['semantics_note']}"]
    for suite, cases in card["suites"].items():
        lines += ["", f"{suite} suite ({len(cases)} cases):"]
        lines += [f"  {i}: {params(c)}" for i, c in enumerate(cases)]
    lines += [
        "",
        "tolerance (pass iff |got - ref| <= atol + rtol*|ref| + mtol*mag on every "
        "element but a budget fraction; mag: the oracle's magnitude, else |ref|):",
    ]
    for v, tol in card["tolerance"].items():
        lines.append(f"  {v.upper()}: " + ", ".join(f"{k} {x:g}" for k, x in tol.items()))
    rule = card["paper_rule"]
    lines.append(f"paper rule (the original benchmark's, reported beside the verdict): "
                 f"{rule['kind']}, tol {rule['tol']:g}, budget {rule['budget']:g}")  # fmt: skip
    lines += ["", f"baseline: {present(card['baseline'])}"]
    lines.append(f"library: {card['library'] or 'none'}")
    lines.append(f"  files: {present(card['library_files'])}")
    if card["library_note"]:
        lines.append(f"  note: {card['library_note']}")
    unseen = card["unseen"]
    dims = [f"{k} = {v if isinstance(v, str) else ', '.join(map(str, v))}"
            for k, v in unseen["dims"].items()]  # fmt: skip
    lines += ["", "unseen shape space (extra cases drawn per evaluation, checked, never timed):"]
    lines.append(f"  dims: {'; '.join(dims)}")
    lines.append(f"  where: {'; '.join(unseen['where']) or '-'}")
    lines.append(f"  values: {', '.join(unseen['values'])}")
    lines += ["", f"folder: {card['folder']}"]
    return "\n".join(lines)


def library_table(tasks: dict) -> str:
    """Markdown: which operators have which library baseline, in which dtypes, or why none."""
    lines = ["| operator | category | library baseline | dtypes |", "|---|---|---|---|"]
    for t in sorted(tasks.values(), key=lambda t: (t.spec.category, t.name.lower())):
        libs = [v for v in ("fp32", "bf16") if t.source("library", v)]
        what = (t.spec.library or "").replace("|", "/") if libs else "none"
        if not libs:
            note = re.sub(r"^No library (file|baseline)[:.;,]?\s*", "", t.spec.library_note or "")
            note = note.split(". ")[0].replace("|", "/").rstrip(".")
            what = f"none: {note}" if note else what
        lines.append(f"| {t.name} | {t.spec.category} | {what} | {', '.join(libs) or '-'} |")
    n = sum(1 for t in tasks.values() if any(t.source("library", v) for v in ("fp32", "bf16")))
    lines.append("")
    lines.append(f"{n} of {len(tasks)} operators have a library baseline.")
    return "\n".join(lines)


def _built(file: Path, arch: str, symbol: str, pre: Any) -> str:
    """What was checked of a candidate before anything runs: its build, its entry point, the
    static checks, and each kernel's resources as ptxas reported them."""
    from .bench.build import nvcc_version

    lines = [f'{file.name}: built for {arch} (nvcc {nvcc_version()}); defines extern "C" '
             f"{symbol}; passes the static checks (no vendor library, process, file or network "
             "call)"]  # fmt: skip
    for k in pre.build.resources if pre.build else []:
        lines.append(f"  kernel {k.kernel}: {k.registers} registers, {k.shared_bytes} B shared, "
                     f"{k.spill_stores} B spill stores")  # fmt: skip
    return "\n".join(lines)


def _device():
    """GPU 0's facts (measured once and cached), or a one-line UserError without a GPU."""
    from .device import facts

    return facts()


@app.command("device")
def device_cmd(
    refresh: Annotated[
        bool, typer.Option(help="Measure again instead of using the cache.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """GPU, driver, nvcc, SMs, L2, and measured peaks (copy bandwidth, FP32/BF16 GEMM)."""

    from .device import facts

    f = facts(refresh=refresh)
    if as_json:
        print(json.dumps(asdict(f), indent=1))
        return
    table = Table(title="device", show_header=False)
    rows = [
        ("GPU", f"{f.name} (sm_{f.compute_capability}, {f.memory_mib} MiB)"),
        ("driver / nvcc", f"{f.driver} / {f.nvcc}"),
        ("SMs / L2", f"{f.sm_count} / {f.l2_bytes / 2**20:.0f} MiB"),
        ("copy bandwidth (cold D2D, read+write)", f"{f.copy_gbs:.0f} GB/s"),
        ("FP32 GEMM (cuBLAS SGEMM 8192³)", f"{f.fp32_tflops:.1f} TFLOP/s"),
        ("BF16 GEMM (cuBLAS GemmEx 8192³)", f"{f.bf16_tflops:.1f} TFLOP/s"),
        ("shared memory per SM / per block", f"{f.shared_per_sm // 1024} / "
         f"{f.shared_per_block // 1024} KiB"),
        ("registers / threads per SM", f"{f.registers_per_sm} / {f.threads_per_sm}"),
        ("launch + synchronize floor (empty kernel, timed as a call)",
         f"{f.launch_floor_us:.2f} us"),
    ]  # fmt: skip
    for k, v in rows:
        table.add_row(k, v)
    console.print(table)


@app.command("eval")
def eval_cmd(
    op: Annotated[str, typer.Argument(help="Operator name (see `cudamaster tasks`).")],
    file: Annotated[Path, typer.Argument(help="The implementation (.cu) to evaluate.")],
    dtype: Annotated[OneDtype, typer.Option(help="The variant to evaluate.")] = OneDtype.fp32,
    suite: Annotated[OneSuite, typer.Option(help="The suite of cases.")] = OneSuite.paper,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full JSON report.")] = False,
    cases: Annotated[str | None, typer.Option(help="Only these case indices, e.g. 0,3.")] = None,
    seed: Annotated[int, typer.Option(min=0, help="Base seed of the input sets.")] = 0,
    flags: Annotated[str, typer.Option(help="Extra nvcc flags for the candidate.")] = "",
    out: Annotated[Path | None, typer.Option(help="Also write the JSON report here.")] = None,
    unseen: Annotated[int | None, UNSEEN_OPTION] = None,
    unseen_seed: Annotated[int | None, UNSEEN_SEED_OPTION] = None,
    entry: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help='The extern "C" function to call, e.g. vector_add_optimized (default: the '
            "operator's, such as vector_add or vector_add_bf16).",
        ),
    ] = None,
) -> None:
    """Verify FILE against the oracle and time it against the baseline and the library.

    Exit codes:
    0: the candidate is correct
    1: it is not (the report says why)
    2: bad input, a candidate that does not build, or no GPU (one line says what to do)"""
    from .bench.evaluate import Evaluator, Impl, ImplResult, prepare, standard_impls
    from .device import build_arch
    from .report import case_table, report_json, score_impl, unseen_line
    from .tasks import get_task

    task = get_task(op)
    if not file.is_file():
        raise UserError(f"no such file: {file}")
    picked = _picked_cases(cases, task, suite.value)
    if out:
        _check_writable(out)  # now, not after the evaluation
    variant = dtype.value
    arch = build_arch()
    cand = Impl("candidate", file.resolve(), extra_flags=tuple(flags.split()), entry=entry)
    pre = ImplResult("candidate", str(file))
    prepare(cand, arch, task.symbol(variant), pre)
    if pre.verdict == "missing_symbol":
        raise UserError(f"{pre.verdict}: {pre.detail}")
    if pre.verdict != "pending":
        raise UserError(pre.detail)
    # what was checked without a GPU (on stderr under --json, whose stdout is the report)
    (err_console if as_json else console).print(_built(file, arch, pre.entry, pre), markup=False)
    try:
        device = _device()
    except UserError as exc:  # what can be checked without a GPU was: say so, and what is left
        raise UserError(
            f"{exc}: {file.name} was built and checked, not run; correctness and "
            "timing need a GPU: run the same command on a machine with one"
        ) from None
    with err_console.status("evaluating") as status:
        ev = Evaluator(
            task,
            variant,
            suite.value,
            device.arch,
            cases=picked,
            base_seed=seed,
            progress=lambda m: status.update(m),
            unseen=unseen,
            unseen_seed=unseen_seed,
        )
        report = ev.run([*standard_impls(task, variant), cand])
    data = report_json(task, report, device)
    unsaved: UserError | None = None
    if out:
        try:
            _save_report(data, out, f"cudamaster-eval-{task.name}-{variant}")
        except UserError as exc:  # said after the results, which are printed all the same
            unsaved = exc
    if as_json:
        print(json.dumps(data, indent=1, default=str))
    else:
        scores = [score_impl(task, report, i, device) for i in report.impls]
        console.print(case_table(task, report, scores))
        console.print(unseen_line(report), markup=False)
        for s in scores:
            line = f"{s.label}: {s.verdict}"
            if s.score is not None:
                noise = f" ± {s.noise:.3f}" if s.noise else ""
                line += f", P = {s.score:.3f}{noise}, geomean speedup {s.geomean:.3f}"
            if s.detail:
                line += f" ({s.detail})"
            console.print(line)
    if unsaved is not None:
        raise unsaved
    cand_result = report.impl("candidate")
    if cand_result is None or not cand_result.correct:
        raise typer.Exit(1)


@app.command("aa")
def aa_cmd(
    op: Annotated[str, typer.Argument(help="Operator name (see `cudamaster tasks`).")],
    file: Annotated[
        Path | None, typer.Argument(help="An implementation (.cu); default: the baseline.")
    ] = None,
    dtype: Annotated[OneDtype, typer.Option(help="The variant to time.")] = OneDtype.fp32,
    suite: Annotated[OneSuite, typer.Option(help="The suite of cases.")] = OneSuite.paper,
    cases: Annotated[str | None, typer.Option(help="Only these case indices, e.g. 0,3.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """An implementation (the baseline by default) timed against itself: per case, the ratio of
    the two medians and its uncertainty. Every ratio should be 1 within it; what is not says
    what a speedup is worth on this machine."""
    from .bench.aa import LONG_CALL_MS, run_aa
    from .tasks import get_task

    task = get_task(op)
    if file is not None and not file.is_file():
        raise UserError(f"no such file: {file}")
    picked = _picked_cases(cases, task, suite.value)
    device = _device()
    with err_console.status("timing it against itself") as status:
        rep = run_aa(task, dtype.value, suite.value, device.arch, picked, status.update,
                     file.resolve() if file else None)  # fmt: skip
    if as_json:
        print(json.dumps(asdict(rep) | {"device": device.name}, indent=1))
        return
    what = file.name if file else "baseline"
    table = Table(title=f"A/A: {op} {what} against itself ({dtype.value}, {suite.value} suite, "
                  f"{device.name})")  # fmt: skip
    for col in ("case", "A ms", "B ms", "A/B", "±", "within"):
        table.add_column(col, justify="left" if col == "case" else "right")
    for r in rep.rows:
        table.add_row(r.label, f"{r.a_ms:.4f}", f"{r.b_ms:.4f}", f"{r.ratio:.4f}",
                      f"{r.uncertainty:.4f}", "yes" if r.holds else "NO")  # fmt: skip
    console.print(table)
    long = rep.worst(LONG_CALL_MS)
    console.print(
        f"{len(rep.rows) - len(rep.outside)}/{len(rep.rows)} ratios within their uncertainty; "
        f"largest |A/B - 1|: {rep.worst():.2%}"
        + (f" ({long:.2%} over calls of {LONG_CALL_MS * 1e3:.0f} us and more)" if long else "")
    )


@app.command("bench")
def bench_cmd(
    ops: Annotated[
        str | None, typer.Option(help="Comma-separated operators (default: all).")
    ] = None,
    dtype: Annotated[Dtype, typer.Option(help="fp32, bf16 or both.")] = Dtype.both,
    suite: Annotated[Suite, typer.Option(help="paper, large or both.")] = Suite.both,
    out: Annotated[Path | None, typer.Option(help="JSON results file.")] = None,
    seed: Annotated[int, typer.Option(min=0, help="Base seed of the input sets.")] = 0,
    gpus: Annotated[
        str | None,
        typer.Option(help="GPUs to spread the evaluations over: 'all' or indices like 0,2."),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="ADDRESS",
            help="Run on the Ray cluster at ADDRESS ('auto': this host's), one GPU per job.",
        ),
    ] = None,
    unseen: Annotated[int | None, UNSEEN_OPTION] = None,
    impls: Annotated[
        Path | None,
        typer.Option(
            "--impls",
            metavar="DIR",
            help="Evaluate the implementations in DIR (<op>.cu for FP32, <op>_bf16.cu for BF16, "
            "any subset of the operators), each beside its baseline and library; every file "
            "gets a row with its status.",
        ),
    ] = None,
) -> None:
    """Baseline vs library over many operators; results saved as JSON as they come. With
    --impls DIR, the operators and dtypes DIR has a file for, each file evaluated beside them."""
    from .bench.batch import ConsoleProgress, run_bench
    from .bench.impls import files_table, status_counts
    from .report import score_impl
    from .tasks import discover, get_task

    names = _op_names(ops) or list(discover())
    tasks = [get_task(n) for n in names]
    out = out or Path("results") / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    _check_writable(out)  # results are written as they come: fail before the first one
    if ray is not None:
        if gpus is not None:
            raise UserError("--gpus and --ray exclude each other: Ray places every job itself")
        if impls is not None:
            raise UserError("--impls runs on this host's GPUs (--gpus), not on Ray yet")
        _bench_on_ray(ray, tasks, dtype, suite, out, seed)
        return
    batch, files = run_bench(tasks, _variants(dtype), _suites(suite), out, gpus=gpus, seed=seed,
                             unseen=unseen, impls=impls, named=ops is not None,
                             ui=ConsoleProgress(err_console))  # fmt: skip
    devices = batch.devices
    summary = _bench_table(f"bench on {', '.join(sorted({d.name for d in devices.values()}))}")
    for job, report in zip(batch.jobs, batch.reports, strict=True):
        device = batch.device_of(report)
        scores = {
            sc.label: sc for sc in (score_impl(job.task, report, i, device) for i in report.impls)
        }
        summary.add_row(*_bench_row(job.task.name, job.variant, job.suite, scores))
    if batch.jobs:
        console.print(summary)
    per_file = ""
    if files is not None:
        assert impls is not None
        console.print(files_table(impls, files))
        timed = [f.wall_s for f in files if f.wall_s is not None]
        counts = ", ".join(f"{n} {status}" for status, n in status_counts(files).items())
        per_file = (f"; {len(files)} files ({counts})" + (f", {sum(timed) / len(timed):.1f} s "
                    "per file built or evaluated" if timed else ""))  # fmt: skip
    on = f" on {len(devices)} GPUs" if len(devices) > 1 else ""
    phases = ", ".join(f"{k} {v:.0f} s" for k, v in batch.phases.items())
    console.print(
        f"{len(batch.jobs)} evaluations{on} in {batch.eval_s:.0f} s after {batch.build_s:.0f} s "
        f"of compiling ({phases}){per_file}; results in {out}"
    )


@app.command("profile")
def profile_cmd(
    op: Annotated[str | None, typer.Argument(help="Operator name.")] = None,
    file: Annotated[
        Path | None, typer.Argument(help="The implementation (.cu) to profile.")
    ] = None,
    dtype: Annotated[
        Dtype | None, typer.Option(help="fp32 or bf16 (default fp32; with --calibrate both).")
    ] = None,
    case: Annotated[int, typer.Option(help="Paper-suite case index (default: the last).")] = -1,
    summary: Annotated[Summary, typer.Option(help="Summary to print.")] = Summary.filtered,
    calibrate: Annotated[
        bool, typer.Option("--calibrate", help="Profile every baseline; store Otsu thresholds.")
    ] = False,
    ops: Annotated[str | None, typer.Option(help="With --calibrate: only these operators.")] = None,
    out: Annotated[Path | None, typer.Option(help="Keep the ncu report and CSV here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    gpus: Annotated[
        str | None, typer.Option(help="With --calibrate: GPUs to use, 'all' or indices like 0,2.")
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="With --calibrate --out DIR: keep DIR/calibration.json's profiles taken on this "
            "GPU model and profile only the other baselines.",
        ),
    ] = False,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray", metavar="ADDRESS", help="With --calibrate: profile on the Ray cluster there."
        ),
    ] = None,
) -> None:
    """Nsight Compute profile of FILE on one case: bottleneck class and filtered summary."""
    from .bench.evaluate import Impl
    from .profile.run import profile
    from .tasks import discover, get_task

    if calibrate:
        names = _op_names(ops) or list(discover())
        if resume and (out is None or ray is not None):
            raise UserError("--resume needs --out DIR (the earlier calibration) and no --ray")
        if out is not None:
            _check_writable(out, directory=True)
        _calibrate([get_task(n) for n in names], _variants(dtype or Dtype.both), gpus, out, ray,
                   resume)  # fmt: skip
        return
    if op is None or file is None:
        raise UserError("profile needs OP and FILE (or --calibrate)")
    dtype = dtype or Dtype.fp32
    if dtype == Dtype.both:
        raise UserError("profile takes one --dtype (both only with --calibrate)")
    task = get_task(op)
    if not file.is_file():
        raise UserError(f"no such file: {file}")
    n = len(task.cases("paper"))
    if not -n <= case < n:
        raise UserError(f"--case {case}: the paper suite of {op} has cases 0 to {n - 1} (or -1, "
                        "the last)")  # fmt: skip
    if out is not None:
        _check_writable(out, directory=True)
    device = _device()
    rep = profile(task, dtype.value, Impl("candidate", file.resolve()), device.arch,
                  case_index=case, out_dir=out, device=device)  # fmt: skip
    if as_json:
        print(json.dumps(asdict(rep), indent=1, default=str))
    elif not rep.result.ok:
        console.print(f"profile missing: {rep.result.error}")
    else:
        s = rep.summaries[summary.value]
        console.print(s.text, highlight=False)
        kernels = len(rep.result.kernels)
        console.print(f"({summary} summary: {s.tokens} tokens; {kernels} kernel(s); "
                      f"{rep.result.wall_s:.1f} s; report {rep.result.report}; "
                      f"case {rep.case}: {rep.label})", markup=False, highlight=False)  # fmt: skip
    if not rep.result.ok:
        raise typer.Exit(1)


def _calibrate(
    tasks: list,
    variants: list[str],
    gpus: str | None,
    out: Path | None,
    ray: str | None = None,
    resume: bool = False,
) -> None:
    """Profile every baseline (spread over the GPUs, or over a Ray cluster's), store the Otsu
    thresholds for the GPU model here, and report the classes (per dtype) and the summaries' token
    counts under those thresholds. With ``resume``, the profiles of an earlier run cut short
    (out/calibration.json, same GPU model) are kept and only the rest are profiled."""
    from .bench.evaluate import Impl
    from .device import targets
    from .gpus import GpuPool
    from .profile import classify
    from .profile.run import calibrate_from, profile, report_from_dict
    from .profile.summary import render
    from .report import write_json

    jobs = [(t, v) for t in tasks for v in variants if t.source("baseline", v) is not None]
    reports: list = []
    placements: list[dict] = []  # with --ray: where each profile ran
    model: str | None = None  # the GPU model of the local run

    def record(name: str, variant: str, rep) -> None:
        reports.append(rep)
        status = rep.bottleneck or f"profile missing: {rep.result.error}"
        err_console.print(f"{name} {variant}: {status} ({rep.result.wall_s:.1f} s)")
        if out:  # as they come, so that a run cut short keeps what it measured
            write_json({"gpu": model, "profiles": [asdict(r) for r in reports],
                        "placements": placements}, out / "calibration.json")  # fmt: skip

    if ray is not None:
        if gpus is not None:
            raise UserError("--gpus and --ray exclude each other: Ray places every job itself")
        from .bench.remote import profile_job
        from .ray_pool import RayPool

        devices: dict = {}

        def placed(job: tuple, where, result: tuple) -> None:
            rep, device = result
            devices[device.uuid] = device
            placements.append({"task": job[0], "variant": job[1], **where.as_dict(),
                               "gpu": device.name, "uuid": device.uuid})  # fmt: skip
            record(job[0], job[1], rep)

        RayPool(ray).run([(t.name, v) for t, v in jobs], profile_job, placed)
    else:
        chosen, devices = targets(gpus)
        model = next(iter(devices.values())).name
        if resume:
            assert out is not None
            jobs = _resumed(out / "calibration.json", model, jobs, reports, report_from_dict)
        arches = {d.arch for d in devices.values()}
        from .bench.batch import build_all

        for arch in arches:  # compiled at once here, not one by one between the profiles
            build_all([Impl("baseline", t.source("baseline", v), trusted=True) for t, v in jobs],
                      arch)  # fmt: skip

        def work(job: tuple, gpu) -> object:
            task, variant = job
            device = devices[gpu.uuid]
            impl = Impl("baseline", task.source("baseline", variant), trusted=True)
            return profile(task, variant, impl, device.arch, device=device)

        if len({d.name for d in devices.values()}) == 1:
            GpuPool(chosen).run(jobs, work, lambda job, gpu, rep: record(job[0].name, job[1], rep))
    if len({d.name for d in devices.values()}) > 1:
        raise UserError("calibrate on GPUs of one model: thresholds are per device model")
    th = calibrate_from(reports)
    saved = [str(classify.save(th, d)) for d in list(devices.values())[:1]]  # one model
    classes: dict[str, dict[str, int]] = {}
    tokens: dict[str, list[int]] = {"filtered": [], "full": []}
    for r in reports:
        if not r.result.ok:
            continue
        cls = classify.classify(r.result.aggregate, th)
        per = classes.setdefault(r.variant, {})
        per[cls] = per.get(cls, 0) + 1
        for mode in tokens:
            n = render(r.result.aggregate, mode, th, r.result.kernels).tokens
            if n is not None:
                tokens[mode].append(n)
    mean = {m: sum(v) / len(v) if v else None for m, v in tokens.items()}
    walls = [r.result.wall_s for r in reports]
    gpu = model or next((d.name for d in devices.values()), None)
    data: dict[str, Any] = {
        "gpu": gpu, "thresholds": asdict(th), "saved": saved, "classes": classes,
        "mean_tokens": mean,
        "missing": [f"{r.task} {r.variant}: {r.result.error}" for r in reports
                    if not r.result.ok],
        "mean_wall_s": sum(walls) / len(walls) if walls else None,
        "placements": placements, "profiles": [asdict(r) for r in reports],
    }  # fmt: skip
    if out:
        write_json(data, out / "calibration.json")
    fewer = (
        f", {1 - mean['filtered'] / mean['full']:.0%} fewer tokens filtered"
        if mean["filtered"] and mean["full"]
        else ""
    )
    console.print(
        f"compute threshold {th.compute:.1f}% (separability {th.compute_separability:.3f}), "
        f"memory threshold {th.memory:.1f}% (separability {th.memory_separability:.3f}); "
        f"classes {classes}; mean tokens {mean}{fewer}; "
        f"{len(data['missing'])} missing; saved {', '.join(saved)}"
    )


@app.command("optimize")
def optimize_cmd(
    model: Annotated[
        str,
        typer.Option(
            help="PROVIDER:MODEL, e.g. openai:gpt-4.1, "
            "deepseek:deepseek-chat, vllm:NAME, replay:FILE|DIR, exchange:DIR."
        ),
    ],
    ops: Annotated[
        str,
        typer.Option(
            help="Comma-separated operators; OP:fp32 or OP:bf16 takes one dtype for that "
            "operator (e.g. softmax:bf16,spmv_csr:fp32)."
        ),
    ],
    dtype: Annotated[
        Dtype, typer.Option(help="The variants of operators named without one.")
    ] = Dtype.fp32,
    run: Annotated[Path | None, typer.Option(help="Run directory (default runs/<time>).")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL.")] = None,
    rounds: Annotated[int, typer.Option(min=1, help="Optimization rounds per task.")] = 3,
    candidates: Annotated[
        int, typer.Option(min=1, help="Candidates per round, each from its own plan.")
    ] = 4,
    beam: Annotated[
        int, typer.Option(min=1, help="Best correct kernels kept as the next round's parents.")
    ] = 2,
    patience: Annotated[
        int,
        typer.Option(
            min=0,
            help="Stop a task after this many rounds without a new best (0: never); its "
            "rounds go to tasks still improving.",
        ),
    ] = 2,
    merge: Annotated[
        bool, typer.Option(help="Merge kernels that lead on different sizes into a dispatcher.")
    ] = True,
    debug: Annotated[int, typer.Option(min=0, help="Debug attempts per candidate.")] = 3,
    profile: Annotated[
        Summary, typer.Option(help="Profile summary given to the planner.")
    ] = Summary.filtered,
    flags: Annotated[
        Flags,
        typer.Option(
            help="nvcc flags: 'measure' (flag variants screened on the GPU, the fastest correct "
            "kept) or 'agent' (the compiler agent chooses, as in the paper)."
        ),
    ] = Flags.measure,
    suite: Annotated[
        OneSuite, typer.Option(help="Suite the candidates are scored on.")
    ] = OneSuite.paper,
    max_cost: Annotated[
        float | None, typer.Option(min=0.0, help="Stop when the run has cost this many USD.")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="Stop after this many tokens.")
    ] = None,
    price: Annotated[
        str | None,
        typer.Option(
            help="IN,OUT: USD per million input and output tokens, for a model the "
            "price table does not know (needed with --max-cost)."
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Tasks whose LLM calls run at once.")] = 4,
    temperature: Annotated[
        float | None, typer.Option(min=0.0, help="Sampling temperature.")
    ] = None,
    reasoning_effort: Annotated[
        Effort | None, typer.Option(help="Reasoning effort (models that take one).")
    ] = None,
    max_output: Annotated[
        int,
        typer.Option(min=1, help="Output tokens per answer (reasoning models get at least 32K)."),
    ] = 16384,
    sol_target: Annotated[
        float | None,
        typer.Option(min=0.0, help="Stop a task at this fraction of the speed of light."),
    ] = None,
    gpus: Annotated[
        str | None, typer.Option(help="GPUs for the evaluations: 'all' or indices like 0,2.")
    ] = None,
) -> None:
    """Optimize operators with an LLM: each round, several plans coded from the best kernels
    so far, built, debugged, screened, the promising ones evaluated in full, the best kept.
    Without a GPU the run goes on until a step needs one (resume it on a GPU machine).

    Exit codes:
    0: no task failed (each is done, or waits for an answer, a GPU or a budget: resume it)
    1: a task failed (`cudamaster results RUN` and the task's error.log say why)
    2: bad input, said in one line (a run it stops is saved as interrupted)"""
    from .agents import runner
    from .agents.loop import LoopOptions
    from .llm.base import Options
    from .llm.prices import parse_price

    tasks = _optimize_tasks(ops, dtype)
    if run is not None and run.exists() and not run.is_dir():
        raise UserError(f"--run {run} is a file: name a new directory for the run (or resume an "
                        "earlier run with `cudamaster resume DIR`)")  # fmt: skip
    llm = Options(temperature=temperature,
                  reasoning_effort=reasoning_effort.value if reasoning_effort else None,
                  max_output_tokens=max_output)  # fmt: skip
    opts = LoopOptions(rounds=rounds, candidates=candidates, beam=beam,
                       patience=patience or None, merge=merge, debug_attempts=debug,
                       profile=profile.value,
                       flags=flags.value, sol_target=sol_target,
                       max_cost_usd=max_cost, max_tokens=max_tokens, llm=llm)  # fmt: skip
    run = run or Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    parsed = parse_price(price) if price else None
    try:
        with _task_progress(len(tasks)) as done:
            states = runner.start(run, tasks, model, base_url, suite.value,
                                  opts, concurrency, progress=done, gpus=gpus,
                                  price=parsed)  # fmt: skip
    except UserError as exc:
        raise _interrupted(run, exc) from None
    _print_states(states, run)
    if runner.failed(states):
        raise typer.Exit(1)


def _interrupted(run: Path, exc: UserError) -> UserError:
    """``exc`` as said to the user: if it stopped the run before its first step (the run is
    then saved as interrupted), with how to go on."""
    with contextlib.suppress(OSError, ValueError):
        m = json.loads((run / "run.json").read_text())
        if m.get("status") == "interrupted" and str(exc).startswith(str(m.get("reason"))):
            return UserError(f"{exc}; run {run} saved as interrupted: `cudamaster resume {run}` "
                             "continues it")  # fmt: skip
    return exc


@contextlib.contextmanager
def _task_progress(total: int):
    """A progress bar over tasks; yields the callback the runner calls as each task ends."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console) as progress:  # fmt: skip
        bar = progress.add_task("optimizing", total=total)

        def done(name: str, state) -> None:
            progress.update(bar, advance=1, description=f"{name}: {state.status}")

        try:
            yield done
        except UserError:  # no task ran: the error's one line is all there is to say
            if progress.tasks[0].completed == 0:
                progress.live.transient = True
            raise


@app.command("resume")
def resume_cmd(
    run: Annotated[Path, typer.Argument(help="The run directory.")],
    max_cost: Annotated[
        float | None, typer.Option(min=0.0, help="A new cost budget for the whole run, in USD.")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="A new token budget for the whole run.")
    ] = None,
    price: Annotated[
        str | None, typer.Option(help="IN,OUT: USD per million input and output tokens.")
    ] = None,
    gpus: Annotated[
        str | None,
        typer.Option(help="GPUs for the evaluations from now on: 'all' or indices like 0,2."),
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Tasks that run at once from now on.")
    ] = None,
) -> None:
    """Continue a run that stopped (killed, waiting for an exchange answer or a GPU, out of
    budget), optionally with new budgets, GPUs or concurrency (kept for later resumes). On a
    GPU machine it evaluates every pending candidate of every task, a task per GPU at a time
    (`--gpus all` to use every GPU of a machine the run was not started on), then goes on
    until the next answers are needed.

    Exit codes:
    0: no task failed
    1: a task failed (`cudamaster results RUN` says why)
    2: bad input (a missing or broken run directory), said in one line"""
    from .agents import runner
    from .agents.rundir import RunDir
    from .llm.prices import parse_price

    rd = RunDir.existing(run)
    if any(v is not None for v in (max_cost, max_tokens, price, gpus, concurrency)):
        runner.change_settings(rd, max_cost, max_tokens, parse_price(price) if price else None,
                               gpus, concurrency)  # fmt: skip
    try:
        with _task_progress(len(rd.read_manifest()["tasks"])) as done:
            states = runner.execute(rd, done)
    except UserError as exc:
        raise _interrupted(run, exc) from None
    _print_states(states, run)
    if runner.failed(states):
        raise typer.Exit(1)


def _print_states(states: dict, run: Path) -> None:
    for name, st in states.items():
        extra = f": {st.detail}" if st.detail else ""
        best = st.best.label if st.best else "-"
        console.print(f"{name}: {st.status}, best {best}{extra}", markup=False, highlight=False)
    if any(st.status == "needs_gpu" for st in states.values()):
        console.print(f"tasks wait for a GPU: `cudamaster resume {run}` on a GPU machine "
                      "evaluates all their candidates", markup=False)  # fmt: skip
    console.print(f"run directory: {run} (`cudamaster results {run}`)")


@app.command("results")
def results_cmd(
    runs: Annotated[list[Path], typer.Argument(help="Run directories.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Per task: best score with its noise, speedups over the baseline and the library, speed
    of light before and after, class before/after; the search (best P per round, candidates
    screened and fully evaluated, debug calls, tokens, cost) with totals; and the cumulative
    success table at tau = 0, 1, 2, 4, 8."""
    from .agents import results as res
    from .agents.rundir import RunDir

    dirs = [RunDir.existing(run) for run in runs]  # all checked before any is read
    rows = [r for run in runs for r in res.results(run)]
    if as_json:
        print(res.dump(rows))
        return
    table = Table(title="optimization results")
    for col in ("task", "status", "best", "P", "geomean", "vs library", "SOL", "SOL before",
                "class before -> after"):  # fmt: skip
        table.add_column(col)
    for r in rows:
        p = _num(r.score) + (f" ± {r.noise:.2g}" if r.noise is not None else "")
        lib = f"{_num(r.baseline_library)} -> {_num(r.library)}"
        table.add_row(r.task, r.status, r.best, p, _num(r.geomean), lib,
                      percent(r.sol), percent(r.baseline_sol),
                      f"{r.class_before or '-'} -> {r.class_after or '-'}")  # fmt: skip
    console.print(table)
    search = Table(title="the search (screened: checked and timed briefly; full: the "
                   "interleaved evaluation whose numbers are reported)")  # fmt: skip
    for col in ("task", "best P per round", "stopped by", "candidates", "screened", "full",
                "merges", "debug calls", "tokens", "USD", "GPU s"):  # fmt: skip
        search.add_column(col)
    for r in rows:
        search.add_row(r.task, " ".join(f"{x:.2f}" for x in r.trajectory) or "-",
                       r.stop_reason or r.status, str(r.candidates), str(r.screened),
                       str(r.full), str(r.merges), str(r.debug_calls), str(r.tokens),
                       f"{r.cost_usd:.2f}", f"{r.gpu_s:.0f}")  # fmt: skip
    t = res.totals(rows)
    search.add_row(f"total ({t.tasks} tasks)", "", "", str(t.candidates), str(t.screened),
                   str(t.full), "", str(t.debug_calls), str(t.tokens), f"{t.cost_usd:.2f}",
                   f"{t.gpu_s:.0f}", style="bold")  # fmt: skip
    console.print(search)
    succ = Table(title="cumulative success (a correct LLM kernel; tau > 0: P - noise > tau)")
    for col in ("tau", "solved", "rate"):
        succ.add_column(col)
    for row in res.success(rows):
        succ.add_row(str(row["tau"]), f"{row['solved']}/{row['total']}", f"{row['rate']:.0%}")
    console.print(succ)
    for r in rows:
        if r.status != "done" and r.detail:
            console.print(f"{r.task}: {r.status}: {r.detail}", markup=False, highlight=False)
    for rd in dirs:
        m = rd.read_manifest()
        if len(m.get("gpus_seen", [])) > 1:
            console.print(f"{rd.root}: measured on {', then '.join(m['gpus_seen'])} (each choice "
                          "compares numbers of one session; its best P per round spans these "
                          "GPUs)", markup=False, highlight=False)  # fmt: skip
        if m.get("reason"):
            console.print(f"{rd.root}: {m.get('status')}: {m['reason']} (`cudamaster resume "
                          f"{rd.root}` continues it)", markup=False, highlight=False)  # fmt: skip


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _bench_on_ray(
    address: str, tasks: list, dtype: Dtype, suite: Suite, out: Path | None, seed: int
) -> None:
    """cudamaster bench as Ray tasks: each job on one GPU of some node, its results written
    here as it finishes, with the node and GPU that produced them."""
    from .bench.remote import bench_job
    from .ray_pool import RayPool
    from .report import ResultsFile, score_impl

    pool = RayPool(address)
    out = out or Path("results") / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    jobs = [(t.name, v, s, seed) for t in tasks for v in _variants(dtype) for s in _suites(suite)]
    saved = ResultsFile(out)
    devices: dict[str, dict] = {}
    t0 = time.monotonic()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console) as progress:  # fmt: skip
        bar = progress.add_task(f"bench on Ray at {address}", total=len(jobs))

        def done(job: tuple, placement, result: tuple) -> None:
            _, data, device = result
            data["placement"] = {**placement.as_dict(), "gpu": device.name, "uuid": device.uuid}
            devices[f"{placement.host}/{device.name}"] = asdict(device)
            saved.add(data)
            saved.write(devices=devices, ray=address, wall_s=time.monotonic() - t0)
            progress.update(bar, advance=1, description=" ".join(map(str, job[:3])))

        finished = pool.run(jobs, bench_job, done)
    summary = _bench_table(f"bench on Ray ({', '.join(sorted(devices))})")
    by_name = {t.name: t for t in tasks}
    for (name, variant, s, _), (report, _, device) in zip(jobs, finished, strict=True):
        scores = {i.label: score_impl(by_name[name], report, i, device) for i in report.impls}
        summary.add_row(*_bench_row(name, variant, s, scores))
    console.print(summary)
    console.print(f"{len(jobs)} evaluations on Ray in {time.monotonic() - t0:.0f} s; "
                  f"results in {out}")  # fmt: skip


def _resumed(path: Path, model: str, jobs: list, reports: list, load) -> list:
    """Move the successful profiles of ``path`` taken on ``model`` into ``reports``; returns the
    jobs still to profile."""
    if not path.is_file():
        raise UserError(f"--resume: no earlier calibration at {path}")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"--resume: {path} is not JSON ({exc})") from None
    if data.get("gpu") != model:
        raise UserError(f"--resume: {path} was taken on {data.get('gpu')!r}, this GPU is {model!r}")
    wanted = {(t.name, v) for t, v in jobs}
    kept = {}
    for p in data.get("profiles", []):
        if p["result"]["ok"] and (p["task"], p["variant"]) in wanted:
            kept[(p["task"], p["variant"])] = load(p)
    reports.extend(kept.values())
    left = len(jobs) - len(kept)
    err_console.print(f"resuming {path}: {len(kept)} profiles kept, {left} to take")
    return [(t, v) for t, v in jobs if (t.name, v) not in kept]


def _bench_table(title: str) -> Table:
    """The bench summary's columns; _bench_row gives its rows."""
    table = Table(title=title)
    for col in ("operator", "dtype", "suite", "baseline", "library", "Σ base ms", "Σ lib ms",
                "lib P", "lib geomean", "SOL (best, largest case)"):  # fmt: skip
        table.add_column(col)
    return table


def _bench_row(name: str, variant: str, suite: str, scores: dict) -> list[str]:
    base, lib = scores.get("baseline"), scores.get("library")

    def total(s) -> str:
        if s is None:
            return "-"
        ts = [c.time_ms for c in s.cases]
        return f"{sum(ts):.4g}" if all(t is not None for t in ts) else "-"

    def verdict(s) -> str:
        if s is None:
            return "-"
        ok = sum(c.verdict == "ok" for c in s.cases)
        text = f"{ok}/{len(s.cases)} ok"
        return text if s.verdict == "ok" else f"[red]{text} {s.verdict}[/red]"

    largest = max(range(len(base.cases)), key=lambda i: base.cases[i].complexity) if base else 0
    sols = [
        s.cases[largest].sol_fraction for s in (base, lib) if s and s.cases[largest].sol_fraction
    ]
    return [
        name,
        variant,
        suite,
        verdict(base),
        verdict(lib),
        total(base),
        total(lib),
        f"{lib.score:.3g}" if lib and lib.score else "-",
        f"{lib.geomean:.3g}" if lib and lib.geomean else "-",
        percent(max(sols)) if sols else "-",
    ]


def _click_error(name: str) -> type[Exception]:
    """click's exception ``name``, from whichever click typer uses (newer typers vendor one)."""
    usage = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
    found = getattr(sys.modules[usage.__module__], name, None)
    return found if isinstance(found, type) else type(f"_No{name}", (Exception,), {})


_USAGE_ERROR = _click_error("UsageError")
_CLICK_ERROR = _click_error("ClickException")
_NO_ARGS = _click_error("NoArgsIsHelpError")


def _error(message: str) -> None:
    err_console.print(f"[bold red]error:[/bold red] {escape(' '.join(message.split()))}",
                      highlight=False, soft_wrap=True)  # fmt: skip


# -- compare and report (issue 26): bench JSON, --impls JSON and run directories -----------
RESULTS_HELP = "bench JSON (also from bench --impls) or an optimizer run directory."


@app.command("compare")
def compare_cmd(
    a: Annotated[Path, typer.Argument(help=f"A: {RESULTS_HELP}")],
    b: Annotated[Path, typer.Argument(help=f"B: {RESULTS_HELP}")],
    measure: Annotated[
        bool,
        typer.Option(
            "--measure",
            help="A and B are optimizer runs: time both runs' best kernels again on "
            "this GPU, in one session per task, instead of comparing the runs' own numbers.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Two runs side by side: per task, B's P over A's, beyond the noise of both or within
    it; tasks in one input only; the geometric mean of B/A and how many are better or worse."""
    from .compare import compare, table, totals_line
    from .resultset import load

    measured: list[Remeasured] = []
    if measure:
        result, measured = _measured(a, b)
    else:
        result = compare(load(a), load(b))
    if as_json:
        data = asdict(result)
        if measure:
            data["measured"] = [asdict(m) for m in measured]
        print(json.dumps(data, indent=1))
        return
    console.print(table(result))
    console.print(totals_line(result.totals), markup=False, highlight=False)
    if measure:
        console.print(f"measured now on {result.a_device}, one session per task: each B/A "
                      "compares two kernels timed side by side", markup=False)  # fmt: skip
    elif result.other_gpus:
        console.print(f"note: A ran on {result.a_device}, B on {result.b_device}: the ratios "
                      "compare the GPUs as much as the kernels", markup=False)  # fmt: skip


def _measured(a: Path, b: Path) -> tuple[Comparison, list[Remeasured]]:
    """compare --measure: both runs' bests evaluated on this machine's GPU, a task at a time;
    the runs are read and checked before the GPU is looked for."""
    from .agents.gpu import GpuBackend
    from .agents.remeasure import remeasure
    from .device import targets
    from .gpus import GpuPool
    from .tasks import Task

    for path in (a, b):
        if path.is_file():
            raise UserError(f"{path} is a file: compare --measure times optimizer runs' kernels, "
                            "so give two run directories")  # fmt: skip

    @functools.cache
    def gpus() -> tuple[GpuPool, dict]:
        chosen, devices = targets(None)
        return GpuPool(chosen), devices

    with tempfile.TemporaryDirectory(prefix="cudamaster-measure-") as tmp:

        def backend(task: Task, variant: str, suite: str) -> GpuBackend:
            pool, devices = gpus()
            code = Path(tmp) / f"{task.name}-{variant}"
            return GpuBackend(task, variant, suite, pool, devices, code)

        def said(m: Remeasured) -> None:
            err_console.print(m.line(), markup=False, highlight=False)

        return remeasure(a, b, backend, said)


@app.command("report")
def report_cmd(
    inputs: Annotated[list[Path], typer.Argument(help=f"Inputs: {RESULTS_HELP}")],
    out: Annotated[Path, typer.Option("-o", "--out", help="The HTML file.")] = Path("report.html"),
) -> None:
    """One self-contained HTML page: the cumulative success curve over tau, P per task beside
    the library's, the speed-of-light fractions, an optimizer run's best P per round, tables."""
    from .htmlreport import require_plotly, write_report
    from .resultset import load

    require_plotly()
    _check_writable(out, "-o")
    sets = [load(p) for p in inputs]
    write_report(sets, out)
    console.print(f"report of {len(sets)} input(s) written to {out}", markup=False)


@app.command("mcp")
def mcp_cmd() -> None:
    """Serve the evaluator to coding agents over MCP (stdio): list_operators, operator_spec,
    evaluate, profile. Claude Code: `claude mcp add cudamaster -- cudamaster mcp`."""
    from .extras import require_mcp

    require_mcp()
    from .mcp_server import serve

    serve()


def main() -> None:
    """Entry point: a UserError, and a bad option or argument, is one line on stderr and exit
    code 2, never a traceback."""
    __import__("cudamaster.bench.sandbox", fromlist=["*"]).make_undumpable()  # docs/sandbox.md
    try:
        code = app(standalone_mode=False)  # click's errors come here, to be said in one line
    except UserError as exc:
        _error(str(exc))
        sys.exit(2)
    except _NO_ARGS as exc:  # the help (a rich help is printed already, as it is made)
        if text := getattr(exc, "format_message", str)().strip():
            print(text, file=sys.stderr)
        sys.exit(getattr(exc, "exit_code", 2))
    except _USAGE_ERROR as exc:  # a bad option or argument: click's message, on one line
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "cudamaster"
        text = getattr(exc, "format_message", str)().replace("Value error, ", "")  # pydantic's
        _error(f"{text} (see `{where} --help`)")
        sys.exit(getattr(exc, "exit_code", 2))
    except _CLICK_ERROR as exc:
        _error(getattr(exc, "format_message", str)())
        sys.exit(getattr(exc, "exit_code", 1))
    except typer.Abort:
        _error("aborted")
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
