"""The loop's GPU side: evaluate a candidate with the real evaluator, profile it with ncu.

GPU work leases a GPU from the run's pool: LLM calls of many tasks run in parallel, GPU work
one at a time per GPU, so that timings stay clean. An evaluation (candidate, baseline and
library together) runs on one GPU, so every ratio compares timings from the same GPU.
"""

from __future__ import annotations

from pathlib import Path

from ..bench.client import WorkerPool
from ..bench.evaluate import Evaluator, Impl, standard_impls
from ..device import DeviceFacts
from ..gpus import GpuPool
from ..profile.run import profile as run_profile
from ..profile.run import sanitize
from ..report import score_impl
from ..tasks import Task
from .loop import Outcome


def _extra(flags: tuple[str, ...]) -> tuple[str, ...]:
    """The compiler agent's flags beyond the build's own -O3."""
    return tuple(f for f in flags if f != "-O3")


POOL = WorkerPool()  # baseline and library workers, reused across evaluations (per GPU)


class GpuBackend:
    def __init__(self, task: Task, variant: str, suite: str, gpus: GpuPool,
                 devices: dict[str, DeviceFacts], code_dir: Path) -> None:  # fmt: skip
        self.task, self.variant, self.suite = task, variant, suite
        self.gpus, self.devices, self.code_dir = gpus, devices, code_dir

    def _write(self, source: str, name: str) -> Path:
        path = self.code_dir / f"{name}.cu"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        return path

    def evaluate(self, source: str, flags: tuple[str, ...], name: str) -> Outcome:
        path = self._write(source, name)
        impls = standard_impls(self.task, self.variant)
        if name != "baseline":
            impls.append(Impl(name, path, extra_flags=_extra(flags)))
        with self.gpus.lease() as gpu:
            device = self.devices[gpu.uuid]
            ev = Evaluator(self.task, self.variant, self.suite, device.arch, pool=POOL)
            report = ev.run(impls)
        label = "baseline" if name == "baseline" else name
        impl = report.impl(label)
        assert impl is not None
        scored = score_impl(self.task, report, impl, device)
        lines = []
        lib = report.impl("library")
        for c in scored.cases:
            t = f"{c.time_ms:.4f} ms" if c.time_ms is not None else c.verdict
            vs = f", {c.vs_baseline:.2f}x baseline" if c.vs_baseline else ""
            vl = f", {c.vs_library:.2f}x library" if c.vs_library and lib else ""
            sol = f", {c.sol_fraction:.1%} of speed of light" if c.sol_fraction else ""
            lines.append(f"- {c.label}: {t}{vs}{vl}{sol}")
        largest = max(scored.cases, key=lambda c: c.complexity) if scored.cases else None
        resources = ""
        if impl.build is not None:
            resources = "; ".join(
                f"{k.kernel}: {k.registers} registers, {k.shared_bytes} B shared, "
                f"{k.spill_stores} B spill stores, {k.stack_bytes} B stack"
                for k in impl.build.resources
            )
        score = scored.score if impl.correct else None
        detail = impl.detail
        if impl.verdict in ("crash", "runtime_error") and name != "baseline":
            # the debug agent gets compute-sanitizer's report on the case that failed
            failing = next((c.index for c in impl.cases if not c.ok), 0)
            with self.gpus.lease() as gpu:
                cand = Impl(name, path, extra_flags=_extra(flags))
                report = sanitize(self.task, self.variant, cand, self.devices[gpu.uuid].arch,
                                  case_index=failing)  # fmt: skip
            detail += f"\ncompute-sanitizer memcheck on case {failing}:\n{report}"
        return Outcome(
            verdict=impl.verdict,
            detail=detail,
            score=1.0 if name == "baseline" and impl.correct else score,
            geomean=scored.geomean,
            sol=largest.sol_fraction if largest else None,
            summary="\n".join(lines),
            resources=resources,
        )

    def profile(self, source: str, flags: tuple[str, ...], name: str, mode: str) -> str | None:
        path = self._write(source, name)
        impl = Impl(name, path, trusted=name == "baseline",
                    extra_flags=_extra(flags))  # fmt: skip
        with self.gpus.lease() as gpu:
            device = self.devices[gpu.uuid]
            rep = run_profile(self.task, self.variant, impl, device.arch,
                              device_uuid=device.uuid)  # fmt: skip
        if not rep.result.ok:
            return f"(profile missing: {rep.result.error})"
        return rep.summaries[mode].text
