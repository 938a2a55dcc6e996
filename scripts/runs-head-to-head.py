"""Two optimizer runs' final kernels measured against each other, on a GPU:
    python3 scripts/runs-head-to-head.py RUN_A RUN_B [JSON_OUT]
per task the two runs share, one evaluation session on one GPU with the baseline, the library,
run A's best kernel and run B's best kernel (interleaved, as every full evaluation is), so the
two P compare without the drift between the sessions, rounds or GPUs each run's own numbers
came from. Prints a Markdown table (P with its noise, each over the library, B/A) and the
geometric mean of B/A; JSON_OUT, if given, gets every outcome."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from cudamaster.agents.backend import Submission
from cudamaster.agents.gpu import GpuBackend
from cudamaster.agents.outcome import Outcome
from cudamaster.agents.results import library_score
from cudamaster.agents.rundir import RunDir
from cudamaster.agents.state import Version
from cudamaster.bench.score import geometric_mean
from cudamaster.device import targets
from cudamaster.gpus import GpuPool
from cudamaster.tasks import get_task


def bests(run_dir: str) -> dict[tuple[str, str], Version]:
    run = RunDir.existing(Path(run_dir))
    out = {}
    for op, variant in run.read_manifest()["tasks"]:
        state = run.load_state(run.task_dir(op, variant))
        if state.best is not None:
            out[(op, variant)] = state.best
    return out


def p(o: Outcome) -> str:
    if o.score is None:
        return o.verdict
    return f"{o.score:.3g}" + (f" ± {o.noise:.2g}" if o.noise is not None else "")


def main(a: str, b: str, json_out: str | None) -> None:
    (na, ba), (nb, bb) = (Path(a).name, bests(a)), (Path(b).name, bests(b))
    suite = RunDir.existing(Path(a)).read_manifest()["suite"]
    gpus, devices = targets(None)
    pool = GpuPool(gpus)
    print(f"GPU: {next(iter(devices.values())).name}\n")
    print(f"| task | {na} best | {na} P | {nb} best | {nb} P | {na} vs library | "
          f"{nb} vs library | {nb} / {na} |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    ratios, dump = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for key in [k for k in ba if k in bb]:
            op, variant = key
            va, vb = ba[key], bb[key]
            subs = [Submission(f"{side}-{v.label}", v.source, tuple(v.flags))
                    for side, v in (("a", va), ("b", vb)) if v.label != "baseline"]  # fmt: skip
            backend = GpuBackend(get_task(op), variant, suite, pool, devices,
                                 Path(tmp) / f"{op}-{variant}")  # fmt: skip
            outcomes = iter(backend.evaluate([Submission("baseline", "", ()), *subs]))
            base = next(outcomes)
            oa = next(outcomes) if va.label != "baseline" else base
            ob = next(outcomes) if vb.label != "baseline" else base
            ratio = ob.score / oa.score if oa.score and ob.score else None
            if ratio is not None:
                ratios.append(ratio)
            lib_a, lib_b = library_score(oa), library_score(ob)
            print(f"| {op}-{variant} | {va.label} | {p(oa)} | {vb.label} | {p(ob)} | "
                  f"{'-' if lib_a is None else f'{lib_a:.3g}'} | "
                  f"{'-' if lib_b is None else f'{lib_b:.3g}'} | "
                  f"{'-' if ratio is None else f'{ratio:.3f}'} |")  # fmt: skip
            dump[f"{op}-{variant}"] = {na: oa.to_dict(), nb: ob.to_dict(), "ratio": ratio}
    if ratios:
        print(
            f"\ngeometric mean of {nb} / {na} over {len(ratios)} tasks: "
            f"{geometric_mean(ratios):.3f}"
        )
    if json_out:
        Path(json_out).write_text(json.dumps(dump, indent=1))


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else None)
