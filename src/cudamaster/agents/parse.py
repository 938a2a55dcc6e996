"""Reading agents' answers: the code block that defines the entry, the flags, the plan's items."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

#: Flags the compiler and debug agents may choose (anything else is dropped, and said so).
ALLOWED_FLAGS = (
    "-O3", "-O2", "--use_fast_math", "-lineinfo", "--extra-device-vectorization",
    "-Xptxas=-O3", "-Xptxas=-dlcm=ca", "-Xptxas=-dlcm=cg", "--restrict",
)  # fmt: skip
_MAXRREG = re.compile(r"^-maxrregcount=(\d+)$")
# a fence: up to 3 spaces, then 3 or more backticks or tildes, then the info string
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


@dataclass(frozen=True)
class Block:
    """One fenced block of an answer."""

    info: str  # the info string after the opening fence ("cuda", "CUDA", "c++ title", "")
    code: str
    closed: bool  # False: the answer ended inside it


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block, pairing fences line by line as CommonMark does: a block closes at a
    line of the same fence character, at least as long, with nothing after it; an unterminated
    last block runs to the end. Backtick info strings may not hold backticks."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks: list[Block] = []
    opened: tuple[str, str] | None = None  # (fence, info)
    body: list[str] = []
    for line in lines:
        m = _FENCE.match(line)
        if opened is None:
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                opened, body = (m.group(1), m.group(2).strip()), []
            continue
        fence = opened[0]
        if (
            m
            and m.group(1)[0] == fence[0]
            and len(m.group(1)) >= len(fence)
            and not m.group(2).strip()
        ):
            blocks.append(Block(opened[1], "\n".join(body) + "\n", closed=True))
            opened = None
        else:
            body.append(line)
    if opened is not None and any(ln.strip() for ln in body):
        blocks.append(Block(opened[1], "\n".join(body).rstrip("\n") + "\n", closed=False))
    return blocks


def defines(code: str, symbol: str) -> bool:
    """``code`` holds a definition (not only a declaration) of function ``symbol``."""
    return re.search(rf"\b{re.escape(symbol)}\s*\([^;{{}}]*\)\s*\{{", code) is not None


def extract_code(text: str, symbol: str) -> str | None:
    """The code of the answer: the block that defines ``symbol`` (the longest, if several do,
    the last of equals), else a fence-free answer that is itself the file; None otherwise."""
    blocks = fenced_blocks(text)
    defining = [b.code for b in blocks if defines(b.code, symbol)]
    if defining:
        longest = max(len(c) for c in defining)
        return [c for c in defining if len(c) == longest][-1]
    if not blocks and defines(text, symbol):
        return text.replace("\r\n", "\n").strip("\n") + "\n"
    return None


def resend_request(symbol: str, signature: str) -> str:
    """The short turn that asks for the whole file again when an answer's code was not found."""
    return (
        f"I could not find a complete .cu file in your answer: no fenced code block defines "
        f'`extern "C" {signature}`. Send the whole file again, complete, in one ```cuda block '
        f"(nothing else is needed). The entry function must be `{symbol}`."
    )


def parse_flags(text: str) -> tuple[tuple[str, ...], list[str]]:
    """(allowed flags, rejected flags) from the compiler agent's JSON answer."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if not match:
        return ("-O3",), ["(no JSON in the answer)"]
    try:
        flags = json.loads(match.group(0)).get("flags", [])
    except (json.JSONDecodeError, AttributeError):
        return ("-O3",), ["(malformed JSON)"]
    return allowed_flags(flags if isinstance(flags, list) else [])


def allowed_flags(flags: list[object]) -> tuple[tuple[str, ...], list[str]]:
    """(the allowed ones, in order and once each, -O3 when none; the rejected ones)."""
    allowed, rejected = [], []
    for flag in flags:
        flag = str(flag).strip()
        m = _MAXRREG.match(flag)
        if flag in ALLOWED_FLAGS or (m and 16 <= int(m.group(1)) <= 255):
            allowed.append(flag)
        else:
            rejected.append(flag)
    return tuple(dict.fromkeys(allowed)) or ("-O3",), rejected


_FLAGS_LINE = re.compile(
    r"^\s*(?:[-*]\s*)?\**nvcc flags\**\s*:\s*(.*)$", re.IGNORECASE | re.MULTILINE
)


def debugger_flags(text: str) -> tuple[tuple[str, ...], list[str]] | None:
    """The flags a debug answer asks for on a line ``nvcc flags: -O3 ...`` (outside its code),
    or None when it keeps the flags it was given."""
    outside = text
    for block in fenced_blocks(text):
        outside = outside.replace(block.code, "")
    m = _FLAGS_LINE.search(outside)
    if m is None:
        return None
    return allowed_flags([f.strip("*`,") for f in m.group(1).split() if f.strip("*`,")])


_ITEM = re.compile(r"^\s*(?:#+\s*)?(?:\*\*)?(\d+)[.)]\s*(?:\*\*)?\s*(.+)$")


def plan_items(plan: str, limit: int = 5) -> list[str]:
    """The plan's numbered optimizations, each cut to its first sentence (at most 160
    characters); the first non-empty lines when it numbers nothing."""
    items = []
    for line in plan.replace("\r\n", "\n").splitlines():
        m = _ITEM.match(line)
        if m:
            text = m.group(2).replace("**", "").strip()
            first = re.split(r"(?<=[.;])\s", text, maxsplit=1)[0]
            items.append(first[:160])
    if not items:
        items = [ln.strip(" #*-")[:160] for ln in plan.splitlines() if ln.strip(" #*-")][:2]
    return items[:limit]


@dataclass(frozen=True)
class Plan:
    """One of the planner's plans: its text, the version it starts from, its strategy."""

    text: str
    parent: str  # a parent's label as the planner wrote it ("" when it named none)
    strategy: str = ""


_PLAN_HEAD = re.compile(r"^ {0,3}(?:#{1,4}\s*)?\**\s*Plan\s+\d+\b.*$", re.IGNORECASE | re.MULTILINE)
_PARENT = re.compile(r"^\s*(?:[-*]\s*)?\**Parent\s*:?\**\s*:?\s*[*`]*([\w+-]+(?:\.[\w+-]+)*)",
                     re.IGNORECASE | re.MULTILINE)  # fmt: skip
_STRATEGY = re.compile(r"^\s*(?:[-*]\s*)?\**Strategy\s*:?\**\s*:?\s*(.+?)\s*$", re.I | re.M)


def split_plans(text: str, limit: int) -> list[Plan]:
    """The answer's plans, each a section under a heading "Plan k" (at most ``limit``); the
    whole answer as one plan when it has no such heading."""
    heads = list(_PLAN_HEAD.finditer(text))
    bodies = [text] if not heads else [
        text[h.start() : nxt.start() if nxt else len(text)].strip()
        for h, nxt in zip(heads, [*heads[1:], None], strict=True)
    ]  # fmt: skip
    plans = []
    for body in bodies[:limit]:
        parent = _PARENT.search(body)
        strategy = _STRATEGY.search(body)
        plans.append(Plan(body, parent.group(1) if parent else "",
                          strategy.group(1).strip("*_` .") if strategy else ""))  # fmt: skip
    return plans
