"""Issue 23's checks on a GPU machine, shortest first, each written to OUT/NAME.json as it ends:

    python3 scripts/issue23-check.py OUT_DIR [STEP ...]

- ``escapes``: vector_add's baseline, the escape fixtures (tests/fixtures/wrong) and a good
  candidate in one evaluation (case 0, no unseen cases): each verdict, the sandbox in force,
  and whether any escape left its marker file;
- ``unseen``: the operators whose library baselines are least sure to pass unseen cases (the
  helpers' reviews named them), each with its known-wrong unseen fixtures, on 6 unseen cases;
- ``aa``: the baselines of vector_add, softmax and matrix_mul against themselves on the paper
  suite, timed on any CPU (as before) and on one CPU (as now), each pair in this session.
Steps run in the order given (default: all three)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from cudamaster.bench.aa import LONG_CALL_MS, run_aa
from cudamaster.bench.build import BuildError, build
from cudamaster.bench.evaluate import Evaluator, Impl, standard_impls
from cudamaster.bench.timing import TimingPolicy
from cudamaster.cpus import ONE_CPU_ENV
from cudamaster.device import detect_arch
from cudamaster.tasks import get_task

FIX = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
FAST = TimingPolicy(warmup=1, batch=3, min_samples=3, max_samples=6, time_cap_s=0.2)
ESCAPES = ["dlsym_system", "reads_parent_environ", "dlopens_cublas", "system_via_elf_walk",
           "opens_socket", "reads_other_proc_mem", "reads_parent_environ_by_address"]  # fmt: skip
AA_OPS = ("vector_add", "softmax", "matrix_mul")
RISKY = [("spmv_csr", "bf16"), ("spmv_csr", "fp32"), ("spmm_csr", "fp32"), ("spmv_ell", "fp32"),
         ("conv_2d", "fp32"), ("FFT", "fp32"), ("matrix_vector_mul", "bf16"),
         ("square_matrix_mul", "bf16"), ("matrix_mul", "fp32"), ("max_pooling_2d", "fp32"),
         ("vector_add", "fp32")]  # fmt: skip


def escapes(arch: str) -> dict:
    task = get_task("vector_add")
    for name in ESCAPES:
        Path(f"/tmp/cudamaster-escaped-{name}").unlink(missing_ok=True)
    impls = [Impl("baseline", task.source("baseline", "fp32"), trusted=True)]  # type: ignore[arg-type]
    impls += [Impl(n, FIX / "wrong" / f"{n}.cu") for n in ESCAPES]
    impls.append(Impl("good", FIX / "good" / "vector_add_grid.cu"))
    ev = Evaluator(task, "fp32", "paper", arch, policy=FAST, cases=[0], unseen=0,
                   call_timeout_s=30)  # fmt: skip
    report = ev.run(impls)
    return {
        "verdicts": {i.label: [i.verdict, i.detail[:240]] for i in report.impls},
        "markers": [n for n in ESCAPES if Path(f"/tmp/cudamaster-escaped-{n}").exists()],
        "device": report.device,
    }


def unseen(arch: str) -> dict:
    out = {}
    for op, variant in RISKY:
        task = get_task(op)
        impls = standard_impls(task, variant)
        if variant == "fp32":
            impls += [Impl(p.stem, p) for p in sorted((FIX / "wrong_unseen").glob(f"{op}__*.cu"))]
        t0 = time.monotonic()
        report = Evaluator(task, variant, "paper", arch, cases=[], call_timeout_s=60).run(impls)
        out[f"{op}-{variant}"] = {
            "seed": report.unseen_seed, "wall_s": round(time.monotonic() - t0, 2),
            "unseen_s": report.unseen_s,
            "verdicts": {i.label: [i.verdict, i.detail[:240]] for i in report.impls},
        }  # fmt: skip
        print(op, variant, {k: v[0] for k, v in out[f"{op}-{variant}"]["verdicts"].items()},
              flush=True)  # fmt: skip
        (OUT / "unseen-partial.json").write_text(json.dumps(out, indent=1, default=str))
    return out


def aa(arch: str) -> dict:
    out = {}
    for op in AA_OPS:
        for label, value in (("any_cpu", "0"), ("one_cpu", "1")):
            os.environ[ONE_CPU_ENV] = value  # the workers inherit it
            rep = run_aa(get_task(op), "fp32", "paper", arch)
            out[f"{op}/{label}"] = asdict(rep) | {
                "outside": len(rep.outside), "worst": rep.worst(),
                "worst_20us": rep.worst(LONG_CALL_MS),
            }  # fmt: skip
            print(op, label, [f"{r.ratio:.4f}±{r.uncertainty:.4f}" for r in rep.rows], flush=True)
            (OUT / "aa-partial.json").write_text(json.dumps(out, indent=1, default=str))
    return out


def prebuild(arch: str) -> None:
    """Every build the steps need, at once (a fresh machine has no build cache)."""
    impls = [i for op, v in RISKY for i in standard_impls(get_task(op), v)]
    impls += [Impl(p.stem, p) for p in (FIX / "wrong_unseen").glob("*__*.cu")]
    impls += [Impl(n, FIX / "wrong" / f"{n}.cu") for n in ESCAPES]
    impls.append(Impl("good", FIX / "good" / "vector_add_grid.cu"))

    def one(impl: Impl) -> None:
        with contextlib.suppress(BuildError):
            build(impl.source, arch, impl.links)

    with ThreadPoolExecutor(os.cpu_count() or 4) as pool:
        list(pool.map(one, impls))


OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")


def main() -> None:
    out = OUT
    out.mkdir(parents=True, exist_ok=True)
    arch = detect_arch()
    t0 = time.monotonic()
    prebuild(arch)
    print(f"builds: {time.monotonic() - t0:.1f} s", flush=True)
    steps = {"escapes": escapes, "unseen": unseen, "aa": aa}
    for name in sys.argv[2:] or list(steps):
        t0 = time.monotonic()
        try:
            result = steps[name](arch)
        except Exception as exc:  # a step that fails says why; the next one still runs
            result = {"error": f"{type(exc).__name__}: {exc}"}
        result["step_s"] = round(time.monotonic() - t0, 1)
        (out / f"{name}.json").write_text(json.dumps(result, indent=1, default=str))
        print(f"{name}: {result['step_s']} s", flush=True)


if __name__ == "__main__":
    main()
