"""`cudamaster mcp` driven by the MCP SDK's own client over stdio, as a coding agent drives it:
the tools it lists, the operators and a specification, an evaluation that fails to compile, one
without a GPU, one on the fake GPU (whose launches do nothing, so even a good kernel is judged
wrong, with its mismatches), and a profile without Nsight Compute."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra (pip install -e '.[mcp]')")

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from cudamaster.profile.ncu import ncu_path

FIXTURES = Path(__file__).parent / "fixtures"
GOOD = (FIXTURES / "good" / "vector_add_grid.cu").read_text()
TASKS = Path(__file__).resolve().parents[1] / "tasks"
needs_nvcc = pytest.mark.skipif(not shutil.which("nvcc"), reason="needs nvcc")
needs_gcc = pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc (the fake GPU)")
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}


def _dump(result: Any) -> dict[str, Any]:
    """A protocol object as JSON, with the wire's field names (mcp 1.x and 2.x alike)."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def with_session(env: dict[str, str], work: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    """Start `python -m cudamaster.cli mcp` with ``env`` and run ``work`` on a session with it."""

    async def run() -> Any:
        server = StdioServerParameters(
            command=sys.executable, args=["-m", "cudamaster.cli", "mcp"], env=env
        )
        async with (
            stdio_client(server) as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            await session.initialize()
            return await work(session)

    return asyncio.run(asyncio.wait_for(run(), timeout=900))


def call(env: dict[str, str], tool: str, **arguments: Any) -> dict[str, Any]:
    """One tool call in a session of its own: the result as JSON."""

    async def work(session: ClientSession) -> dict[str, Any]:
        return _dump(await session.call_tool(tool, arguments))

    return with_session(env, work)


def text(result: dict[str, Any]) -> str:
    return "\n".join(c["text"] for c in result["content"] if c["type"] == "text")


def answer(result: dict[str, Any]) -> dict[str, Any]:
    assert not result.get("isError"), text(result)
    return result["structuredContent"]


def test_the_client_sees_four_tools_with_their_input_and_output_schemas():
    async def work(session: ClientSession) -> list[dict[str, Any]]:
        return [_dump(t) for t in (await session.list_tools()).tools]

    tools = {t["name"]: t for t in with_session({**os.environ, **NO_GPU}, work)}
    assert set(tools) == {"list_operators", "operator_spec", "evaluate", "profile"}
    schema = {name: t["inputSchema"] for name, t in tools.items()}
    assert schema["list_operators"]["properties"] == {}
    assert set(schema["operator_spec"]["properties"]) == {"op", "dtype"}
    assert schema["operator_spec"]["required"] == ["op"]
    assert schema["operator_spec"]["properties"]["dtype"]["enum"] == ["fp32", "bf16"]
    assert set(schema["evaluate"]["properties"]) == {"op", "dtype", "source"}
    assert sorted(schema["evaluate"]["required"]) == ["dtype", "op", "source"]
    assert set(schema["profile"]["properties"]) == {"op", "dtype", "source", "case"}
    assert sorted(schema["profile"]["required"]) == ["dtype", "op", "source"]
    assert "extern" in schema["evaluate"]["properties"]["source"]["description"]
    outputs = {name: set(t["outputSchema"]["properties"]) for name, t in tools.items()}
    assert {"verdict", "score", "noise", "cases", "unseen", "sol", "compile_log"} <= outputs[
        "evaluate"
    ]
    assert {"bottleneck", "summary", "error"} <= outputs["profile"]
    assert {"signature", "paper_suite", "tolerance", "baseline_source"} <= outputs["operator_spec"]
    assert tools["list_operators"]["annotations"]["readOnlyHint"] is True
    assert tools["evaluate"]["annotations"]["readOnlyHint"] is False
    assert "unseen" in tools["evaluate"]["description"]


def test_list_operators_and_an_operators_spec():
    env = {**os.environ, **NO_GPU}

    async def work(session: ClientSession) -> tuple[dict, dict, dict]:
        ops = _dump(await session.call_tool("list_operators", {}))
        spec = _dump(
            await session.call_tool("operator_spec", {"op": "vector_add", "dtype": "fp32"})
        )
        bad = _dump(await session.call_tool("operator_spec", {"op": "vectr_add"}))
        return ops, spec, bad

    ops, spec, bad = with_session(env, work)
    operators = {o["name"]: o for o in answer(ops)["operators"]}
    assert len(operators) == len(list(TASKS.glob("*/task.toml")))
    assert operators["vector_add"]["dtypes"] == ["fp32", "bf16"]
    assert operators["vector_add"]["library"].startswith("cuBLAS")
    assert "- vector_add (dense linear algebra; fp32, bf16): C[i] = A[i] + B[i]" in text(ops)
    s = answer(spec)
    assert s["signature"] == "void vector_add(const float* A, const float* B, float* C, int N)"
    sizes = (1024, 4096, 16384, 65536, 262144)
    assert [c["params"] for c in s["paper_suite"]] == [{"N": n} for n in sizes]
    assert sum(c["weight"] for c in s["paper_suite"]) == pytest.approx(1.0)
    assert s["tolerance"]["rtol"] == 1e-6 and s["tolerance"]["atol"] == 1e-7
    assert s["baseline_source"] == (TASKS / "vector_add" / "baseline.cu").read_text()
    assert 'entry point: extern "C" void vector_add(' in text(spec)
    assert "NaN never passes" in text(spec)
    # a bad input is an error result with the CLI's one line, never a traceback
    assert bad["isError"] and "unknown operator 'vectr_add' (did you mean vector_add?)" in text(bad)
    assert "Traceback" not in text(bad)


@needs_nvcc
def test_evaluate_gives_the_compiler_errors_of_a_source_that_does_not_build():
    source = (FIXTURES / "wrong" / "compile_error.cu").read_text()
    result = call(
        {**os.environ, **NO_GPU}, "evaluate", op="vector_add", dtype="fp32", source=source
    )
    a = answer(result)
    assert a["verdict"] == "compile_error" and not a["correct"]
    assert "return value type does not match the function type" in a["detail"]
    assert "1 error detected" in a["compile_log"]
    assert "compiler output" in text(result) and "return N;" in text(result)


@needs_nvcc
def test_without_a_gpu_evaluate_builds_and_checks_and_says_a_gpu_is_needed():
    env = {**os.environ, **NO_GPU}

    async def work(session: ClientSession) -> tuple[dict, dict, dict]:
        args = {"op": "vector_add", "dtype": "fp32"}
        good = _dump(await session.call_tool("evaluate", {**args, "source": GOOD}))
        refused = (FIXTURES / "wrong" / "opens_file.cu").read_text()
        bad = _dump(await session.call_tool("evaluate", {**args, "source": refused}))
        prof = _dump(await session.call_tool("profile", {**args, "source": GOOD}))
        return good, bad, prof

    good, bad, prof = with_session(env, work)
    a = answer(good)
    assert a["verdict"] == "needs_gpu" and not a["correct"] and a["score"] is None
    assert "passes the static checks" in a["detail"] and "need a GPU" in a["detail"]
    assert "no GPU found" in a["detail"]
    assert re.search(r"\d+ registers", a["resources"][0])
    assert answer(bad)["verdict"] == "forbidden" and "fopen" in answer(bad)["detail"]
    p = answer(prof)
    assert p["verdict"] == "needs_gpu" and not p["ok"] and "needs a GPU" in p["error"]


@needs_gcc
@needs_nvcc
def test_on_the_fake_gpu_a_good_kernel_is_judged_wrong_with_its_mismatches(fake_gpu):
    """The fake GPU's launches do nothing: the outputs keep the harness's NaN poison, so the
    evaluator (the same as `cudamaster eval`'s) must find the first unseen case wrong, with
    where and what it expected; the baseline fails the same way."""
    result = call(fake_gpu, "evaluate", op="vector_add", dtype="fp32", source=GOOD)
    a = answer(result)
    assert a["gpu"] == "Fake GPU"
    assert a["verdict"] == "wrong_on_unseen" and not a["correct"] and a["score"] is None
    assert a["unseen_seed"] is not None
    first = a["unseen"][0]
    assert first["verdict"] == "wrong" and "elements wrong" in first["detail"]
    assert re.search(r"\[\d+\] expected -?[\d.e+-]+, got nan", first["detail"]), first["detail"]
    assert all(c["verdict"] == "skipped" for c in a["cases"])
    assert a["baseline_verdict"] == "wrong_on_unseen"
    assert "the baseline itself: wrong_on_unseen" in text(result)


@needs_gcc
@needs_nvcc
def test_mismatches_of_a_matrix_are_given_as_row_and_column(fake_gpu):
    source = (TASKS / "matrix_transpose" / "baseline.cu").read_text()
    a = answer(call(fake_gpu, "evaluate", op="matrix_transpose", dtype="fp32", source=source))
    assert a["verdict"] == "wrong_on_unseen"
    assert re.search(r"\[\d+, \d+\] expected", a["unseen"][0]["detail"]), a["unseen"][0]


@needs_gcc
@needs_nvcc
@pytest.mark.skipif(ncu_path() is not None, reason="checks the answer where ncu is missing")
def test_profile_without_nsight_compute_says_so(fake_gpu):
    result = call(fake_gpu, "profile", op="vector_add", dtype="fp32", source=GOOD)
    p = answer(result)
    assert not p["ok"] and p["verdict"] == "profile_missing"
    assert p["error"] == "ncu (Nsight Compute) not found on PATH"
    assert p["case"] == 4 and p["label"] == "N=262144"
    assert "profile_missing: ncu (Nsight Compute) not found on PATH" in text(result)


def test_nothing_but_the_protocol_reaches_stdout():
    """Once the server guards its stdio, a child process's output goes to stderr and what the
    server writes to sys.stdout (the protocol) still reaches the client."""
    code = (
        "import os, sys\nfrom cudamaster.mcp_server import _guard_stdio\n_guard_stdio()\n"
        "os.system('echo from-a-child; cat')\nsys.stdout.write('wire\\n')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input="from-stdin\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert proc.stdout == "wire\n"  # the child wrote nothing there, nor read the client's input
    assert "from-a-child" in proc.stderr and "from-stdin" not in proc.stderr


def test_without_the_sdk_the_command_says_which_extra_to_install(tmp_path):
    code = "import sys\nsys.modules['mcp'] = None\nfrom cudamaster.cli import main\n"
    code += "sys.argv = ['cudamaster', 'mcp']\nmain()\n"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs the MCP SDK (missing: mcp)" in lines[0], proc.stderr
    assert "[mcp]'" in lines[0]


def test_an_sdk_outside_the_extras_range_is_refused_in_one_line(monkeypatch):
    import importlib.metadata

    from cudamaster.errors import UserError
    from cudamaster.extras import require_mcp

    require_mcp()  # the installed one (the test extra's) is in range
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.21.0")
    with pytest.raises(UserError, match=r"needs mcp >= 1\.21\.2, < 3 \(installed: 1\.21\.0\)"):
        require_mcp()
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "3.0.0")
    with pytest.raises(UserError, match=r"installed: 3\.0\.0\): pip install"):
        require_mcp()


def test_a_tool_that_breaks_answers_an_error_naming_it_and_logs_the_traceback(caplog):
    import anyio

    from cudamaster.mcp_server import _in_thread

    def broken():
        raise RuntimeError("boom")

    with pytest.raises(Exception, match=r"internal error: RuntimeError: boom") as caught:
        anyio.run(_in_thread, broken)
    assert type(caught.value).__name__ == "ToolError"
    assert "Traceback" in caplog.text or any(r.exc_info for r in caplog.records)


def test_answers_are_json_both_ways():
    """The structured content round-trips: what the client gets is what the model holds."""
    from cudamaster.mcp_tools import operator_spec

    spec = operator_spec("softmax", "bf16")
    assert json.loads(spec.model_dump_json())["signature"].startswith("void softmax_bf16(")
    assert "softmax_bf16" in spec.text()
