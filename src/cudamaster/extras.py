"""The optional parts of cudamaster (pyproject.toml's extras) and the one-line error that names
the extra to install when a part is missing. The benchmark needs none of them, except cuDNN
for the cuDNN library baselines (the cudnn extra, or a cuDNN of the system)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from pathlib import Path

from .errors import UserError

#: What the optimizer imports (src/cudamaster/llm, agents/templates.py), by module name.
OPTIMIZER_MODULES = ("openai", "anthropic", "genai_prices", "tiktoken", "jinja2")


def install_line(extra: str) -> str:
    """The pip command that adds EXTRA to this installation: an editable install from its
    checkout ('.' when that is the working directory); otherwise from the user's clone."""
    checkout = Path(__file__).resolve().parents[2]
    if not (checkout / "pyproject.toml").is_file():  # installed from a clone, not editable
        return f"pip install 'CLONE[{extra}]' (CLONE: your CUDAMaster clone)"
    try:
        here: Path | None = Path.cwd().resolve()
    except OSError:  # the working directory is gone
        here = None
    where = "." if checkout == here else str(checkout)
    return f"pip install -e '{where}[{extra}]'"


def optimizer_missing(*modules: str) -> UserError:
    """The error for optimizer SDKs that cannot be imported (module names)."""
    names = ", ".join(m.replace("_", "-") for m in modules)  # as pip names them
    return UserError(f"the optimizer needs its SDKs (missing: {names}): "
                     f"{install_line('optimize')}")  # fmt: skip


def _absent(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):  # a parent package missing, or a broken entry
        return True


#: What a run whose model answers offline (replay:, exchange:) imports: it renders prompts and
#: calls no API (token counts fall back to an estimate, logged, where tiktoken is missing).
OFFLINE_MODULES = ("jinja2",)


def require_optimizer(modules: tuple[str, ...] = OPTIMIZER_MODULES) -> None:
    """UserError, naming the extra, unless every one of ``modules`` (by default every SDK of
    the optimizer) can be imported."""
    missing = [m for m in modules if _absent(m)]
    if missing:
        raise optimizer_missing(*missing)


#: The MCP SDK versions `cudamaster mcp` serves with (pyproject.toml's mcp extra): 1.21.2 is
#: the first 1.x that imports with today's pydantic (earlier ones import a private name of
#: pydantic's that 2.14 no longer has).
MCP_VERSIONS = ((1, 21, 2), (3, 0, 0))


def require_mcp() -> None:
    """UserError, naming the extra, unless an MCP SDK that `cudamaster mcp` serves with (the
    mcp extra's range) can be imported."""
    if _absent("mcp"):
        raise UserError(f"`cudamaster mcp` needs the MCP SDK (missing: mcp): {install_line('mcp')}")
    try:
        version = importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        return  # importable but not installed as a distribution (a source tree): trust it
    parts = tuple(int(p) for p in re.findall(r"\d+", version)[:3])
    low, high = MCP_VERSIONS
    if not low <= parts < high:
        raise UserError(f"`cudamaster mcp` needs mcp >= {'.'.join(map(str, low))}, < "
                        f"{high[0]} (installed: {version}): {install_line('mcp')}")  # fmt: skip
