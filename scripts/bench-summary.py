#!/usr/bin/env python3
"""One line per (operator, dtype, suite) of `cudamaster bench` JSON files, as markdown:
verdicts, the library's P and geometric-mean speedup over the baseline, the largest case's
baseline and library times, and the median over cases of the faster one's speed-of-light
fraction; then, per file, the run's wall and build time, where the time went (the sums of
every case's phases, cudamaster.bench.evaluate.EvalReport.phases) and the share of its CPUs
that the preparation helper kept busy.
Usage: scripts/bench-summary.py BENCH.json [MORE.json ...]"""

import json
import statistics
import sys


def rows(path: str):
    with open(path) as f:
        results = json.load(f)["results"]
    for result in results:
        report, scores = result["report"], {s["label"]: s for s in result["scores"]}
        base, lib = scores.get("baseline"), scores.get("library")
        last = base["cases"][-1] if base and base["cases"] else None
        lib_last = lib["cases"][-1] if lib and lib["cases"] else None
        sol = []
        for i, case in enumerate(base["cases"] if base else []):
            pair = [case] + ([lib["cases"][i]] if lib else [])
            timed = [c for c in pair if c.get("time_ms")]
            if timed:
                sol.append(min(timed, key=lambda c: c["time_ms"])["sol_fraction"] or 0.0)
        yield (
            report["task"], report["variant"], report["suite"], len(report["phases"]),
            base["verdict"] if base else "-", lib["verdict"] if lib else "n/a",
            f"{lib['score']:.3g}" if lib and lib["score"] else "-",
            f"{lib['geomean']:.3g}" if lib and lib["geomean"] else "-",
            f"{last['time_ms']:.4g}" if last and last.get("time_ms") else "-",
            f"{lib_last['time_ms']:.4g}" if lib_last and lib_last.get("time_ms") else "-",
            f"{statistics.median(sol):.1%}" if sol else "-",
            f"{report['wall_s']:.1f}",
        )  # fmt: skip


def totals(path: str) -> str:
    with open(path) as f:
        data = json.load(f)
    sums: dict[str, float] = {}
    for result in data["results"]:
        for case in result["report"]["phases"]:
            for key, value in case.items():
                if key != "case":
                    sums[key] = sums.get(key, 0.0) + value
    spent = ", ".join(f"{k} {v:.1f}" for k, v in sums.items())
    busy = ""
    cpus = sum(data.get("helper_cpus", {}).values())
    walls = sum(r["report"]["wall_s"] for r in data["results"])
    if cpus and walls and "helper_cpu" in sums:  # how busy the preparation helper kept its CPUs
        busy = f"; helper CPU {sums['helper_cpu'] / (walls * cpus):.0%} of {cpus} CPUs"
    return (
        f"{path}: {len(data['results'])} evaluations, {data.get('wall_s', 0):.1f} s with "
        f"{data.get('build_s', 0):.1f} s of build; phase sums (s): {spent}{busy}"
    )


def main() -> None:
    head = ("op", "dtype", "suite", "cases", "baseline", "library", "lib P", "lib geomean",
            "base ms (last case)", "lib ms (last case)", "SOL of faster (median)",
            "wall s")  # fmt: skip
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for path in sys.argv[1:]:
        for row in rows(path):
            print("| " + " | ".join(str(x) for x in row) + " |")
    print()
    for path in sys.argv[1:]:
        print(totals(path))


if __name__ == "__main__":
    main()
