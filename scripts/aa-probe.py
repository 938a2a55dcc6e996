"""A/A diagnosis: a baseline timed against itself, case by case, in both spawn orders, repeated.

    python3 scripts/aa-probe.py OUT.json [op:suite:case ...]

Each line of the table is one evaluation of one case with two workers running the same
library: the ratio first/second of their cold medians, their spreads, and which worker was
started first. A ratio that follows the start order points at the processes; one that follows
nothing is noise. Runs from the source tree on a GPU machine."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cudamaster.bench.evaluate import Evaluator, Impl
from cudamaster.device import detect_arch
from cudamaster.tasks import get_task

DEFAULT = ["vector_add:large:1", "softmax:paper:10", "softmax:paper:0", "matrix_mul:paper:2"]


def main() -> None:
    out = Path(sys.argv[1])
    arch = detect_arch()
    rows = []
    for spec in sys.argv[2:] or DEFAULT:
        op, suite, case = spec.split(":")
        task = get_task(op)
        src = task.source("baseline", "fp32")
        assert src is not None
        for rep in range(2):
            for order in ("x-first", "y-first"):
                impls = [Impl("x", src, trusted=True), Impl("y", src, trusted=True)]
                if order == "y-first":
                    impls.reverse()
                report = Evaluator(task, "fp32", suite, arch, cases=[int(case)]).run(impls)
                x, y = report.impl("x").cases[0], report.impl("y").cases[0]
                if not (x.cold and y.cold):
                    rows.append({"case": spec, "order": order, "error": x.detail or y.detail})
                    continue
                rows.append({
                    "case": spec, "rep": rep, "order": order,
                    "ratio_x_over_y": x.cold.median_ms / y.cold.median_ms,
                    "x_ms": x.cold.median_ms, "y_ms": y.cold.median_ms,
                    "x_spread": x.cold.spread, "y_spread": y.cold.spread,
                    "x_n": x.cold.samples, "y_n": y.cold.samples,
                })  # fmt: skip
                r = rows[-1]
                x_part = f"x {r['x_ms']:.4f} ms ±{r['x_spread']:.1%} n={r['x_n']}"
                y_part = f"y {r['y_ms']:.4f} ms ±{r['y_spread']:.1%} n={r['y_n']}"
                ratio = f"x/y {r['ratio_x_over_y']:.4f}"
                print(f"{spec:22} rep {rep} {order:8} {ratio}  {x_part}  {y_part}", flush=True)
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
