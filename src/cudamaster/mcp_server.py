"""`cudamaster mcp`: the tools of mcp_tools.py served over stdio with the official MCP Python SDK
(the `mcp` extra), for coding agents such as Claude Code and Codex.

Four tools: list_operators, operator_spec, evaluate, profile. Each answers a CallToolResult
whose text is the answer's readable form and whose structured content is the answer's fields
(its model is the tool's output schema). Work runs in a thread, one evaluation or profile at a
time (mcp_tools), so the server keeps answering the protocol meanwhile.

stdout is the protocol: before serving, file descriptor 1 is pointed at stderr (so that nvcc,
the workers and a candidate's own printf cannot write into the protocol) and the protocol goes
through a private duplicate; stdin likewise, with the null device on descriptor 0. Logs go to
stderr. The SDK's high-level server is FastMCP in mcp 1.x and MCPServer in mcp 2.x, the same
API under two names: both are served.
"""

import importlib
import io
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Annotated, Any, Literal

import anyio.to_thread
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from . import mcp_tools
from .errors import UserError
from .mcp_tools import Answer, Evaluation, Operators, OperatorSpec, Profile

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
CUDAMaster checks and times CUDA kernels honestly (MSKernelBench: 50 operators, FP32 and BF16).
Iterate: list_operators; operator_spec(op, dtype) for the exact extern "C" signature, sizes,
tolerance and the naive baseline; write one .cu file; evaluate(op, dtype, source); read the
verdict, the mismatches or compiler errors; profile(op, dtype, source) for the bottleneck;
repeat. Scored: P, the complexity-weighted mean speedup over the naive baseline on the paper
suite, only if every suite case and every unseen case (other sizes, drawn per evaluation)
passes; P's noise says what a difference is worth. Forbidden in a source: vendor libraries
(cuBLAS, cuSPARSE, cuDNN, cuFFT, ...; the CUDA runtime, CUB, Thrust and libcu++ are allowed),
file, process or network access, reading other processes: such a source is refused before it
runs or stopped by the sandbox.
"""

Op = Annotated[str, Field(description="Operator name, as list_operators gives it (vector_add).")]
Dtype = Annotated[
    Literal["fp32", "bf16"],
    Field(description="fp32 (entry OP) or bf16 (entry OP_bf16, __nv_bfloat16 data)."),
]
Source = Annotated[
    str,
    Field(
        description='The whole .cu file: CUDA C++ defining the extern "C" entry of '
        "operator_spec's signature, which takes device pointers; it may launch any kernels."
    ),
]
Case = Annotated[
    int, Field(description="Paper-suite case index to profile (default -1: the last, largest).")
]


def _answer(answer: Answer) -> CallToolResult:
    """The answer's text as its content, its fields as its structured content."""
    return CallToolResult.model_validate(
        {
            "content": [{"type": "text", "text": answer.text()}],
            "structuredContent": answer.model_dump(mode="json"),
            "isError": False,
        }
    )


async def _in_thread(work: Callable[[], Answer]) -> CallToolResult:
    """``work`` in a worker thread, its answer as a result; a UserError (a bad input) as the
    SDK's ToolError with its one line, anything else too, its traceback logged to stderr."""
    try:
        return _answer(await anyio.to_thread.run_sync(work))
    except UserError as exc:
        raise _tool_error(str(exc)) from None
    except Exception as exc:
        log.exception("a tool failed")
        why = (
            f"internal error: {type(exc).__name__}: {exc} (its traceback is on the server's stderr)"
        )
        raise _tool_error(why) from None


async def list_operators() -> Annotated[CallToolResult, Operators]:
    """Every MSKernelBench operator: name, category, one-line summary, dtypes, and its vendor
    library baseline if it has one."""
    return await _in_thread(mcp_tools.list_operators)


async def operator_spec(op: Op, dtype: Dtype = "fp32") -> Annotated[CallToolResult, OperatorSpec]:
    """What a source for OP must be and how it is judged: the extern "C" entry signature, each
    argument's role and shape, semantics, the paper suite's sizes (each case's weight in P) and
    the large suite's, the unseen shape space, the tolerance in numbers, what is timed, and the
    naive baseline's source (the speedups' reference)."""
    return await _in_thread(lambda: mcp_tools.operator_spec(op, dtype))


async def evaluate(op: Op, dtype: Dtype, source: Source) -> Annotated[CallToolResult, Evaluation]:
    """Build SOURCE and run it through the benchmark's evaluator, exactly as `cudamaster eval`:
    static checks (no vendor library, file, process or network call), the kernel sandbox,
    correctness on unseen cases drawn for this call and on every paper-suite case, then timing
    interleaved with the baseline and the library. Answers the verdict; per case the time, the
    speedups over the baseline and the library, the speed-of-light fraction; P with its noise;
    on failure the first mismatches ([row, col] where the shape is known) or the compiler's
    errors. Without a GPU it builds and checks the source and says that a GPU is needed. Takes
    from seconds to minutes."""
    return await _in_thread(lambda: mcp_tools.evaluate(op, dtype, source))


async def profile(
    op: Op, dtype: Dtype, source: Source, case: Case = -1
) -> Annotated[CallToolResult, Profile]:
    """Nsight Compute profile of SOURCE on one paper-suite case, as `cudamaster profile`: the
    bottleneck class (compute-bound, memory-bandwidth-bound or memory-latency-bound) and the
    metrics summary filtered to it (launch configuration, occupancy, throughputs, top stalls).
    Needs a GPU and ncu."""
    return await _in_thread(lambda: mcp_tools.profile(op, dtype, source, case))


TOOLS: tuple[tuple[Callable[..., Awaitable[CallToolResult]], str, bool], ...] = (
    (list_operators, "List the operators", True),
    (operator_spec, "An operator's specification", True),
    (evaluate, "Evaluate a CUDA source", False),
    (profile, "Profile a CUDA source", False),
)


def _sdk() -> ModuleType:
    """The SDK's high-level server package: mcp.server.mcpserver (mcp 2.x), else
    mcp.server.fastmcp (mcp 1.x)."""
    try:
        return importlib.import_module("mcp.server.mcpserver")
    except ImportError:
        return importlib.import_module("mcp.server.fastmcp")


def server_class() -> Any:
    """The SDK's high-level server: MCPServer (mcp 2.x) or FastMCP (mcp 1.x)."""
    sdk = _sdk()
    return getattr(sdk, "MCPServer", None) or sdk.FastMCP


def _tool_error(message: str) -> Exception:
    """The SDK's ToolError: the client reads its message as the call's error result."""
    return importlib.import_module(f"{_sdk().__name__}.exceptions").ToolError(message)


def build_server() -> Any:
    """The server with the four tools; run(\"stdio\") serves it."""
    instructions = " ".join(INSTRUCTIONS.split())  # one paragraph: clients wrap it themselves
    server = server_class()(name="cudamaster", instructions=instructions, log_level="WARNING")
    for fn, title, read_only in TOOLS:
        hints = {"title": title, "readOnlyHint": read_only, "destructiveHint": False,
                 "openWorldHint": False}  # fmt: skip
        server.add_tool(fn, name=fn.__name__, title=title, structured_output=True,
                        annotations=ToolAnnotations.model_validate(hints))  # fmt: skip
    return server


def _guard_stdio() -> None:
    """Keep the protocol's descriptors to the server alone: fd 1 goes to stderr and fd 0 to the
    null device, so that no child process (nvcc, a worker, a candidate's host code) can write
    into the protocol or read from it; sys.stdout and sys.stdin, which the SDK serves, keep
    private duplicates."""
    wire_out, wire_in = os.dup(1), os.dup(0)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = io.TextIOWrapper(os.fdopen(wire_out, "wb"), encoding="utf-8", line_buffering=True)
    sys.stdin = io.TextIOWrapper(os.fdopen(wire_in, "rb"), encoding="utf-8")


def serve() -> None:
    """Serve the tools over stdio until the client closes the connection (extras.require_mcp
    first: this module imports the SDK)."""
    server = build_server()
    _guard_stdio()
    log.info("cudamaster mcp: serving %s over stdio", ", ".join(f.__name__ for f, *_ in TOOLS))
    server.run("stdio")
