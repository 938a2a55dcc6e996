"""CUDAMaster from Python (a notebook, a script): evaluate a kernel, bench operators or a folder
of implementations, and read results back, as typed objects.

    from cudamaster import api

    r = api.evaluate("vector_add", "my_kernel.cu")          # or the source text itself
    print(r.verdict, r.score, r.noise, r.library_score, r.sol)
    for c in r.cases:
        print(c.label, c.time_ms, c.vs_baseline, c.vs_baseline_u)
    runs = api.bench(ops=["softmax"], dtype="fp32", impls="optimized/fp32")
    again = api.load_results(runs.path)                      # or an optimizer run directory

The same code as the command line runs underneath (`cudamaster eval`, `bench`, `bench
--impls`, `results`), and a problem the user can fix raises ``cudamaster.errors.UserError``:
an unknown operator, a missing file, no GPU (once what can be checked without one was).
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .bench.batch import LogProgress, run_bench
from .bench.evaluate import Evaluator, Impl, ImplResult, prepare, standard_impls
from .bench.impls import ImplFile, ImplSummary, auto_entry, summary_from_dict
from .device import build_arch
from .errors import UserError
from .report import report_json
from .tasks import Task, discover, get_task

log = logging.getLogger(__name__)

__all__ = [
    "BenchResults",
    "EvalResult",
    "ImplFile",
    "ImplSummary",
    "RunResults",
    "as_dict",
    "bench",
    "evaluate",
    "load_results",
]

DTYPES = ("fp32", "bf16")
SUITES = ("paper", "large")


@dataclass
class EvalResult(ImplSummary):
    """One evaluation (operator, dtype, suite) as seen from one implementation: the candidate's
    verdict, P against the baseline and the library with their noise, the geometric mean, the
    speed of light on the heaviest case and every case's numbers (``cases``: time_ms, hot_ms,
    spread, vs_baseline(_u), vs_library(_u), sol_fraction, verdict); ``baseline`` and ``library``
    are summed up alike, ``data`` is the JSON report whole (report, scores, device_facts). The
    implementation seen is the candidate, or in a bench without one the library (else the
    baseline)."""

    task: str = ""
    variant: str = ""
    suite: str = ""
    entry: str = ""  # the extern "C" function called
    baseline: ImplSummary | None = None
    library: ImplSummary | None = None
    device: str | None = None  # the GPU's name
    unseen_seed: int | None = None  # replays the unseen cases (--unseen-seed)
    wall_s: float = 0.0
    file: str | None = None  # bench --impls: the file, relative to the folder
    data: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def correct(self) -> bool:
        return self.verdict == "ok"


@dataclass
class BenchResults:
    """A bench's results (or one eval's, from its --out JSON): every evaluation and, with a
    folder of implementations, every file of it with its status and wall time."""

    path: Path | None  # the JSON file
    results: list[EvalResult]
    files: list[ImplFile] = field(default_factory=list)
    device: str | None = None
    wall_s: float | None = None
    build_s: float | None = None
    impls_dir: str | None = None

    def by_file(self) -> dict[str, list[EvalResult]]:
        """The evaluations of each file (bench --impls), by its path."""
        out: dict[str, list[EvalResult]] = {}
        for r in self.results:
            if r.file is not None:
                out.setdefault(r.file, []).append(r)
        return out


@dataclass
class RunResults:
    """An optimizer run directory, as `cudamaster results` reads it (agents/results.py)."""

    path: Path
    tasks: list[Any]  # agents.results.TaskResult, one per task
    totals: Any  # agents.results.Totals
    success: list[dict[str, Any]]  # the cumulative success table


def result_from_json(data: dict[str, Any], label: str | None = None) -> EvalResult:
    """An EvalResult from one report_json dict (a bench result, or eval's --out/--json), seen
    from ``label`` (default: the candidate, else the library, else the baseline)."""
    report = data["report"]
    scores = {s["label"]: summary_from_dict(s) for s in data["scores"]}
    if label is None:
        others = [k for k in scores if k not in ("baseline", "library")]
        label = others[0] if others else ("library" if "library" in scores else "baseline")
    if label not in scores:
        raise UserError(
            f"no implementation {label!r} in the results of {report['task']} (has: "
            f"{', '.join(scores)})"
        )
    seen = scores[label]
    entry = next((i.get("entry", "") for i in report["impls"] if i["label"] == label), "")
    facts = data.get("device_facts") or {}
    return EvalResult(
        **{k: getattr(seen, k) for k in ImplSummary.__dataclass_fields__},
        task=report["task"],
        variant=report["variant"],
        suite=report["suite"],
        entry=entry,
        baseline=scores.get("baseline"),
        library=scores.get("library"),
        device=facts.get("name") or (report.get("gpu") or {}).get("name"),
        unseen_seed=report.get("unseen_seed"),
        wall_s=report.get("wall_s", 0.0),
        file=data.get("file"),
        data=data,
    )


@contextlib.contextmanager
def _source_file(source: str | Path, op: str) -> Iterator[Path]:
    """``source`` as a file: a Path, or a str naming one, is that file; a str of several lines is
    CUDA source, written to ``<op>.cu`` in a temporary folder removed afterwards (builds are
    cached by content, so the same text is not compiled twice)."""
    if isinstance(source, str) and "\n" in source:
        with tempfile.TemporaryDirectory(prefix="cudamaster-api-") as folder:
            path = Path(folder) / f"{op}.cu"
            path.write_text(source)
            yield path
        return
    path = Path(source)
    if not path.is_file():
        raise UserError(f"no such file: {path} (pass a .cu file's path, or the source text)")
    yield path.resolve()


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise UserError(f"{name}={value!r}: one of {', '.join(allowed)}")
    return value


def evaluate(
    op: str,
    source: str | Path,
    dtype: str = "fp32",
    suite: str = "paper",
    entry: str | None = None,
    *,
    flags: tuple[str, ...] = (),
    cases: list[int] | None = None,
    seed: int = 0,
    unseen: int | None = None,
    unseen_seed: int | None = None,
) -> EvalResult:
    """Verify ``source`` (a .cu file, or its text) against the oracle and time it against the
    baseline and the library, as `cudamaster eval` does. ``entry`` names the extern "C" function
    to call (default: the operator's, or ``<symbol>_optimized`` where only that is defined, as
    bench --impls does). A file refused before running (compile_error, missing_symbol,
    forbidden) comes back with that verdict and no case; otherwise, without a GPU, a UserError
    says what was checked and what is left."""
    task = get_task(op)
    variant = _choice("dtype", dtype, DTYPES)
    _choice("suite", suite, SUITES)
    task.cases(suite)  # a suite the task lacks: its UserError
    with _source_file(source, op) as file:
        return _evaluate_file(
            task, variant, suite, file, entry, tuple(flags), cases, seed, unseen, unseen_seed
        )


def _evaluate_file(
    task: Task,
    variant: str,
    suite: str,
    file: Path,
    entry: str | None,
    flags: tuple[str, ...],
    cases: list[int] | None,
    seed: int,
    unseen: int | None,
    unseen_seed: int | None,
) -> EvalResult:
    from .device import facts

    arch = build_arch()
    symbol = task.symbol(variant)
    cand = auto_entry(Impl("candidate", file, extra_flags=flags, entry=entry), symbol, arch)
    pre = ImplResult("candidate", str(file))
    prepare(cand, arch, symbol, pre)
    if pre.verdict != "pending":
        return _refused(task, variant, suite, pre)
    try:
        device = facts()
    except UserError as exc:
        raise UserError(
            f"{exc}: {file.name} was built and checked, not run; correctness and "
            "timing need a GPU: run the same call on a machine with one"
        ) from None
    ev = Evaluator(
        task,
        variant,
        suite,
        device.arch,
        cases=cases,
        base_seed=seed,
        progress=log.info,
        unseen=unseen,
        unseen_seed=unseen_seed,
    )
    report = ev.run([*standard_impls(task, variant), cand])
    return result_from_json(report_json(task, report, device), "candidate")


def _refused(task: Task, variant: str, suite: str, pre: ImplResult) -> EvalResult:
    """The result of a candidate refused before anything ran: its verdict, no case, no score."""
    return EvalResult(
        verdict=pre.verdict,
        detail=pre.detail,
        score=None,
        noise=None,
        library_score=None,
        library_noise=None,
        geomean=None,
        sol=None,
        label=pre.label,
        cases=[],
        task=task.name,
        variant=variant,
        suite=suite,
        entry=pre.entry,
    )


def bench(
    ops: list[str] | str | None = None,
    dtype: str = "both",
    suite: str = "both",
    impls: str | Path | None = None,
    out: str | Path | None = None,
    *,
    gpus: str | None = None,
    seed: int = 0,
    unseen: int | None = None,
) -> BenchResults:
    """`cudamaster bench`: the baseline against the library over ``ops`` (default: all), or with
    ``impls`` (a folder of <op>.cu / <op>_bf16.cu files) each file beside them, its status and
    wall time in ``files``. Results are written to ``out`` as they come (default
    results/bench-<time>.json) and returned; ``dtype`` and ``suite`` take one value or "both"."""
    names = [o.strip() for o in ops.split(",")] if isinstance(ops, str) else ops
    if names is not None and not [n for n in names if n]:
        raise UserError("ops names no operator: give names like ['vector_add', 'softmax']")
    tasks = [get_task(n) for n in names if n] if names is not None else list(discover().values())
    variants = list(DTYPES) if dtype == "both" else [_choice("dtype", dtype, DTYPES)]
    suites = list(SUITES) if suite == "both" else [_choice("suite", suite, SUITES)]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(out) if out is not None else Path("results") / f"bench-{stamp}.json"
    batch, files = run_bench(
        tasks,
        variants,
        suites,
        path,
        gpus=gpus,
        seed=seed,
        unseen=unseen,
        impls=Path(impls) if impls is not None else None,
        named=names is not None,
        ui=LogProgress(),
    )
    results = []
    for job, report in zip(batch.jobs, batch.reports, strict=True):
        device = batch.device_of(report)
        data = report_json(job.task, report, device)
        if job.file is not None:
            data["file"] = job.file
        results.append(result_from_json(data))
    first = next(iter(batch.devices.values()))
    return BenchResults(
        path=path,
        results=results,
        files=files or [],
        device=first.name,
        wall_s=batch.build_s + batch.eval_s,
        build_s=batch.build_s,
        impls_dir=str(impls) if impls is not None else None,
    )


def load_results(path: str | Path) -> BenchResults | RunResults:
    """Read results back: a bench's JSON (with or without --impls), an eval's --out JSON, or an
    optimizer run directory."""
    path = Path(path)
    if path.is_dir():
        from .agents import results as runs

        rows = runs.results(path)  # a directory without run.json: its UserError
        return RunResults(path, rows, runs.totals(rows), runs.success(rows))
    if not path.is_file():
        raise UserError(f"no such file or run directory: {path}")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path} is not JSON ({exc})") from None
    if isinstance(data, dict) and "report" in data and "scores" in data:  # one eval's
        return BenchResults(
            path=path,
            results=[result_from_json(data)],
            device=(data.get("device_facts") or {}).get("name"),
            wall_s=data["report"].get("wall_s"),
        )
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise UserError(
            f"{path} holds no cudamaster results (neither a bench's nor an eval's JSON)"
        )
    return BenchResults(
        path=path,
        results=[result_from_json(r) for r in data["results"]],
        files=[ImplFile.from_dict(f) for f in data.get("impls", [])],
        device=(data.get("device") or {}).get("name"),
        wall_s=data.get("wall_s"),
        build_s=data.get("build_s"),
        impls_dir=data.get("impls_dir"),
    )


def as_dict(result: EvalResult | BenchResults | RunResults) -> dict[str, Any]:
    """A result as plain JSON data (for pandas, a file), without each evaluation's full report."""
    data = asdict(result)
    data.pop("data", None)
    for r in data.get("results", []):
        r.pop("data", None)
    plain: dict[str, Any] = json.loads(json.dumps(data, default=str))
    return plain
