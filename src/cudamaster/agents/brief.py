"""The facts every prompt states, rendered once per task: the operator and its tolerance in
numbers, the GPU, the objective and what is timed, the exact build; and the tables the agents
read (per-case results, failures, earlier candidates)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..bench.build import BASE_FLAGS, arch_flags
from ..device import DeviceFacts
from ..dtypes import concrete
from ..formatting import percent, ratio
from ..tasks import Task
from .history import Candidate
from .outcome import CaseOutcome, Outcome

if TYPE_CHECKING:
    from .state import Version
from .parse import ALLOWED_FLAGS

_CTYPE = {"f32": "float", "bf16": "__nv_bfloat16", "i32": "int"}
_ULP = {"fp32": 2.0**-23, "bf16": 2.0**-7}  # the spacing of numbers in [1, 2)


def signature(task: Task, variant: str) -> str:
    parts = []
    for a in task.spec.args:
        t = _CTYPE[concrete(a.dtype, variant)]
        if a.role == "scalar":
            parts.append(f"{t} {a.name}")
        else:
            const = "const " if a.role_for(variant) == "input" else ""
            parts.append(f"{const}{t}* {a.name}")
    return f"void {task.symbol(variant)}({', '.join(parts)})"


def _si(x: float | None, unit: str) -> str:
    if x is None:
        return "-"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def fmt_time(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms * 1e3:.3g} us" if ms < 1 else f"{ms:.4g} ms"


def tolerance(task: Task, variant: str) -> str:
    tol = task.spec.tolerance[variant]
    ulps = (tol.rtol + tol.mtol) / _ULP[variant]
    rule = (
        "|got - ref| <= atol + rtol*|ref| + mtol*mag for every output element, where ref is "
        "the float64 oracle and mag the element's magnitude (the sum of the absolute values of "
        "the terms that make it, e.g. of a reduction; |ref| where the oracle gives none)"
    )
    budget = (
        f"; up to {tol.budget:.2%} of the elements may fail"
        if tol.budget
        else "; no element may fail"
    )
    return (
        f"{rule}. Here atol = {tol.atol:g}, rtol = {tol.rtol:g}, mtol = {tol.mtol:g} "
        f"(rtol + mtol is about {ulps:.3g} {variant} ulps at 1.0){budget}. NaN never passes."
    )


def gpu(device: DeviceFacts) -> str:
    return (
        f"{device.name}: compute capability {device.compute_capability[:-1]}."
        f"{device.compute_capability[-1]} (sm_{device.compute_capability}), "
        f"{device.sm_count} SMs; per SM {device.shared_per_sm // 1024} KiB shared memory (a "
        f"block may opt in to {device.shared_per_block // 1024} KiB), {device.registers_per_sm} "
        f"32-bit registers, {device.threads_per_sm} resident threads; "
        f"{device.l2_bytes / 2**20:.0f} MiB L2; {device.memory_mib // 1024} GiB memory.\n"
        f"Measured on it: {device.copy_gbs:.0f} GB/s device-to-device copy (bytes read + "
        f"written per second), {device.fp32_tflops:.1f} TFLOP/s FP32 GEMM (cuBLAS SGEMM), "
        f"{device.bf16_tflops:.0f} TFLOP/s BF16 GEMM (tensor cores, FP32 accumulation), and a "
        f"launch + synchronize floor of {device.launch_floor_us:.2f} us (an empty kernel, "
        f"timed as your call is).{arch_note(device)}"
    )


def arch_note(device: DeviceFacts) -> str:
    """What building for the arch-specific target makes available (Hopper: sm_90a)."""
    if not device.arch.endswith("a"):
        return ""
    return (
        f"\nEvery build targets {device.arch}, the arch-specific target: Hopper's own "
        "instructions are available (wgmma warpgroup MMA, TMA bulk tensor copies "
        "cp.async.bulk.tensor with mbarrier, setmaxnreg, thread block clusters and distributed "
        "shared memory)."
    )


TIMED = (
    "What is timed, per call: the whole entry function, from a CUDA event recorded just before "
    "the call to one recorded after a cudaDeviceSynchronize() that follows it, so host work in "
    "the entry (cudaMalloc, cudaMemcpy, creating streams or handles) counts, and work on other "
    "streams is waited for. The L2 cache is flushed before every timed call (cold L2) by a "
    "memset of a buffer at least four times its size, so the call starts with L2 full of that "
    "buffer's dirty lines (Nsight Compute's profile starts from a clean, invalidated L2 "
    "instead); every "
    "output is filled with NaN and accumulators zeroed before every call, in-place inputs are "
    "restored, and the inputs rotate over several sets and buffer placements: nothing can be "
    "reused from one call to the next. The median of many calls counts, timed turn by turn "
    "with the baseline's in the same session. Outputs are checked on the first call, on a "
    "timed call, and on a fresh input set after timing."
)


def build_command(device: DeviceFacts, flags: tuple[str, ...] | list[str]) -> str:
    """The nvcc command line of a build with ``flags`` (as the evaluator runs it)."""
    extra = [f for f in flags if f != "-O3"]
    return " ".join(["nvcc", *BASE_FLAGS, *arch_flags(device.arch), *extra,
                     "-o impl.so impl.cu"])  # fmt: skip


ALLOWLIST = ", ".join((*ALLOWED_FLAGS, "-maxrregcount=N"))


@dataclass(frozen=True)
class Brief:
    """The per-task facts the templates state."""

    task: Task
    variant: str
    suite: str
    device: DeviceFacts
    signature: str
    tolerance: str
    gpu: str
    timed: str = TIMED
    allowlist: str = ALLOWLIST

    @classmethod
    def of(cls, task: Task, variant: str, suite: str, device: DeviceFacts) -> Brief:
        return cls(task, variant, suite, device, signature(task, variant),
                   tolerance(task, variant), gpu(device))  # fmt: skip

    def build(self, flags: tuple[str, ...] | list[str]) -> str:
        return build_command(self.device, flags)

    @property
    def arch(self) -> str:
        """What the build's target makes available ("" where nothing beyond the usual)."""
        return arch_note(self.device).strip()


def weights(cases: list[CaseOutcome]) -> str:
    """The objective's weight of each case, one line each."""
    return "\n".join(f"- case {c.index} ({c.label}): {c.weight:.2%} of P" for c in cases)


def case_table(outcome: Outcome) -> str:
    """Per case: weight, bytes and FLOPs, time with spread, speedups, speed-of-light fraction."""
    head = (
        "| case | weight | bytes | FLOPs | time (IQR/median) | baseline | vs baseline | "
        "vs library | speed of light |\n|---|---|---|---|---|---|---|---|---|"
    )
    rows = [head]
    for c in outcome.cases:
        t = fmt_time(c.time_ms) if c.time_ms is not None else c.verdict
        spread = f" ({c.spread:.1%})" if c.spread is not None and c.time_ms is not None else ""
        rows.append(
            f"| {c.index}: {c.label} | {c.weight:.1%} | {_si(c.bytes, 'B')} | "
            f"{_si(c.flops, 'FLOP')} | {t}{spread} | {fmt_time(c.baseline_ms)} | "
            f"{ratio(c.vs_baseline)} | {ratio(c.vs_library)} | {percent(c.sol)} |"
        )
    return "\n".join(rows)


def score_line(outcome: Outcome) -> str:
    if outcome.score is None:
        return f"verdict {outcome.verdict}"
    noise = f" +- {outcome.noise:.3f}" if outcome.noise is not None else ""
    geo = f", geometric mean {outcome.geomean:.3f}x" if outcome.geomean is not None else ""
    return f"P = {outcome.score:.3f}{noise}{geo}"


def trials(outcome: Outcome) -> str:
    """The flag screen, one line per build."""
    lines = []
    for t in outcome.trials:
        result = f"P {t.score:.3f}" if t.score is not None else t.verdict
        lines.append(f"- `{' '.join(t.flags)}`: {result}")
    return "\n".join(lines)


def failures(outcome: Outcome, limit: int = 40) -> str:
    """Every failing case with its first mismatches (at most ``limit`` lines)."""
    lines = [f"- case {c.index} ({c.label}): {c.verdict}: {c.detail}".rstrip(": ")
             for c in outcome.cases if c.verdict not in ("ok", "skipped")]  # fmt: skip
    lines = [ln for block in lines for ln in block.splitlines()]
    if len(lines) > limit:
        lines = [*lines[:limit], f"- ... ({len(lines) - limit} more lines)"]
    return "\n".join(lines)


def parents(versions: list[Version]) -> str:
    """The beam's other members, each with its score, per-case speedups and source."""
    out = []
    for v in versions:
        speeds = ", ".join(ratio(c.vs_baseline) for c in v.outcome.cases)
        stage = "screening only" if v.outcome.stage == "screen" else "full evaluation"
        out.append(f"### {v.label} (build flags `{' '.join(v.flags)}`): {score_line(v.outcome)} "
                   f"({stage}); speedup per case: {speeds}\n```cuda\n{v.source}```")  # fmt: skip
    return "\n\n".join(out)


def history(candidates: list[Candidate]) -> str:
    """Every earlier candidate: what it tried, what it became, what changed."""
    out = []
    for c in candidates:
        result = c.verdict
        if c.score is not None:
            result += f", P {c.score:.3f}" + (f" +- {c.noise:.3f}" if c.noise is not None else "")
            result += " (screening)" if c.stage == "screen" else " (full evaluation)"
        kept = "kept as the new best" if c.kept else "not kept"
        strategy = f", strategy: {c.strategy}" if c.strategy else ""
        out.append(f"- {c.label} (from {c.parent}{strategy}): {result}; {kept}")
        out.append(f"  - plan: {'; '.join(c.optimizations) or '-'}")
        if len(c.attempts) > 1:
            out.append(f"  - attempts: {', '.join(c.attempts)}")
        if c.detail:
            out.append(f"  - failure: {c.detail}")
        if any(s is not None for s in c.speedups):
            speeds = ", ".join("-" if s is None else f"{s:.2f}" for s in c.speedups)
            out.append(f"  - speedup per case: {speeds}")
        out.append(f"  - code: {c.diff}; flags {' '.join(c.flags) or '-'}")
    return "\n".join(out)
