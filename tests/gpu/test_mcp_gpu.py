"""`cudamaster mcp` on the GPU, driven as a coding agent drives it, through the MCP SDK's own
client over stdio: list the tools, read vector_add's specification, evaluate a good kernel and
a wrong one, profile the good one. The tools as the client sees them and every answer are
recorded (CUDAMASTER_TEST_OUT)."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GOOD = FIXTURES / "good" / "vector_add_grid.cu"  # a full grid: faster than the one-block baseline
WRONG = FIXTURES / "wrong_ops" / "vector_add.cu"  # writes only C[0 .. 1023]


def _dump(result: Any) -> dict[str, Any]:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def _text(result: dict[str, Any]) -> str:
    return "\n".join(c["text"] for c in result["content"] if c["type"] == "text")


async def _agent() -> dict[str, Any]:
    """What an agent does: tools, spec, a kernel evaluated, a wrong one, a profile."""
    # inside: a device run without the mcp extra fails this test, not the collection of the rest
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server = StdioServerParameters(
        command=sys.executable, args=["-m", "cudamaster.cli", "mcp"], env=dict(os.environ)
    )
    seen: dict[str, Any] = {}
    async with (
        stdio_client(server) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        seen["initialize"] = _dump(await session.initialize())
        seen["tools"] = [_dump(t) for t in (await session.list_tools()).tools]
        seen["operators"] = _dump(await session.call_tool("list_operators", {}))
        args = {"op": "vector_add", "dtype": "fp32"}
        seen["spec"] = _dump(await session.call_tool("operator_spec", args))
        good = {**args, "source": GOOD.read_text()}
        seen["good"] = _dump(await session.call_tool("evaluate", good))
        wrong = {**args, "source": WRONG.read_text()}
        seen["wrong"] = _dump(await session.call_tool("evaluate", wrong))
        seen["profile"] = _dump(await session.call_tool("profile", good))
    return seen


def test_an_agent_lists_reads_evaluates_and_profiles_through_the_mcp_server(record):
    seen = asyncio.run(asyncio.wait_for(_agent(), timeout=540))
    tools = {t["name"]: t for t in seen["tools"]}
    record("mcp-tools", {"server": seen["initialize"].get("serverInfo"),
                         "instructions": seen["initialize"].get("instructions"),
                         "tools": seen["tools"]})  # fmt: skip
    assert set(tools) == {"list_operators", "operator_spec", "evaluate", "profile"}
    for name in ("spec", "good", "wrong", "profile"):
        record(f"mcp-{name}", {"structured": seen[name].get("structuredContent"),
                               "text": _text(seen[name])})  # fmt: skip
        assert not seen[name].get("isError"), _text(seen[name])
    spec = seen["spec"]["structuredContent"]
    assert spec["signature"] == "void vector_add(const float* A, const float* B, float* C, int N)"

    good = seen["good"]["structuredContent"]
    assert good["verdict"] == "ok" and good["correct"], _text(seen["good"])
    assert good["baseline_verdict"] == "ok"
    assert good["score"] > 1.0 and good["noise"] is not None  # a full grid beats one block
    assert good["library_score"] is not None
    assert good["unseen"] and all(u["verdict"] == "ok" for u in good["unseen"])
    assert len(good["cases"]) == 5
    for case in good["cases"]:
        assert case["verdict"] == "ok" and case["time_ms"] > 0
        assert case["vs_baseline"] > 0 and case["vs_library"] > 0 and case["sol"] > 0
    assert "P = " in _text(seen["good"]) and "| case |" in _text(seen["good"])

    wrong = seen["wrong"]["structuredContent"]
    assert wrong["verdict"] in ("wrong", "wrong_on_unseen") and not wrong["correct"]
    assert wrong["score"] is None
    where = re.search(r"\[(\d+)\] expected [^,]+, got nan", _text(seen["wrong"]))
    assert where and int(where.group(1)) >= 1024, _text(seen["wrong"])  # C[1024 ..] unwritten

    prof = seen["profile"]["structuredContent"]
    assert prof["ok"], prof["error"]
    assert prof["bottleneck"] in ("compute-bound", "memory-bandwidth-bound",
                                  "memory-latency-bound")  # fmt: skip
    assert prof["kernels"] and prof["summary"] and prof["case"] == 4
