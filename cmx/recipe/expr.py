"""Restricted `when:` expressions: comparisons, and/or/not, `in`, literals and names. Never eval."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

# compiled trees name operators by text so that unpickling one does not import `ast`
_OP_NAMES = {"Eq": "==", "NotEq": "!=", "Lt": "<", "LtE": "<=", "Gt": ">", "GtE": ">=",
             "In": "in", "NotIn": "not in"}
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "in": lambda a, b: a in b,
    "not in": lambda a, b: a not in b,
}
_NAMESPACES = ("inputs", "context", "variations")
# how deeply an expression may nest: far beyond any real `when:`, and far below Python's recursion limit, which
# a library loaded in the same process may have raised (so that limit alone would not refuse `not not ... x`)
MAX_DEPTH = 100
# a compiled node: (kind, operands...), nested; what each operand is depends on the kind (see _convert)
Tree = tuple[Any, ...]


class ExprSyntaxError(ValueError):
    """The text is not an allowed expression; the message names the offending part."""


class ExprEvalError(ValueError):
    """An allowed expression could not be evaluated on these values (say, None < 3)."""


@dataclass(frozen=True)
class Expr:
    """A compiled `when:` expression.

    `names` holds every name it reads: ("inputs", x), ("context", x), ("variations", group)
    for qualified names, ("", x) for bare names (resolved by the caller: inputs, then
    context, then variation groups), and ("variations", "") for the set of chosen
    variations.
    """

    source: str
    tree: Tree
    names: frozenset[tuple[str, str]]

    def evaluate(self, lookup: Callable[[str, str], Any]) -> bool:
        """Evaluate with `lookup(namespace, name)` supplying values; returns a bool."""
        return bool(_eval(self.tree, lookup))


@lru_cache(maxsize=2048)
def compile_expr(source: str) -> Expr:
    """Parse and check an expression; raise ExprSyntaxError for anything not allowed.

    Memoized: the result is immutable, and registries repeat the same conditions
    (`device == "rocm"`) across many recipes.
    """
    if not isinstance(source, str) or not source.strip():
        raise ExprSyntaxError("an expression must be a non-empty string")
    import ast  # only when compiling: evaluation and unpickled trees do not need it

    try:
        node = ast.parse(source.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ExprSyntaxError(f"not an expression: {exc.msg}") from None
    except (RecursionError, MemoryError):  # the parser's stack overflows on `not not ... x`
        raise ExprSyntaxError("the expression is nested too deeply") from None
    names: set[tuple[str, str]] = set()
    try:
        return Expr(source, _convert(node, names, 0), frozenset(names))
    except RecursionError:
        raise ExprSyntaxError("the expression is nested too deeply") from None


def _convert(node: Any, names: set[tuple[str, str]], depth: int) -> Tree:
    import ast

    if depth > MAX_DEPTH:
        raise ExprSyntaxError(f"the expression is nested too deeply (more than {MAX_DEPTH} levels)")
    depth += 1

    if isinstance(node, ast.BoolOp):
        kind = "and" if isinstance(node.op, ast.And) else "or"
        return (kind, tuple(_convert(v, names, depth) for v in node.values))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return ("not", _convert(node.operand, names, depth))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool):
        return ("const", -node.operand.value)
    if isinstance(node, ast.Compare):
        ops = []
        for op, right in zip(node.ops, node.comparators, strict=True):  # ast pairs each op with one operand
            op_name = _OP_NAMES.get(type(op).__name__)
            if op_name is None:
                raise ExprSyntaxError(f"operator {type(op).__name__} is not allowed")
            ops.append((op_name, _convert(right, names, depth)))
        return ("cmp", _convert(node.left, names, depth), tuple(ops))
    if isinstance(node, ast.Constant):
        if node.value is None or isinstance(node.value, (str, int, float, bool)):
            return ("const", node.value)
        raise ExprSyntaxError(f"literal {node.value!r} is not allowed")
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = tuple(_convert(e, names, depth) for e in node.elts)
        if any(item[0] != "const" for item in items):
            raise ExprSyntaxError("list items must be literals")
        return ("const", tuple(item[1] for item in items))
    if isinstance(node, ast.Name):
        if node.id in ("true", "false", "none"):
            return ("const", {"true": True, "false": False, "none": None}[node.id])
        if node.id == "variations":
            names.add(("variations", ""))
            return ("name", "variations", "")
        if node.id in _NAMESPACES:
            raise ExprSyntaxError(f"{node.id!r} needs a field: {node.id}.NAME")
        names.add(("", node.id))
        return ("name", "", node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        base = node.value.id
        if base not in _NAMESPACES:
            raise ExprSyntaxError(f"{base}.{node.attr}: only inputs.X, context.X and variations.GROUP are allowed")
        names.add((base, node.attr))
        return ("name", base, node.attr)
    raise ExprSyntaxError(f"{_src(node)!r} is not allowed (only comparisons, and/or/not, in, literals, names)")


def _src(node: Any) -> str:
    import ast

    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 # pragma: no cover - only names the node in an error; unparse handles every parsed node
        return type(node).__name__


def _eval(tree: Tree, lookup: Callable[[str, str], Any]) -> Any:
    kind = tree[0]
    if kind == "const":
        return tree[1]
    if kind == "name":
        return lookup(tree[1], tree[2])
    if kind == "and":
        return all(_eval(t, lookup) for t in tree[1])
    if kind == "or":
        return any(_eval(t, lookup) for t in tree[1])
    if kind == "not":
        return not _eval(tree[1], lookup)
    left = _eval(tree[1], lookup)
    for op, right_tree in tree[2]:
        right = _eval(right_tree, lookup)
        try:
            ok = _COMPARE[op](left, right)
        except TypeError:
            raise ExprEvalError(f"cannot compare {left!r} with {right!r}") from None
        if not ok:
            return False
        left = right
    return True


def evaluate_with(expr: Expr, inputs: Mapping[str, Any], context: Mapping[str, Any],
                  chosen: Mapping[str, str], flags: frozenset[str]) -> bool:
    """Evaluate `expr` over a step's inputs, context, chosen group variations and flags."""
    all_chosen = frozenset(chosen.values()) | flags

    def lookup(namespace: str, name: str) -> Any:
        if namespace == "variations":
            return all_chosen if not name else chosen.get(name)
        if namespace == "inputs":
            return inputs.get(name)
        if namespace == "context":
            return context.get(name)
        if name in inputs:
            return inputs[name]
        if name in context:
            return context[name]
        return chosen.get(name)

    return expr.evaluate(lookup)
