"""The loop's GPU side: evaluate a candidate with the real evaluator, profile it with ncu.

One lock per GPU: LLM calls of many tasks run in parallel, GPU work one at a time, so that
timings stay clean.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ..bench.client import WorkerPool
from ..bench.evaluate import Evaluator, Impl, standard_impls
from ..device import DeviceFacts
from ..profile.run import profile as run_profile
from ..profile.run import sanitize
from ..report import score_impl
from ..tasks import Task
from .loop import Outcome

GPU_LOCK = threading.Lock()


def _extra(flags: tuple[str, ...]) -> tuple[str, ...]:
    """The compiler agent's flags beyond the build's own -O3."""
    return tuple(f for f in flags if f != "-O3")


POOL = WorkerPool()  # baseline and library workers, reused across evaluations (under GPU_LOCK)


class GpuBackend:
    def __init__(self, task: Task, variant: str, suite: str, device: DeviceFacts,
                 code_dir: Path, lock: threading.Lock = GPU_LOCK) -> None:  # fmt: skip
        self.task, self.variant, self.suite, self.device = task, variant, suite, device
        self.code_dir, self.lock = code_dir, lock

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
        with self.lock:
            ev = Evaluator(self.task, self.variant, self.suite, self.device.arch, pool=POOL)
            report = ev.run(impls)
        label = "baseline" if name == "baseline" else name
        impl = report.impl(label)
        assert impl is not None
        scored = score_impl(self.task, report, impl, self.device)
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
            with self.lock:
                cand = Impl(name, path, extra_flags=_extra(flags))
                report = sanitize(self.task, self.variant, cand, self.device.arch,
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
        with self.lock:
            rep = run_profile(self.task, self.variant, impl, self.device.arch,
                              device_uuid=self.device.uuid)  # fmt: skip
        if not rep.result.ok:
            return f"(profile missing: {rep.result.error})"
        return rep.summaries[mode].text
