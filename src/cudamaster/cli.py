"""The cudamaster command line."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import threading
import time
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import cpus
from .errors import UserError

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
    "--unseen-seed", help="Replay the unseen cases of an earlier run (its report records the seed)."
)
err_console = Console(stderr=True)


class Dtype(StrEnum):
    fp32 = "fp32"
    bf16 = "bf16"
    both = "both"


class Suite(StrEnum):
    paper = "paper"
    large = "large"
    both = "both"


def _variants(d: Dtype) -> list[str]:
    return ["fp32", "bf16"] if d == Dtype.both else [d.value]


def _suites(s: Suite) -> list[str]:
    return ["paper", "large"] if s == Suite.both else [s.value]


def _arch() -> str:
    """Target for nvcc: $CUDAMASTER_ARCH, else the GPU's, else sm_90 (compile-only machines)."""
    from .device import detect_arch

    if os.environ.get("CUDAMASTER_ARCH"):
        return os.environ["CUDAMASTER_ARCH"]
    try:
        return detect_arch()
    except UserError:
        return "sm_90"


@app.callback()
def _main(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress.")] = False):
    """CUDAMaster: MSKernelBench's honest evaluator and an LLM kernel optimizer."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=err_console, show_path=False)],
    )


@app.command("tasks")
def tasks_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the README's library-baseline table.")
    ] = False,
) -> None:
    """List the operators: category, dtypes, library baseline, cases per suite."""
    from .tasks import discover

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
    table = Table(title=f"MSKernelBench: {len(rows)} operators")
    for col in ("operator", "category", "dtypes", "library baseline", "paper", "large"):
        table.add_column(col)
    for r in rows:
        short = re.split(r" \(|;|,", r["library"])[0] if r["library"] else ""
        lib = f"{short} ({', '.join(r['library_dtypes'])})" if short else "-"
        table.add_row(
            r["name"],
            r["category"],
            ", ".join(r["dtypes"]),
            lib,
            str(r["paper_cases"]),
            str(r["large_cases"]),
        )
    console.print(table)


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
    dtype: Annotated[Dtype, typer.Option(help="fp32 or bf16.")] = Dtype.fp32,
    suite: Annotated[Suite, typer.Option(help="paper or large.")] = Suite.paper,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full JSON report.")] = False,
    cases: Annotated[str | None, typer.Option(help="Only these case indices, e.g. 0,3.")] = None,
    seed: Annotated[int, typer.Option(help="Base seed of the input sets.")] = 0,
    flags: Annotated[str, typer.Option(help="Extra nvcc flags for the candidate.")] = "",
    out: Annotated[Path | None, typer.Option(help="Also write the JSON report here.")] = None,
    unseen: Annotated[int | None, UNSEEN_OPTION] = None,
    unseen_seed: Annotated[int | None, UNSEEN_SEED_OPTION] = None,
) -> None:
    """Verify FILE against the oracle and time it against the baseline and the library."""
    from .bench.evaluate import Evaluator, Impl, ImplResult, prepare, standard_impls
    from .report import case_table, report_json, score_impl, unseen_line, write_json
    from .tasks import get_task

    if dtype == Dtype.both or suite == Suite.both:
        raise UserError("eval takes one --dtype and one --suite")
    task = get_task(op)
    if not file.is_file():
        raise UserError(f"no such file: {file}")
    variant = dtype.value
    arch = _arch()
    cand = Impl("candidate", file.resolve(), extra_flags=tuple(flags.split()))
    pre = ImplResult("candidate", str(file))
    prepare(cand, arch, task.symbol(variant), pre)
    if pre.verdict != "pending":
        raise UserError(pre.detail)
    device = _device()
    picked = [int(x) for x in cases.split(",")] if cases else None
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
    if out:
        write_json(data, out)
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
    cand_result = report.impl("candidate")
    if cand_result is None or not cand_result.correct:
        raise typer.Exit(1)


@app.command("aa")
def aa_cmd(
    op: Annotated[str, typer.Argument(help="Operator name (see `cudamaster tasks`).")],
    file: Annotated[
        Path | None, typer.Argument(help="An implementation (.cu); default: the baseline.")
    ] = None,
    dtype: Annotated[Dtype, typer.Option(help="fp32 or bf16.")] = Dtype.fp32,
    suite: Annotated[Suite, typer.Option(help="paper or large.")] = Suite.paper,
    cases: Annotated[str | None, typer.Option(help="Only these case indices, e.g. 0,3.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """An implementation (the baseline by default) timed against itself: per case, the ratio of
    the two medians and its uncertainty. Every ratio should be 1 within it; what is not says
    what a speedup is worth on this machine."""
    from .bench.aa import LONG_CALL_MS, run_aa
    from .tasks import get_task

    if dtype == Dtype.both or suite == Suite.both:
        raise UserError("aa takes one --dtype and one --suite")
    task = get_task(op)
    if file is not None and not file.is_file():
        raise UserError(f"no such file: {file}")
    picked = [int(x) for x in cases.split(",")] if cases else None
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
    seed: Annotated[int, typer.Option(help="Base seed of the input sets.")] = 0,
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
) -> None:
    """Baseline vs library over many operators; results saved as JSON as they come."""
    from .bench.client import WorkerPool
    from .bench.evaluate import EvalReport, Evaluator, standard_impls
    from .bench.prepare import Preparer
    from .device import DeviceFacts
    from .device import targets as device_targets
    from .gpus import GpuLost, GpuPool
    from .report import ResultsFile, report_json, score_impl
    from .tasks import Task, discover, get_task

    names = [o.strip() for o in ops.split(",")] if ops else list(discover())
    tasks = [get_task(n) for n in names]
    if ray is not None:
        if gpus is not None:
            raise UserError("--gpus and --ray exclude each other: Ray places every job itself")
        _bench_on_ray(ray, tasks, dtype, suite, out, seed)
        return
    targets, devices = device_targets(gpus)
    first = next(iter(devices.values()))
    out = out or Path("results") / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    results: list[dict] = []
    saved = ResultsFile(out)
    jobs = [(t, v, s) for t in tasks for v in _variants(dtype) for s in _suites(suite)]
    t_build = time.monotonic()
    variants = _variants(dtype)
    _prebuild([i for t in tasks for v in variants for i in standard_impls(t, v)], first.arch)
    build_s = time.monotonic() - t_build
    t0 = time.monotonic()
    pool = WorkerPool()  # baseline and library workers live across the whole bench, per GPU
    preparers: dict[str, Preparer] = {}  # per GPU: inputs and oracles made cases ahead
    # on one GPU the jobs run in order, so the next jobs' first cases are prepared during the last
    following = {id(j): jobs[k + 1 :] for k, j in enumerate(jobs)} if len(targets) == 1 else {}
    with (
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
        ) as progress,
        contextlib.closing(pool),
    ):
        bar = progress.add_task("bench", total=len(jobs))
        facts = {u: asdict(d) for u, d in devices.items()}
        # per GPU, the evaluation before, whose last case is judged while the next one runs
        settling: dict[str, tuple[Evaluator, Task, EvalReport, DeviceFacts]] = {}
        saving = threading.Lock()
        helper_cpus: dict[str, int] = {}  # per GPU: the CPUs its preparation helper may use

        def publish(uuid: str) -> None:
            """The GPU's evaluation before, settled, into the results file."""
            ev, task, report, device = settling.pop(uuid)
            ev.settle()
            with saving:
                results.append(report_json(task, report, device))
                saved.add(results[-1])
                saved.write(device=asdict(first), devices=facts, helper_cpus=helper_cpus,
                            build_s=build_s, wall_s=time.monotonic() - t_build)  # fmt: skip

        def evaluate(job: tuple, gpu) -> EvalReport:
            task, variant, s = job
            device = devices[gpu.uuid]
            progress.update(bar, description=f"{task.name} {variant} {s}")
            if gpu.uuid not in preparers:
                split = cpus.split()  # this GPU's workers' cores stay free of preparation
                preparers[gpu.uuid] = Preparer(cores=split.helpers if split else None)
                helper_cpus[gpu.uuid] = len(split.helpers) if split else len(cpus.available())
            ev = Evaluator(task, variant, s, device.arch, base_seed=seed, pool=pool,
                           preparer=preparers[gpu.uuid], then=following.get(id(job), ()),
                           progress=lambda m: progress.update(bar, description=m),
                           unseen=unseen)  # fmt: skip
            before = settling.get(gpu.uuid)
            try:
                report = ev.run(standard_impls(task, variant),
                                previous=before[0].settle if before else None,
                                defer=True)  # fmt: skip
            except UserError as exc:  # this GPU's workers cannot start: the job goes elsewhere
                if gpu.pinned and "no usable CUDA GPU" in str(exc):
                    raise GpuLost(str(exc)) from None
                raise
            if before is not None:
                publish(gpu.uuid)
            settling[gpu.uuid] = (ev, task, report, device)
            return report

        try:
            finished = GpuPool(targets).run(jobs, evaluate, lambda *_: progress.advance(bar))
            for uuid in list(settling):
                publish(uuid)
        finally:
            for uuid in list(settling):  # an error cut the bench short: keep what can be kept
                try:
                    publish(uuid)
                except Exception as exc:
                    err_console.print(f"an evaluation cut short could not be saved: {exc}")
            for prep in preparers.values():
                prep.close()
    summary = _bench_table(f"bench on {', '.join(sorted({d.name for d in devices.values()}))}")
    for (task, variant, s), report in zip(jobs, finished, strict=True):
        device = devices[report.gpu["uuid"]] if report.gpu else first
        scores = {
            sc.label: sc for sc in (score_impl(task, report, i, device) for i in report.impls)
        }
        summary.add_row(*_bench_row(task.name, variant, s, scores))
    console.print(summary)
    phases: dict[str, float] = {}
    for r in results:
        for case in r["report"]["phases"]:
            for k, v in case.items():
                if k != "case":
                    phases[k] = phases.get(k, 0.0) + v
    on = f" on {len(targets)} GPUs" if len(targets) > 1 else ""
    console.print(
        f"{len(jobs)} evaluations{on} in {time.monotonic() - t0:.0f} s after {build_s:.0f} s of "
        f"compiling ({', '.join(f'{k} {v:.0f} s' for k, v in phases.items())}); results in {out}"
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
    summary: Annotated[
        str, typer.Option(help="Summary to print: filtered, full or none.")
    ] = "filtered",
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
        names = [o.strip() for o in ops.split(",")] if ops else list(discover())
        if resume and (out is None or ray is not None):
            raise UserError("--resume needs --out DIR (the earlier calibration) and no --ray")
        _calibrate([get_task(n) for n in names], _variants(dtype or Dtype.both), gpus, out, ray,
                   resume)  # fmt: skip
        return
    if op is None or file is None:
        raise UserError("profile needs OP and FILE (or --calibrate)")
    dtype = dtype or Dtype.fp32
    if dtype == Dtype.both:
        raise UserError("profile takes one --dtype")
    if summary not in ("filtered", "full", "none"):
        raise UserError("--summary must be filtered, full or none")
    task = get_task(op)
    if not file.is_file():
        raise UserError(f"no such file: {file}")
    device = _device()
    rep = profile(task, dtype.value, Impl("candidate", file.resolve()), device.arch,
                  case_index=case, out_dir=out, device_uuid=device.uuid)  # fmt: skip
    if as_json:
        print(json.dumps(asdict(rep), indent=1, default=str))
    elif not rep.result.ok:
        console.print(f"profile missing: {rep.result.error}")
    else:
        s = rep.summaries[summary]
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
    thresholds per device here, and report the classes (per dtype) and the summaries' token
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
        for arch in arches:  # compiled at once here, not one by one between the profiles
            _prebuild([Impl("baseline", t.source("baseline", v), trusted=True) for t, v in jobs],
                      arch)  # fmt: skip

        def work(job: tuple, gpu) -> object:
            task, variant = job
            device = devices[gpu.uuid]
            impl = Impl("baseline", task.source("baseline", variant), trusted=True)
            return profile(task, variant, impl, device.arch, device_uuid=device.uuid)

        if len({d.name for d in devices.values()}) == 1:
            GpuPool(chosen).run(jobs, work, lambda job, gpu, rep: record(job[0].name, job[1], rep))
    if len({d.name for d in devices.values()}) > 1:
        raise UserError("calibrate on GPUs of one model: thresholds are per device model")
    th = calibrate_from(reports)
    saved = [str(classify.save(th, d.uuid)) for d in devices.values()]
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
            "deepseek:deepseek-chat, vllm:NAME, replay:FILE, exchange:DIR."
        ),
    ],
    ops: Annotated[str, typer.Option(help="Comma-separated operators.")],
    dtype: Annotated[Dtype, typer.Option(help="fp32, bf16 or both.")] = Dtype.fp32,
    run: Annotated[Path | None, typer.Option(help="Run directory (default runs/<time>).")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL.")] = None,
    rounds: Annotated[int, typer.Option(help="Optimization rounds.")] = 3,
    debug: Annotated[int, typer.Option(help="Debug attempts per round.")] = 3,
    profile: Annotated[
        str, typer.Option(help="Profile given to the planner: filtered, full, none.")
    ] = "filtered",
    flags: Annotated[
        str,
        typer.Option(
            help="nvcc flags: 'measure' (flag variants screened on the GPU, the fastest correct "
            "kept) or 'agent' (the compiler agent chooses, as in the paper)."
        ),
    ] = "measure",
    suite: Annotated[Suite, typer.Option(help="Suite the candidates are scored on.")] = Suite.paper,
    max_cost: Annotated[
        float | None, typer.Option(help="Stop when the run has cost this many USD.")
    ] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Stop after this many tokens.")] = None,
    price: Annotated[
        str | None,
        typer.Option(
            help="IN,OUT: USD per million input and output tokens, for a model the "
            "price table does not know (needed with --max-cost)."
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Tasks whose LLM calls run at once.")] = 4,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature.")] = None,
    reasoning_effort: Annotated[str | None, typer.Option(help="low, medium or high.")] = None,
    max_output: Annotated[
        int, typer.Option(help="Output tokens per answer (reasoning models get at least 32K).")
    ] = 16384,
    sol_target: Annotated[
        float | None, typer.Option(help="Stop a task at this fraction of the speed of light.")
    ] = None,
    gpus: Annotated[
        str | None, typer.Option(help="GPUs for the evaluations: 'all' or indices like 0,2.")
    ] = None,
) -> None:
    """Optimize operators with an LLM: R rounds of plan, code, build, debug, evaluate, profile."""
    from .agents import runner
    from .agents.loop import FlagMode, LoopOptions
    from .llm.base import Options
    from .llm.prices import parse_price

    if profile not in ("filtered", "full", "none"):
        raise UserError("--profile must be filtered, full or none")
    if flags not in ("measure", "agent"):
        raise UserError("--flags must be measure or agent")
    if reasoning_effort not in (None, "low", "medium", "high"):
        raise UserError("--reasoning-effort must be low, medium or high")
    if suite == Suite.both:
        raise UserError("optimize scores on one --suite")
    llm = Options(temperature=temperature, reasoning_effort=reasoning_effort,
                  max_output_tokens=max_output)  # fmt: skip
    opts = LoopOptions(rounds=rounds, debug_attempts=debug, profile=profile,
                       flags=cast(FlagMode, flags), sol_target=sol_target,
                       max_cost_usd=max_cost, max_tokens=max_tokens, llm=llm)  # fmt: skip
    run = run or Path("runs") / time.strftime("%Y%m%d-%H%M%S")
    names = [o.strip() for o in ops.split(",") if o.strip()]
    with _task_progress(len(names) * len(_variants(dtype))) as done:
        states = runner.start(run, names, _variants(dtype), model, base_url, suite.value, opts,
                              concurrency, progress=done, gpus=gpus,
                              price=parse_price(price) if price else None)  # fmt: skip
    _print_states(states, run)


@contextlib.contextmanager
def _task_progress(total: int):
    """A progress bar over tasks; yields the callback the runner calls as each task ends."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console) as progress:  # fmt: skip
        bar = progress.add_task("optimizing", total=total)

        def done(name: str, state) -> None:
            progress.update(bar, advance=1, description=f"{name}: {state.status}")

        yield done


@app.command("resume")
def resume_cmd(
    run: Annotated[Path, typer.Argument(help="The run directory.")],
    max_cost: Annotated[
        float | None, typer.Option(help="A new cost budget for the whole run, in USD.")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(help="A new token budget for the whole run.")
    ] = None,
    price: Annotated[
        str | None, typer.Option(help="IN,OUT: USD per million input and output tokens.")
    ] = None,
) -> None:
    """Continue a run that stopped (killed, waiting for an exchange answer, out of budget),
    optionally with new budgets."""
    from .agents import runner
    from .agents.rundir import RunDir
    from .llm.prices import parse_price

    rd = RunDir(run)
    if not rd.manifest.exists():
        raise UserError(f"{run} is not a run directory (no run.json)")
    if max_cost is not None or max_tokens is not None or price is not None:
        runner.change_budgets(rd, max_cost, max_tokens, parse_price(price) if price else None)
    with _task_progress(len(rd.read_manifest()["tasks"])) as done:
        states = runner.execute(rd, done)
    _print_states(states, run)


def _print_states(states: dict, run: Path) -> None:
    for name, st in states.items():
        extra = f": {st.detail}" if st.detail else ""
        best = st.best.label if st.best else "-"
        console.print(f"{name}: {st.status}, best {best}{extra}")
    console.print(f"run directory: {run} (`cudamaster results {run}`)")


@app.command("results")
def results_cmd(
    runs: Annotated[list[Path], typer.Argument(help="Run directories.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Per task: best score with its noise, speedups, speed of light, tokens, cost, class
    before/after; and the cumulative success table at tau = 0, 1, 2, 4, 8."""
    from .agents import runner

    rows = [r for run in runs for r in runner.results(run)]
    if as_json:
        print(runner.dump(rows))
        return
    table = Table(title="optimization results")
    for col in ("task", "status", "best", "P", "geomean", "SOL", "SOL before", "tokens", "USD",
                "class before -> after"):  # fmt: skip
        table.add_column(col)
    for r in rows:
        p = _num(r.score) + (f" ± {r.noise:.2g}" if r.noise is not None else "")
        table.add_row(r.task, r.status, r.best, p, _num(r.geomean),
                      _pct(r.sol), _pct(r.baseline_sol), str(r.tokens), f"{r.cost_usd:.2f}",
                      f"{r.class_before or '-'} -> {r.class_after or '-'}")  # fmt: skip
    console.print(table)
    succ = Table(title="cumulative success (a correct LLM kernel; tau > 0: P - noise > tau)")
    for col in ("tau", "solved", "rate"):
        succ.add_column(col)
    for row in runner.success(rows):
        succ.add_row(str(row["tau"]), f"{row['solved']}/{row['total']}", f"{row['rate']:.0%}")
    console.print(succ)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


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


def _prebuild(impls: list, arch: str) -> None:
    """Compile the implementations at once, on every core, into the build cache (and read
    what each exports, which every evaluation checks first)."""
    from concurrent.futures import ThreadPoolExecutor

    from .bench.build import BuildError, build
    from .bench.symbols import exported_symbols

    impls.sort(key=lambda i: i.label != "library")  # the slow (CUB, vendor headers) ones first

    def one(impl) -> None:
        with contextlib.suppress(BuildError):  # the evaluation reports it, with nvcc's message
            exported_symbols(build(impl.source, arch, impl.links, impl.extra_flags).library)

    workers = os.cpu_count() or 4
    with (
        err_console.status(f"compiling {len(impls)} implementations"),
        ThreadPoolExecutor(workers) as pool,
    ):
        list(pool.map(one, impls))


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
        f"{max(sols):.1%}" if sols else "-",
    ]


def main() -> None:
    """Entry point: a UserError is one line on stderr and exit code 2, never a traceback."""
    __import__("cudamaster.bench.sandbox", fromlist=["*"]).make_undumpable()  # docs/sandbox.md
    try:
        app()
    except UserError as exc:
        err_console.print(f"[bold red]error:[/bold red] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
