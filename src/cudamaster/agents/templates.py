"""Prompt templates, one file per agent (prompts/*.md), rendered with jinja2."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

PROMPTS = Path(__file__).parent / "prompts"
AGENTS = ("planner", "coder", "compiler", "debugger")


@cache
def _env():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(PROMPTS),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render(agent: str, **context: Any) -> str:
    if agent not in AGENTS:
        raise ValueError(f"unknown agent {agent!r}")
    return _env().get_template(f"{agent}.md").render(**context)
