"""Safe evaluation of the small arithmetic formulas used in task.toml.

Formulas see the case parameters (and derived ones such as ``nnz``) plus ``e``, the element
size in bytes. Integers stay Python integers, so products such as nnz*K never wrap. A
comparison (``k <= L``, chained as in Python) gives 1 or 0: the unseen shape space's
constraints are formulas too.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping

from .errors import UserError

_BINOPS: dict[type[ast.operator], Callable[[float | int, float | int], float | int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCS: dict[str, Callable[..., float | int]] = {
    "log2": lambda x: math.log2(x),
    "ilog2": lambda x: int(x).bit_length() - 1,
    "floor": math.floor,
    "ceil": math.ceil,
    "min": min,
    "max": max,
    "popcount": lambda x: bin(int(x)).count("1"),
    "sqrt": math.sqrt,
}
_COMPARE: dict[type[ast.cmpop], Callable[[float | int, float | int], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


def _eval(node: ast.AST, names: Mapping[str, float | int], text: str) -> float | int:
    if isinstance(node, ast.Expression):
        return _eval(node.body, names, text)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            known = ", ".join(sorted(names))
            raise UserError(f"formula {text!r} uses unknown name {node.id!r} (known: {known})")
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, names, text), _eval(node.right, names, text))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, names, text)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCS
        and not node.keywords
    ):
        return _FUNCS[node.func.id](*(_eval(a, names, text) for a in node.args))
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        left = _eval(node.left, names, text)  # chained as in Python: a <= b < c
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _eval(right_node, names, text)
            if not _COMPARE[type(op)](left, right):
                return 0
            left = right
        return 1
    raise UserError(f"formula {text!r}: unsupported expression {ast.dump(node)[:60]}")


def parse(text: str) -> ast.Expression:
    """Parse a formula, raising UserError on a syntax error."""
    try:
        return ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise UserError(f"formula {text!r} is not valid: {exc.msg}") from None


def names_in(text: str) -> set[str]:
    """The names a formula uses (function names excluded)."""
    tree = parse(text)
    funcs = {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - funcs


def evaluate(text: str, names: Mapping[str, float | int]) -> float | int:
    """Evaluate one formula over the given names."""
    return _eval(parse(text), names, text)


def evaluate_shape(text: str, names: Mapping[str, float | int]) -> tuple[int, ...]:
    """Evaluate a comma-separated shape formula such as ``"M, K"`` to a tuple of ints."""
    dims = [evaluate(part, names) for part in text.split(",") if part.strip()]
    out = []
    for d in dims:
        if int(d) != d or d < 0:
            raise UserError(f"shape {text!r} gives a non-integer or negative dimension {d}")
        out.append(int(d))
    return tuple(out)
