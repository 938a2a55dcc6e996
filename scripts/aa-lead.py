"""A/A against the lead-in: a baseline timed against itself with TimingPolicy.lead_s varied.

    python3 scripts/aa-lead.py OUT.json SECONDS [op:suite ...]

Variants (lead_s = 0, 2 ms, 5 ms) take turns, evaluation by evaluation, until SECONDS have
passed. Each line is one evaluation: the largest |first/second - 1| over its cases, the
cases' mean ratio (a first-turn penalty shows as a mean above 1) and the evaluation's wall
time. The JSON also holds every timed batch's median, in order, with its worker, to see how
the first turn of a case differs from the later ones. Runs from the source tree on a GPU
machine."""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from cudamaster.bench import client
from cudamaster.bench.evaluate import Evaluator, Impl
from cudamaster.bench.timing import TimingPolicy
from cudamaster.device import detect_arch
from cudamaster.tasks import get_task

DEFAULT = ["softmax:paper", "vector_add:paper"]
LEADS = (0.0, 0.002, 0.005)

batches: list[dict] = []
_request = client.WorkerClient.request


def _logged(self: client.WorkerClient, timeout_s: float, **msg) -> dict:
    reply = _request(self, timeout_s, **msg)
    if msg.get("cmd") in ("time", "setup"):
        med = statistics.median(reply.get("times_ms") or [0.0])
        batches.append({"label": self.label, "cmd": msg["cmd"], "n": msg.get("n"), "median": med})
    return reply


def main() -> None:
    out, budget = Path(sys.argv[1]), float(sys.argv[2])
    specs = sys.argv[3:] or DEFAULT
    client.WorkerClient.request = _logged  # type: ignore[method-assign]
    arch = detect_arch()
    rows = []
    start = time.monotonic()
    rep = 0
    while time.monotonic() - start < budget:
        for spec in specs:
            for lead in LEADS:
                if time.monotonic() - start >= budget:
                    break
                op, suite = spec.split(":")
                task = get_task(op)
                src = task.source("baseline", "fp32")
                assert src is not None
                batches.clear()
                t0 = time.monotonic()
                report = Evaluator(task, "fp32", suite, arch, policy=TimingPolicy(lead_s=lead)).run(
                    [Impl("first", src, trusted=True), Impl("second", src)]
                )
                wall = time.monotonic() - t0
                a, b = report.impl("first"), report.impl("second")
                ratios = [
                    x.cold.median_ms / y.cold.median_ms
                    for x, y in zip(a.cases, b.cases, strict=True)
                    if x.cold and y.cold
                ]
                rows.append({
                    "spec": spec, "lead_s": lead, "rep": rep, "wall_s": wall,
                    "ratios": ratios, "max_abs_dev": max(abs(r - 1) for r in ratios),
                    "mean_ratio": statistics.fmean(ratios), "batches": list(batches),
                })  # fmt: skip
                r = rows[-1]
                print(
                    f"{spec:18} lead {lead * 1e3:.0f} ms rep {rep}: max|r-1| "
                    f"{r['max_abs_dev']:.4f} mean r {r['mean_ratio']:.4f} wall {wall:.1f} s",
                    flush=True,
                )
                out.write_text(json.dumps(rows, indent=1))
        rep += 1


if __name__ == "__main__":
    main()
