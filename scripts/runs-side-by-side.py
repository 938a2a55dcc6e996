"""Two optimizer runs' results side by side, as Markdown for a closing note:
    python3 scripts/runs-side-by-side.py RUN_A RUN_B
per task, for each run: P with its noise, the geometric-mean speedup, the speed-of-light fraction
before -> after, the speedup over the library before -> after, the best P per round, candidates
(screened / fully evaluated), merges, debug calls, tokens and GPU seconds; then the tau table of
both. Reads `cudamaster results RUN --json`, so its numbers are the ones that command prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cudamaster.formatting import percent


def results(run: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "cudamaster.cli", "results", run, "--json"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(proc.stdout)


def num(x: float | None, fmt: str = ".3g") -> str:
    return "-" if x is None else format(x, fmt)


def row(name: str, t: dict) -> str:
    p = num(t["score"]) + ("" if t["noise"] is None else f" ± {num(t['noise'], '.2g')}")
    trajectory = " → ".join(num(x) for x in t["trajectory"])
    cells = [name, t["status"], p, num(t["geomean"]),
             f"{percent(t['baseline_sol'])} → {percent(t['sol'])}",
             f"{num(t['baseline_library'])} → {num(t['library'])}", trajectory,
             f"{t['candidates']} ({t['screened']} / {t['full']})", str(t["merges"]),
             str(t["debug_calls"]), str(t["tokens"]), num(t["gpu_s"], ".0f")]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


def main(a: str, b: str) -> None:
    runs = {Path(a).name: results(a), Path(b).name: results(b)}
    print(
        "| task | run | status | P | geomean | SOL before → after | vs library before → after "
        "| best P per round | candidates (screened / full) | merges | debug calls | tokens "
        "| GPU s |"
    )
    print("|" + "---|" * 13)
    tasks = dict.fromkeys(t["task"] for r in runs.values() for t in r["tasks"])
    for task in tasks:
        for name, r in runs.items():
            t = next((t for t in r["tasks"] if t["task"] == task), None)
            if t is not None:
                print(row(f"{task} | {name}", t))
    print()
    print("| tau | " + " | ".join(runs) + " |")
    print("|---|" + "---|" * len(runs))
    for i, s in enumerate(next(iter(runs.values()))["success"]):
        cells = [f"{r['success'][i]['solved']}/{r['success'][i]['total']}" for r in runs.values()]
        print(f"| {s['tau']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python3 scripts/runs-side-by-side.py RUN_A RUN_B")
    main(sys.argv[1], sys.argv[2])
