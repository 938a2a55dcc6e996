"""Run Nsight Compute on one case of one implementation, and parse what it measured.

The call runs in a target process (profile/target.py) that prepares the buffers exactly as the
evaluator does, then brackets the single profiled call with cudaProfilerStart/Stop; ncu runs
with ``--profile-from-start off``, so only the operator's own kernels are profiled, every one of
them. The raw .ncu-rep report is kept; the metrics are read back through ncu's own CSV export
(``--import ... --csv --page raw``), never scraped from its screen output.
"""

from __future__ import annotations

import csv
import io
import logging
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..bench.client import worker_env
from .metrics import BY_ID, metric_ids
from .target import TargetSpec

log = logging.getLogger(__name__)
NCU_TIMEOUT_S = 600

_SCALE = {  # unit prefixes ncu prints, to our base units (ns, byte, byte/s)
    "nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9,
    "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
    "KB": 1e3, "MB": 1e6, "GB": 1e9,
    "byte/second": 1.0, "Kbyte/second": 1e3, "Mbyte/second": 1e6, "Gbyte/second": 1e9,
    "Tbyte/second": 1e12, "byte/s": 1.0, "B/s": 1.0,
}  # fmt: skip


@dataclass
class KernelProfile:
    name: str
    values: dict[str, float]


@dataclass
class ProfileResult:
    """Per-kernel metrics and their duration-weighted aggregate, or why there are none."""

    ok: bool
    error: str | None = None
    kernels: list[KernelProfile] = field(default_factory=list)
    aggregate: dict[str, float] = field(default_factory=dict)
    report: str | None = None
    wall_s: float = 0.0
    dropped_metrics: list[str] = field(default_factory=list)  # ids this ncu did not know


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")  # ncu prints thousands separators
    if not text or text.lower() in ("n/a", "nan", "-"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def parse_csv(text: str) -> list[KernelProfile]:
    """Kernels from ``ncu --csv --page raw`` output: a header row, a units row, one row each."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]  # drop ==PROF== chatter
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 2:
        return []
    header, units, body = rows[0], rows[1], rows[2:]
    name_col = header.index("Kernel Name") if "Kernel Name" in header else None
    kernels = []
    for row in body:
        values: dict[str, float] = {}
        for col, metric_id in enumerate(header):
            if metric_id not in BY_ID or col >= len(row):
                continue
            v = _number(row[col])
            if v is None:
                continue
            values[metric_id] = v * _SCALE.get(units[col].strip(), 1.0)
        name = row[name_col] if name_col is not None and name_col < len(row) else "?"
        kernels.append(KernelProfile(name=name, values=values))
    return kernels


def aggregate(kernels: list[KernelProfile]) -> dict[str, float]:
    """One set of values for the whole call: durations, bytes and counts add up; rates and
    percentages are weighted by kernel duration; launch figures are the longest kernel's."""
    if not kernels:
        return {}
    durations = [k.values.get("gpu__time_duration.sum", 0.0) for k in kernels]
    weights = durations if sum(durations) > 0 else [1.0] * len(kernels)
    longest = kernels[max(range(len(kernels)), key=lambda i: weights[i])]
    out: dict[str, float] = {}
    for metric_id, metric in BY_ID.items():
        present = [(w, k.values[metric_id]) for w, k in zip(weights, kernels, strict=True)
                   if metric_id in k.values]  # fmt: skip
        if not present:
            continue
        if metric.section == "launch":
            if metric_id in longest.values:
                out[metric_id] = longest.values[metric_id]
        elif metric.unit in ("ns", "byte", ""):
            out[metric_id] = sum(v for _, v in present)
        else:
            weight = sum(w for w, _ in present)
            out[metric_id] = sum(w * v for w, v in present) / weight if weight else present[0][1]
    return out


def unknown_metrics(output: str, ids: list[str]) -> list[str]:
    """Metric ids that ncu's output says it cannot find."""
    bad_lines = [ln for ln in output.splitlines()
                 if "==ERROR==" in ln and ("metric" in ln.lower())]  # fmt: skip
    return [i for i in ids if any(i in ln or i.split(".")[0] in ln for ln in bad_lines)]


def ncu_path() -> str | None:
    found = shutil.which("ncu")
    if found:
        return found
    roots = [Path("/usr/local/cuda/bin"), *sorted(Path("/opt/nvidia/nsight-compute").glob("*"))]
    for root in roots:
        candidate = root / "ncu"
        if candidate.exists():
            return str(candidate)
    return None


def explain_failure(output: str, returncode: int) -> str:
    """A one-line reason from ncu's output."""
    if "ERR_NVGPUCTRPERM" in output:
        return (
            "no permission to read the GPU's performance counters (ERR_NVGPUCTRPERM): run as "
            "root or allow profiling for all users (NVreg_RestrictProfilingToAdminUsers=0)"
        )
    if "No kernels were profiled" in output:
        return "no kernel was profiled (the implementation launched none, or it crashed first)"
    for line in output.splitlines():
        if "==ERROR==" in line:
            return line.split("==ERROR==", 1)[1].strip()
    return f"ncu exited with code {returncode}"


def run_ncu(
    spec: TargetSpec,
    out_dir: Path,
    clock_control: str = "none",
    timeout_s: float = NCU_TIMEOUT_S,
) -> ProfileResult:
    """Profile the call described by ``spec`` (see target.py); never raises for ncu failures."""
    t0 = time.monotonic()
    ncu = ncu_path()
    if ncu is None:
        return ProfileResult(ok=False, error="ncu (Nsight Compute) not found on PATH")
    out_dir.mkdir(parents=True, exist_ok=True)
    spec_path = out_dir / "target.json"
    spec.write(spec_path)
    report = out_dir / "profile"
    ids = metric_ids()
    dropped: list[str] = []
    for _ in range(2):  # a second try without metrics this ncu does not know, if any
        cmd = [
            ncu, "--clock-control", clock_control, "--profile-from-start", "off",
            "--target-processes", "all", "--metrics", ",".join(ids),
            "--export", str(report), "--force-overwrite",
            sys.executable, "-m", "cudamaster.profile.target", str(spec_path),
        ]  # fmt: skip
        try:
            # a session of its own: a Ctrl-C at the terminal stops the caller, not the profile
            proc = subprocess.run(cmd, capture_output=True, text=True, env=worker_env(),
                                  timeout=timeout_s, check=False,
                                  start_new_session=True)  # fmt: skip
        except subprocess.TimeoutExpired:
            return ProfileResult(ok=False, error=f"ncu timed out after {timeout_s:.0f} s",
                                 wall_s=time.monotonic() - t0)  # fmt: skip
        output = proc.stdout + proc.stderr
        (out_dir / "ncu.log").write_text(output)
        unknown = unknown_metrics(output, ids)
        if not unknown:
            break
        log.warning("ncu does not know %s: profiling without them", ", ".join(unknown))
        dropped += unknown
        ids = [i for i in ids if i not in unknown]
    rep = report.with_suffix(".ncu-rep")
    if proc.returncode != 0 or not rep.exists():
        return ProfileResult(
            ok=False, error=explain_failure(output, proc.returncode), wall_s=time.monotonic() - t0
        )
    csv_proc = subprocess.run(
        [ncu, "--import", str(rep), "--csv", "--page", "raw", "--print-units", "base"],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    (out_dir / "metrics.csv").write_text(csv_proc.stdout)
    kernels = parse_csv(csv_proc.stdout)
    if not kernels:
        return ProfileResult(
            ok=False,
            error=explain_failure(output + csv_proc.stderr, 1),
            report=str(rep),
            wall_s=time.monotonic() - t0,
        )
    return ProfileResult(
        ok=True,
        kernels=kernels,
        aggregate=aggregate(kernels),
        report=str(rep),
        wall_s=time.monotonic() - t0,
        dropped_metrics=dropped,
    )
