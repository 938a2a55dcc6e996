"""Merging two correct implementations of one operator that win on different problem sizes:
`choose` picks a size rule from per-case speedups, `merge` writes one .cu file whose entry
runs each implementation on its side of the rule."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

log = logging.getLogger(__name__)

_TIE = 1e-9  # relative: a score must beat another by more than rounding to replace it


@dataclass(frozen=True)
class Dispatch:
    """Run path `below` when the int argument `arg` < `threshold`, else path `above`."""

    arg: str
    threshold: int
    below: int  # index into the sources list
    above: int
    predicted: float  # the weighted score this rule would give (see choose)


class MergeError(Exception):
    """The sources cannot be merged; the message is one line saying why."""


# ---------------------------------------------------------------------------------- choose


def _threshold(a: int, b: int) -> int:
    """ceil(sqrt(a*b)) between adjacent values a < b, clamped so a < threshold <= b (a product
    that is not positive counts as 0)."""
    product = a * b
    root = math.isqrt(product - 1) + 1 if product > 0 else 0
    return min(max(root, a + 1), b)


def _beats(x: float, y: float) -> bool:
    return x > y + _TIE * max(1.0, abs(y))


def choose(
    values: list[dict[str, int]], speedups: list[list[float | None]], weights: list[float]
) -> Dispatch | None:
    """values[i]: the int scalar arguments of case i (name -> value); speedups[p][i]: path p's
    speedup over the baseline on case i (None: unknown/failed); weights[i]: case i's weight
    (they sum to 1). Considers every (arg, threshold between two adjacent distinct values of
    that arg over the cases, which path below, which path above) with two DIFFERENT paths;
    the predicted score is sum_i weights[i] * speedups[path(i)][i]; a rule is only valid if
    every case's chosen path has a known speedup. Returns the rule with the highest predicted
    score, or None when no valid rule beats the best single path's score (sum_i w_i s_p,i,
    for paths with all speedups known). Threshold between adjacent distinct values a < b:
    ceil(sqrt(a*b)), clamped so a < threshold <= b. Ties: prefer the first arg in dict order,
    then the lower threshold. Only two paths per rule (sources may be more than 2; a rule picks
    two)."""
    n = len(weights)
    if len(values) != n or any(len(row) != n for row in speedups):
        raise ValueError(f"choose: {len(values)} cases of values, {n} weights, speedup rows of "
                         f"{sorted({len(row) for row in speedups})} cases")  # fmt: skip
    paths = range(len(speedups))

    def total(p: int, cases: list[int]) -> float | None:
        score = 0.0
        for i in cases:
            s = speedups[p][i]
            if s is None:
                return None
            score += weights[i] * s
        return score

    every = list(range(n))
    singles = [t for p in paths if (t := total(p, every)) is not None]
    best_single = max(singles, default=None)
    best: Dispatch | None = None
    args = [a for a in values[0] if all(a in v for v in values)] if values else []
    for arg in args:
        distinct = sorted({v[arg] for v in values})
        for a, b in pairwise(distinct):
            t = _threshold(a, b)
            low = [i for i in every if values[i][arg] < t]
            high = [i for i in every if values[i][arg] >= t]
            low_scores = [total(p, low) for p in paths]
            high_scores = [total(p, high) for p in paths]
            for below in paths:
                for above in paths:
                    lo, hi = low_scores[below], high_scores[above]
                    if below == above or lo is None or hi is None:
                        continue
                    if best is None or _beats(lo + hi, best.predicted):
                        best = Dispatch(arg, t, below, above, lo + hi)
    if best is None:
        log.info("dispatch: no valid rule over %d cases and %d paths", n, len(speedups))
        return None
    if best_single is not None and not _beats(best.predicted, best_single):
        log.info("dispatch: best rule %s does not beat the best single path (%.4g)",
                 best, best_single)  # fmt: skip
        return None
    log.info("dispatch: %s (best single path %s)", best, best_single)
    return best


# ------------------------------------------------------------------------- reading sources


def _mask(text: str) -> str:
    """`text` with comments blanked and the insides of string and char literals replaced by
    'x', keeping its length and newlines, so that regexes and brace matching see only code."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a: int, b: int, fill: str) -> None:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = fill

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end, " ")
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            blank(i, end, " ")
            i = end
        elif c == '"' or (c == "'" and not re.search(r"\b\d\w*$", text[max(0, i - 32) : i])):
            j = i + 1  # a ' after a number is a digit separator (1'000), not a literal
            while j < n and text[j] not in (c, "\n"):
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, min(j, n), "x")
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _blank_directives(masked: str) -> str:
    """`masked` with every preprocessor line (and its continuations) blanked."""
    lines = masked.split("\n")
    directive = False
    for k, line in enumerate(lines):
        if directive or line.lstrip().startswith("#"):
            directive = line.rstrip().endswith("\\")
            lines[k] = " " * len(line)
    return "\n".join(lines)


def _match_close(code: str, i: int) -> int:
    """Index of the `}` matching the `{` at code[i] (len(code) if unbalanced)."""
    depth = 0
    for k in range(i, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(code)


_LINKAGE = re.compile(r'extern\s*"(x+)"')  # after masking, "C" reads "x", "C++" reads "xxx"
_TEMPLATE = re.compile(r"template\s*<")
_ATTRIBUTES = {"__launch_bounds__", "__attribute__", "__declspec", "alignas", "__align__",
               "__maxnreg__", "__cluster_dims__", "__noinline__", "decltype"}  # fmt: skip


def _strip_prefixes(head: str) -> str:
    """`head` without a leading `extern "..."` and `template <...>`."""
    head = head.strip()
    while True:
        if m := _LINKAGE.match(head):
            head = head[m.end() :].lstrip()
        elif _TEMPLATE.match(head):
            depth, end = 0, len(head)
            for j in range(head.index("<"), len(head)):
                depth += {"<": 1, ">": -1}.get(head[j], 0)
                if depth == 0:
                    end = j
                    break
            head = head[end + 1 :].lstrip()
        else:
            return head


def _kind(head: str) -> str:
    """What a `{` after `head` opens at file scope: "scope" (a namespace or linkage block,
    whose declarations are read one by one), "function" (a body), or "other" (an initializer,
    a class; the declaration goes on to its `;`)."""
    if _LINKAGE.fullmatch(head.strip()) or re.match(r"(inline\s+)?namespace\b", head.strip()):
        return "scope"
    rest = _strip_prefixes(head)
    if re.match(r"(typedef|struct|class|union|enum)\b", rest) or "(" not in rest:
        return "other"
    before_paren = re.sub(r"\boperator\s*[^\s(]*", "operator", rest).split("(", 1)[0]
    return "other" if "=" in before_paren else "function"


def _name(head: str) -> str | None:
    """The declared function's name: the identifier before the first top-level `(` that is not
    an attribute such as `__launch_bounds__(256)`."""
    depth = 0
    for m in re.finditer(r"(\w+)\s*\(|[()]", head):
        if m.group(1) and depth == 0 and m.group(1) not in _ATTRIBUTES:
            return m.group(1)
        depth += 1 if m.group(0).endswith("(") else -1
    return None


@dataclass(frozen=True)
class _Decl:
    """One declaration at file scope (or in a namespace or linkage block)."""

    start: int
    end: int
    name: str | None  # the function it declares or defines
    defines: bool  # it has a body
    linkage: str | None  # `extern "..."` in front of it: "C", "C++" or None
    in_block: str | None  # the `extern "..." {` block around it, if any
    in_namespace: bool


def _decls(
    code: str, a: int, b: int, block: str | None = None, ns: bool = False
) -> Iterator[_Decl]:
    """Every declaration in code[a:b], reading into namespaces and linkage blocks."""
    i = a
    while i < b:
        if code[i].isspace() or code[i] == ";":
            i += 1
            continue
        start, paren, end = i, 0, b
        kind = "other"
        while i < b:
            c = code[i]
            if c in "([":
                paren += 1
            elif c in ")]":
                paren -= 1
            elif c == ";" and paren == 0:
                end = i + 1
                break
            elif c == "{":
                close = _match_close(code, i)
                kind = _kind(code[start:i]) if paren == 0 else "other"
                if kind != "other":
                    end = close + 1
                    break
                i = close
            i += 1
        head = code[start:end]
        if kind == "scope":
            opening = head.index("{")
            linkage = _LINKAGE.fullmatch(head[:opening].strip())
            inner = ("C" if len(linkage.group(1)) == 1 else "C++") if linkage else block
            yield from _decls(code, start + opening + 1, end - 1, inner, ns or not linkage)
        else:
            linkage = _LINKAGE.match(head)
            yield _Decl(start, end, _name(head.split("{", 1)[0]), kind == "function",
                        ("C" if len(linkage.group(1)) == 1 else "C++") if linkage else None,
                        block, ns)  # fmt: skip
        i = end


@dataclass(frozen=True)
class _Prepared:
    includes: list[str]  # the source's `#include` lines, in order
    macros: list[str]  # every name it `#define`s, in order
    body: str  # the rest, with the entry and its fellow definitions out of C linkage


def _prepare(text: str, symbol: str, k: int) -> _Prepared:
    """Read source k: take its `#include` lines out, and give every function it defines (the
    entry among them) C++ linkage, so that the same names in two namespaces do not collide.
    Declarations of functions defined elsewhere (`extern "C" void f(int);`) keep C linkage."""
    masked = _mask(text)
    code = _blank_directives(masked)
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement)
    includes = []
    for m in re.finditer(r"^[ \t]*#[ \t]*include\b.*$", masked, re.M):
        end = m.start() + len(m.group(0).rstrip())  # a comment after it stays in the body
        includes.append(text[m.start() : end].strip())
        edits.append((m.start(), end, ""))
    macros = re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", masked, re.M)
    decls = list(_decls(code, 0, len(code)))
    defined = {d.name for d in decls if d.defines}
    if not any(d.defines and d.name == symbol and not d.in_namespace for d in decls):
        raise MergeError(f"source {k} has no definition of {symbol}()")
    for d in decls:
        if d.name not in defined:
            continue
        prefix = _LINKAGE.match(code, d.start)
        if d.linkage == "C" and prefix:  # extern "C" void f(...) { -> void f(...) {
            edits.append((d.start, prefix.end(), ""))
        if d.in_block == "C":  # extern "C" { ... void f(...) {...} ... }: close the block around f
            edits += [(d.start, d.start, "}\n"), (d.end, d.end, '\nextern "C" {')]
    body = text
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        body = body[:start] + new + body[end:]
    return _Prepared(includes, list(dict.fromkeys(macros)), body)


# -------------------------------------------------------------------------------- merging

_INT_WORDS = {"int", "long", "short", "signed", "unsigned", "size_t", "ssize_t", "ptrdiff_t",
              "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t",
              "uint64_t", "const", "volatile"}  # fmt: skip
_TYPE_WORDS = _INT_WORDS | {"void", "float", "double", "char", "bool", "half", "__half"}


def _params(signature: str, symbol: str) -> list[tuple[str, str]]:
    """(type, name) of each parameter of `signature`, e.g. 'void f(const float* A, int N)'."""
    m = re.fullmatch(r"\s*([^(]*?)\b(\w+)\s*\((.*)\)\s*;?\s*", signature, re.S)
    if not m or not m.group(1).strip():
        raise MergeError(f"cannot read the signature {signature!r}")
    if m.group(2) != symbol:
        raise MergeError(f"the signature {signature!r} is not that of {symbol}()")
    parts, depth, current = [], 0, ""
    for c in m.group(3):
        depth += {"(": 1, "[": 1, "<": 1, ")": -1, "]": -1, ">": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += c
    parts.append(current)
    params = []
    for part in parts:
        p = part.split("=", 1)[0].strip()
        if not p or p == "void":
            continue
        pointer = re.search(r"\(\s*\*\s*(\w+)\s*\)", p)  # void (*callback)(int)
        named = re.fullmatch(r"(.*?)(\w+)((?:\s*\[[^\]]*\])*)", p, re.S)
        if pointer:
            params.append((p, pointer.group(1)))
        elif named and named.group(1).strip() and named.group(2) not in _TYPE_WORDS:
            params.append(((named.group(1) + named.group(3)).strip(), named.group(2)))
        else:
            raise MergeError(f"parameter {p!r} of {signature!r} has no name")
    return params


def _is_int(ctype: str) -> bool:
    if "*" in ctype or "[" in ctype or "(" in ctype:
        return False
    words = [w.removeprefix("std::") for w in re.findall(r"[\w:]+", ctype)]
    return set(words) <= _INT_WORDS and bool(set(words) - {"const", "volatile"})


def merge(sources: list[str], symbol: str, signature: str, rule: Dispatch) -> str:
    """One .cu file: every `#include` line of the two used sources hoisted to the top
    (deduplicated, order kept); each used source's text wrapped in `namespace cm_path<k> { ... }`
    with `extern "C"` removed from its entry definition (and from every other function it
    defines, so that both may define the same names; declarations of functions defined
    elsewhere keep C linkage), followed by `#undef` of every macro that source `#define`d; then
    the dispatcher `extern "C" <signature>` that calls `cm_path<below>::SYMBOL(args)` when
    `<arg> < <threshold>` and `cm_path<above>::SYMBOL(args)` otherwise, with a comment line at
    the top of the file saying which path runs where. `signature` is the entry's C signature
    without extern "C", e.g. 'void vector_add(const float* A, const float* B, float* C, int N)'.
    Raises MergeError if a source has no definition of SYMBOL, or rule.arg is not an int
    parameter of the signature (or the rule names a missing source, or one path twice)."""
    params = _params(signature, symbol)
    types = {name: ctype for ctype, name in params}
    if rule.arg not in types:
        raise MergeError(f"{rule.arg!r} is not a parameter of {signature!r}")
    if not _is_int(types[rule.arg]):
        raise MergeError(f"parameter {rule.arg!r} is a {types[rule.arg]!r}, not an integer")
    for k in (rule.below, rule.above):
        if not 0 <= k < len(sources):
            raise MergeError(f"the rule names path {k}, but there are {len(sources)} sources")
    if rule.below == rule.above:
        raise MergeError(f"the rule runs path {rule.below} on both sides")
    used = sorted({rule.below, rule.above})
    prepared = {k: _prepare(sources[k], symbol, k) for k in used}
    includes: dict[str, str] = {}  # spaces ignored: `#include<a.h>` is `# include <a.h>`
    for k in used:
        for line in prepared[k].includes:
            includes.setdefault(re.sub(r"\s", "", line), line)
    out = [
        f"// cudamaster dispatch: {symbol}() runs path {rule.below} when {rule.arg} < "
        f"{rule.threshold}, else path {rule.above} (predicted weighted speedup "
        f"{rule.predicted:.3g}x)",
        *includes.values(),
        "",
    ]
    for k in used:
        body = prepared[k].body.rstrip("\n")
        undefs = [f"#undef {name}" for name in prepared[k].macros]
        out += [f"namespace cm_path{k} {{", body, f"}}  // namespace cm_path{k}", *undefs, ""]
    call = f"{symbol}({', '.join(name for _, name in params)})"
    out += [
        f'extern "C" {signature.strip().rstrip(";").rstrip()} {{',
        f"    if ({rule.arg} < {rule.threshold}) {{",
        f"        return cm_path{rule.below}::{call};",
        "    } else {",
        f"        return cm_path{rule.above}::{call};",
        "    }",
        "}",
        "",
    ]
    log.info("dispatch: merged paths %s of %s() on %s < %d",
             used, symbol, rule.arg, rule.threshold)  # fmt: skip
    return "\n".join(out)
