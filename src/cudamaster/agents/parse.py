"""Reading agents' answers: the code block, the flags."""

from __future__ import annotations

import json
import re

FENCE = re.compile(r"```(?:cuda|cu|c\+\+|cpp|c)?[ \t]*\n(.*?)```", re.DOTALL)

#: Flags the compiler agent may choose (anything else is dropped, and said so).
ALLOWED_FLAGS = (
    "-O3", "-O2", "--use_fast_math", "-lineinfo", "--extra-device-vectorization",
    "-Xptxas=-O3", "-Xptxas=-dlcm=ca", "-Xptxas=-dlcm=cg", "--restrict",
)  # fmt: skip
_MAXRREG = re.compile(r"^-maxrregcount=(\d+)$")


def extract_code(text: str) -> str | None:
    """The longest fenced code block that defines an extern "C" function, else the longest."""
    blocks = [b.strip() + "\n" for b in FENCE.findall(text)]
    if not blocks:
        return None
    with_entry = [b for b in blocks if 'extern "C"' in b]
    return max(with_entry or blocks, key=len)


def parse_flags(text: str) -> tuple[tuple[str, ...], list[str]]:
    """(allowed flags, rejected flags) from the compiler agent's JSON answer."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if not match:
        return ("-O3",), ["(no JSON in the answer)"]
    try:
        flags = json.loads(match.group(0)).get("flags", [])
    except (json.JSONDecodeError, AttributeError):
        return ("-O3",), ["(malformed JSON)"]
    allowed, rejected = [], []
    for flag in flags if isinstance(flags, list) else []:
        flag = str(flag).strip()
        m = _MAXRREG.match(flag)
        if flag in ALLOWED_FLAGS or (m and 16 <= int(m.group(1)) <= 255):
            allowed.append(flag)
        else:
            rejected.append(flag)
    return tuple(dict.fromkeys(allowed)) or ("-O3",), rejected
