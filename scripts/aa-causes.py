"""Why is one worker process faster than another for microsecond calls? Experiments on the GPU.

    python3 scripts/aa-causes.py OUT.json [op:suite:case ...]

For each case, PROCESSES worker processes load the same baseline library and take turns (ROUNDS
rounds, each a batch of cold timed calls per process, in rotating order), under one condition at
a time:

- default: as the evaluator starts them (this GPU's timing cores, address-space randomisation
  on, the runtime's own synchronize mode);
- one_cpu: every worker confined to the same single CPU (they take turns, so never share it);
- no_aslr: address-space randomisation off (setarch -R), so every process has the same layout;
- one_cpu_no_aslr: both;
- spin, blocking: the synchronize spins, or blocks on an interrupt (CUDAMASTER_SYNC);
- hot: no L2 flush before each call (the flush also evicts the GPU's TLB entries).

Per condition and process: the median, its standard error (0.93 IQR / sqrt(n)), the medians of
the first and second halves of its turns (drift within a process), and the CPUs it ran on. If
the processes' medians differ by more than their standard errors explain (``excess`` = the
standard deviation of the process medians over the typical standard error, ~1 when they agree),
the processes differ, and the condition that brings ``excess`` to ~1 names the cause."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from cudamaster import cpus
from cudamaster.bench import client
from cudamaster.bench.build import build
from cudamaster.bench.client import WorkerClient
from cudamaster.bench.evaluate import Evaluator
from cudamaster.bench.inputs import make_inputs
from cudamaster.bench.protocol import Init, Load, Release, Setup, Time
from cudamaster.device import detect_arch
from cudamaster.tasks import get_task

DEFAULT = ["vector_add:paper:0", "softmax:paper:0", "matrix_mul:paper:0"]
PROCESSES, ROUNDS = 6, 12
CONDITIONS: dict[str, dict[str, Any]] = {
    "default": {},
    "one_cpu": {"one_cpu": True},
    "no_aslr": {"no_aslr": True},
    "one_cpu_no_aslr": {"one_cpu": True, "no_aslr": True},
    "spin": {"env": {"CUDAMASTER_SYNC": "spin"}},
    "blocking": {"env": {"CUDAMASTER_SYNC": "blocking"}},
    "hot": {"mode": "hot"},
}


def _spawn(label: str, cores: tuple[int, ...] | None, env: dict[str, str], no_aslr: bool):
    real = subprocess.Popen

    def popen(args, **kw):  # the worker's command, under setarch -R where asked
        if no_aslr:
            args = ["setarch", platform.machine(), "-R", *args]
        kw["env"] = {**kw["env"], **env}
        return real(args, **kw)

    client.subprocess.Popen = popen  # type: ignore[misc]
    try:
        return WorkerClient(label, cores)
    finally:
        client.subprocess.Popen = real  # type: ignore[misc]


def _cpu_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[36])


def _se(a: np.ndarray) -> float:
    q1, q3 = np.percentile(a, [25, 75])
    return float(0.93 * (q3 - q1) / np.sqrt(a.size))


def run_condition(name: str, cond: dict[str, Any], lib: Path, symbol: str, ev: Evaluator,
                  case_dir: Path, sets) -> dict[str, Any]:  # fmt: skip
    split = cpus.split()
    timing = split.timing if split else None
    cores = (timing[0],) if cond.get("one_cpu") and timing else timing
    specs = tuple(replace(a, nbytes=sets[0].nbytes.get(a.name, 0)) for a in ev.arg_specs)
    scalars = tuple(tuple(s.call_scalars) for s in sets)
    workers = []
    for p in range(PROCESSES):
        w = _spawn(f"{name}{p}", cores, cond.get("env", {}), bool(cond.get("no_aslr")))
        w.request(60, Init(device=0))
        assert w.request(60, Load(str(lib), symbol, ev.arg_specs)).ok
        w.request(60, Setup(str(case_dir), 2, specs, scalars, str(case_dir / f"out-{name}{p}")))
        workers.append(w)
    mode = cond.get("mode", "cold")
    first = workers[0].request(60, Time(3, mode, (0, 1))).times_ms
    n = int(max(5, min(41, 5e-3 / max(np.median(first) / 1e3, 1e-6))))
    samples: list[list[list[float]]] = [[] for _ in workers]  # per process, per turn
    where: list[set[int]] = [set() for _ in workers]
    try:
        for r in range(ROUNDS):
            order = workers[r % PROCESSES :] + workers[: r % PROCESSES]
            for w in order:
                k = workers.index(w)
                samples[k].append(w.request(120, Time(n + 1, mode, (0, 1))).times_ms[1:])
                where[k].add(_cpu_of(w.proc.pid))
    finally:
        for w in workers:
            try:
                w.request(60, Release())
            finally:
                w.close()
    procs = []
    for k in range(PROCESSES):
        turns = samples[k]
        flat = np.asarray([t for turn in turns for t in turn]) * 1e3  # us
        half = len(turns) // 2
        procs.append({
            "median_us": float(np.median(flat)), "se_us": _se(flat), "n": int(flat.size),
            "first_half_us": float(np.median(np.concatenate(turns[:half]))) * 1e3,
            "second_half_us": float(np.median(np.concatenate(turns[half:]))) * 1e3,
            "cpus": sorted(where[k]),
        })  # fmt: skip
    medians = np.asarray([p["median_us"] for p in procs])
    se = float(np.median([p["se_us"] for p in procs]))
    return {
        "processes": procs,
        "spread": float(medians.max() / medians.min() - 1),
        "sd_us": float(medians.std(ddof=1)),
        "typical_se_us": se,
        "excess": float(medians.std(ddof=1) / se) if se > 0 else None,
        "calls_per_turn": n,
    }


def main() -> None:
    out = Path(sys.argv[1])
    arch = detect_arch()
    results: dict[str, Any] = {"cpus_split": str(cpus.split())}
    for spec in sys.argv[2:] or DEFAULT:
        op, suite, index = spec.split(":")
        task = get_task(op)
        src = task.source("baseline", "fp32")
        assert src is not None
        lib = build(src, arch).library
        ev = Evaluator(task, "fp32", suite, arch, unseen=0)
        case = task.cases(suite)[int(index)]
        sets = [make_inputs(task, case, "fp32", s) for s in (11, 12)]
        with tempfile.TemporaryDirectory() as tmp:
            for i, s in enumerate(sets):
                s.write(Path(tmp) / f"set{i}")
            for name, cond in CONDITIONS.items():
                t0 = time.monotonic()
                r = run_condition(name, cond, lib, task.symbol("fp32"), ev, Path(tmp), sets)
                r["wall_s"] = round(time.monotonic() - t0, 1)
                results[f"{spec}/{name}"] = r
                meds = " ".join(f"{p['median_us']:.2f}" for p in r["processes"])
                print(f"{spec:22} {name:16} spread {r['spread']:6.2%} excess "
                      f"{r['excess']:5.1f} se {r['typical_se_us']:.3f} us  [{meds}]",
                      flush=True)  # fmt: skip
                out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
