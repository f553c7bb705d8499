"""The restricted `when:` evaluator (cmx/recipe/expr.py): what it accepts, what it refuses, never eval."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any

import pytest

from cmx.recipe.expr import (
    Expr,
    ExprEvalError,
    ExprSyntaxError,
    compile_expr,
    evaluate_with,
)


def ev(source: str, inputs: dict[str, Any] | None = None, context: dict[str, Any] | None = None,
       chosen: dict[str, str] | None = None, flags: frozenset[str] = frozenset()) -> bool:
    return evaluate_with(compile_expr(source), inputs or {}, context or {}, chosen or {}, flags)


# --- allowed forms -----------------------------------------------------------------------------

@pytest.mark.parametrize("source, expected", [
    ('context.device == "rocm"', True),
    ('context.device == "cuda"', False),
    ('context.device != "cuda"', True),
    ("inputs.samples < 100", True),
    ("inputs.samples <= 16", True),
    ("inputs.samples > 16", False),
    ("inputs.samples >= 17", False),
    ("1 < inputs.samples < 20", True),
    ("1 < inputs.samples < 10", False),
    ('context.device in ["rocm", "cuda"]', True),
    ('context.device in ("cuda", "cpu")', False),
    ('context.device not in ["cpu"]', True),
    ('"roc" in context.device', True),
    ('context.device == "rocm" and inputs.samples == 16', True),
    ('context.device == "cpu" or inputs.samples == 16', True),
    ('context.device == "cpu" or inputs.samples == 17', False),
    ('not context.device == "cpu"', True),
    ("not inputs.full", True),
    ("inputs.full == false", True),
    ("inputs.full == False", True),
    ("inputs.missing == none", True),
    ("inputs.missing == None", True),
    ("inputs.offset == -3", True),
    ("inputs.ratio == 0.5", True),
    ("true", True),
    ("false", False),
])
def test_allowed_comparisons_and_logic_evaluate_correctly(source: str, expected: bool) -> None:
    inputs = {"samples": 16, "full": False, "missing": None, "offset": -3, "ratio": 0.5}
    assert ev(source, inputs=inputs, context={"device": "rocm"}) is expected


def test_bare_names_look_in_inputs_then_context_then_variation_groups() -> None:
    chosen = {"size": "tiny"}
    assert ev('device == "rocm"', context={"device": "rocm"}, chosen=chosen)
    assert ev("samples == 16", inputs={"samples": 16}, chosen=chosen)
    assert ev('size == "tiny"', chosen=chosen)
    # an input shadows a context key of the same name
    assert ev('device == "input"', inputs={"device": "input"}, context={"device": "ctx"})


def test_variations_group_reads_the_chosen_variation_of_that_group() -> None:
    chosen = {"size": "tiny", "device": "rocm"}
    assert ev('variations.size == "tiny"', chosen=chosen)
    assert not ev('variations.size == "full"', chosen=chosen)
    assert ev("variations.precision == none", chosen=chosen)  # no choice in that group


def test_in_variations_tests_chosen_variations_and_flags() -> None:
    chosen = {"size": "tiny"}
    assert ev('"tiny" in variations', chosen=chosen)
    assert ev('"debug" in variations', chosen=chosen, flags=frozenset({"debug"}))
    assert not ev('"full" in variations', chosen=chosen)
    assert ev('"full" not in variations', chosen=chosen)


def test_compiled_expression_records_every_name_it_reads() -> None:
    expr = compile_expr('inputs.a == 1 and context.device == "x" or variations.size == "t" '
                        'or "f" in variations or bare')
    assert expr.names == frozenset({("inputs", "a"), ("context", "device"), ("variations", "size"),
                                    ("variations", ""), ("", "bare")})


def test_and_or_short_circuit_and_do_not_read_the_rest() -> None:
    read: list[tuple[str, str]] = []

    def lookup(ns: str, name: str) -> Any:
        read.append((ns, name))
        return False

    assert compile_expr("inputs.a and inputs.b").evaluate(lookup) is False
    assert read == [("inputs", "a")]


def test_comparing_incompatible_values_is_an_eval_error_not_a_type_error() -> None:
    with pytest.raises(ExprEvalError, match="cannot compare"):
        ev("inputs.n < 3", inputs={"n": None})


def test_compiled_expression_pickles_and_still_evaluates() -> None:
    # the registry index stores recipes (and their `when:` trees) as pickles
    expr = pickle.loads(pickle.dumps(compile_expr('context.device in ["rocm", "cuda"]')))
    assert isinstance(expr, Expr)
    assert evaluate_with(expr, {}, {"device": "cuda"}, {}, frozenset()) is True


def test_compiled_tree_holds_only_plain_data() -> None:
    def walk(x: Any) -> None:
        assert isinstance(x, (tuple, str, int, float, bool, type(None))), f"unexpected {type(x).__name__} in tree"
        if isinstance(x, tuple):
            for item in x:
                walk(item)

    walk(compile_expr('not (inputs.a == 1 or context.b in ["x", 2]) and "t" in variations').tree)


# --- refused forms -----------------------------------------------------------------------------

@pytest.mark.parametrize("source", [
    "len(inputs.x) == 3",  # function call
    "f()",
    '__import__("os").system("true")',
    "os.system",  # attribute access on another name
    "inputs.__class__.__bases__",  # chained attribute
    "(1).real",
    "inputs.x[0] == 1",  # subscript
    "context['device']",
    "lambda: 1",
    "inputs.n + 1 > 2",  # arithmetic
    "inputs.n * 2",
    "2 ** 1000000",
    "-inputs.n < 0",
    "[x for x in inputs.list]",  # comprehensions
    "{x: 1 for x in y}",
    "(x for x in y)",
    "{1: 2}",  # dict literal
    "a if b else c",
    "(a := 1)",
    'f"{inputs.x}"',
    'b"bytes" == 1',
    "inputs.x is None",  # identity operators
    "inputs.x is not None",
    "[inputs.a, 1]",  # a list of non-literals
    "...",
    "inputs",  # a namespace without a field
    "context",
    "yield 1",
    "await x",
    "x = 1",  # a statement
    "import os",
    "1; 2",
    "",
    "   ",
])
def test_refused_forms_fail_at_compile_time(source: str) -> None:
    with pytest.raises(ExprSyntaxError):
        compile_expr(source)


def test_refusal_message_names_the_offending_part() -> None:
    with pytest.raises(ExprSyntaxError, match=r"os\.system: only inputs\.X, context\.X and variations\.GROUP"):
        compile_expr('os.system == "x"')
    with pytest.raises(ExprSyntaxError, match=r"'len\(inputs\.x\)' is not allowed"):
        compile_expr("len(inputs.x) > 1")


def test_deeply_nested_expression_is_a_syntax_error_not_a_crash() -> None:
    with pytest.raises(ExprSyntaxError, match="nested too deeply"):
        compile_expr("not " * 5000 + "x")


def test_the_nesting_limit_holds_when_a_library_has_raised_pythons_recursion_limit() -> None:
    # CI once compiled `not not ... x` without an error: a module loaded before in the same worker had raised the
    # limit, and only a RecursionError refused it then
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        with pytest.raises(ExprSyntaxError, match="more than 100 levels"):
            compile_expr("not " * 500 + "x")
    finally:
        sys.setrecursionlimit(before)
    assert compile_expr("not " * 99 + "x").evaluate(lambda ns, name: False) is True


def test_side_effect_expression_is_rejected_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    source = f'__import__("pathlib").Path({str(marker)!r}).touch() or true'
    with pytest.raises(ExprSyntaxError):
        compile_expr(source)
    assert not marker.exists()


def test_compile_and_evaluate_never_execute_python_code() -> None:
    """A CPython audit hook sees every eval()/exec() of code ("exec" event): none may happen
    while a `when:` is compiled or evaluated (ast.parse only builds a syntax tree)."""
    events: list[str] = []
    armed = [False]

    def hook(event: str, args: Any) -> None:
        if armed[0] and event in ("exec", "compile", "os.system", "subprocess.Popen", "import"):
            events.append(event)

    sys.addaudithook(hook)  # hooks cannot be removed; this one is inert unless armed
    armed[0] = True
    try:
        eval("1 + 1")
        sanity = list(events)
        events.clear()
        expr = compile_expr('context.device in ["rocm", "cuda"] and not inputs.n < 3 or "tiny" in variations')
        while_compiling = list(events)
        events.clear()
        result = evaluate_with(expr, {"n": 5}, {"device": "rocm"}, {}, frozenset())
        while_evaluating = list(events)
    finally:
        armed[0] = False
    assert "exec" in sanity
    assert "exec" not in while_compiling
    assert result is True
    assert while_evaluating == [], f"evaluation ran or compiled code: {while_evaluating}"
