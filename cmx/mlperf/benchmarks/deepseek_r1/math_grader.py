"""PRM800K's MATH answer grader, as eval_accuracy.py's `evaluate_math500` calls it: `grade_answer(given, truth)`.

Reproduced from openai/prm800k at 7ecc794703b2877f63226f2477a49b34f9b25163 (the submodule
language/deepseek-r1/submodules/prm800k of mlcommons/inference b66003e), prm800k/grading/grader.py
and math_normalize.py (MIT licence, Copyright (c) 2023 OpenAI). An answer is correct when

1. Hendrycks' MATH normalisation (`normalize_answer`: strip \\text{}, \\left/\\right, units after
   "\\text{ ", degrees, dollars, percent; fix \\frac12, \\sqrt3, a/b and 0.5) gives the same string; or
2. PRM800K's own normalisation (`_normalize`: units, "million", thousands commas, LaTeX to text with
   pylatexenc, lower case, integers as integers) gives the same string; or
3. both split into the same number of tuple/interval elements with the same brackets, and every pair
   is equal: unreduced fractions must match exactly, an integer needs an integer, anything else
   sympy must simplify the difference to 0 (skipped for expressions sympy might hang on: more than
   two unknown letters, `^{`, `^(`, stacked or long powers).

Every exception the reference swallows with a bare `except` is swallowed here too (as `Exception`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
from typing import TYPE_CHECKING

from cmx.errors import CmxError

if TYPE_CHECKING:
    import sympy

_BAD_SUBSTRINGS = ("^{", "^(")
_BAD_REGEXES = (r"\^[0-9]+\^", r"\^[0-9][0-9]+")
_TUPLE_CHARS = "()[]"
_UNITS = ("degree", "cm", "centimeter", "meter", "mile", "second", "minute", "hour", "day", "week", "month",
          "year", "foot", "feet", "inch", "yard")
_TEXT = re.compile(r"^\\text\{(?P<text>.+?)\}$")
_COMMA_THOUSANDS = re.compile(r"(\d)(,)(\d\d\d)($|\D)")
_MIXED_NUMBER = re.compile(r"([0-9]) +([0-9])")
_FRACTION = re.compile(r"^-?[0-9]+.?/0*[1-9][0-9]*.?$")


def require_dependencies() -> None:
    """The grader's LaTeX and algebra packages must be there: the reference swallows their failures as a wrong
    answer, so a missing one would lower the score silently."""
    missing = [name for name in ("sympy", "pylatexenc") if importlib.util.find_spec(name) is None]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise CmxError(f"MATH500 answers cannot be graded: {' and '.join(missing)} {verb} not installed",
                       hint="pip install 'cmx-bench[mlperf]' (it brings sympy and pylatexenc), then score again")


# --- math_normalize.py (Hendrycks' MATH) ---------------------------------------------------------

def normalize_answer(answer: str | None) -> str | None:
    if answer is None:
        return None
    answer = answer.strip()
    try:
        m = _TEXT.search(answer)
        if m is not None:
            answer = m.group("text").strip()
        return _strip_string(answer)
    except Exception:  # noqa: BLE001 (as the reference: the \text{}-stripped answer when a later step fails)
        return answer


def _fix_fracs(string: str) -> str:
    pieces = string.split("\\frac")
    out = pieces[0]
    for piece in pieces[1:]:
        out += "\\frac"
        if piece[0] == "{":  # an IndexError on "\frac" at the end propagates, as in the reference
            out += piece
            continue
        if len(piece) < 2:
            return string
        a, b = piece[0], piece[1]
        rest = piece[2:]
        out += "{" + a + "}{" + b + "}" + rest if b != "{" else "{" + a + "}" + b + rest
    return out


def _fix_a_slash_b(string: str) -> str:
    if len(string.split("/")) != 2:
        return string
    a_text, b_text = string.split("/")
    try:
        a, b = int(a_text), int(b_text)
        if string != f"{a}/{b}":
            return string
    except ValueError:
        return string
    return "\\frac{" + str(a) + "}{" + str(b) + "}"


def _remove_right_units(string: str) -> str:
    if "\\text{ " in string:
        splits = string.split("\\text{ ")
        if len(splits) != 2:
            raise ValueError("more than one unit")  # the reference's assert, caught by normalize_answer
        return splits[0]
    return string


def _fix_sqrt(string: str) -> str:
    if "\\sqrt" not in string:
        return string
    splits = string.split("\\sqrt")
    out = splits[0]
    for split in splits[1:]:
        out += "\\sqrt{" + split[0] + "}" + split[1:] if split[0] != "{" else "\\sqrt" + split
    return out


def _strip_string(string: str) -> str:
    string = string.replace("\n", "").replace("\\!", "").replace("\\\\", "\\")
    string = string.replace("tfrac", "frac").replace("dfrac", "frac")
    string = string.replace("\\left", "").replace("\\right", "")
    string = string.replace("^{\\circ}", "").replace("^\\circ", "")
    string = string.replace("\\$", "")
    string = _remove_right_units(string)
    string = string.replace("\\%", "")
    string = string.replace(" .", " 0.").replace("{.", "{0.")
    if len(string) == 0:
        return string
    if string[0] == ".":
        string = "0" + string
    if len(string.split("=")) == 2 and len(string.split("=")[0]) <= 2:  # "k = 3" -> "3"
        string = string.split("=")[1]
    string = _fix_sqrt(string)
    string = string.replace(" ", "")
    string = _fix_fracs(string)
    if string == "0.5":
        string = "\\frac{1}{2}"
    return _fix_a_slash_b(string)


# --- grader.py (PRM800K) -------------------------------------------------------------------------

def _sympy_parse(expr: str) -> sympy.Expr:
    from sympy.parsing import sympy_parser

    return sympy_parser.parse_expr(expr.replace("^", "**"), transformations=(
        (*sympy_parser.standard_transformations, sympy_parser.implicit_multiplication_application)))


def _parse_latex(expr: str) -> str:
    from pylatexenc import latex2text

    expr = expr.replace("\\tfrac", "\\frac").replace("\\dfrac", "\\frac").replace("\\frac", " \\frac")
    expr = latex2text.LatexNodes2Text().latex_to_text(expr)
    pairs = (("√", "sqrt"), ("π", "pi"), ("∞", "inf"), ("∪", "U"), ("·", "*"), ("×", "*"))  # noqa: RUF001 (the union sign, meant)
    for symbol, name in pairs:
        expr = expr.replace(symbol, name)
    return expr.strip()


def _is_float(num: str) -> bool:
    try:
        float(num)
        return True
    except ValueError:
        return False


def _is_int(x: float) -> bool:
    try:
        return abs(x - round(x)) <= 1e-7
    except Exception:  # noqa: BLE001 (the reference's grader: a value that is no number is not an integer)
        return False


def _is_frac(expr: str) -> bool:
    return bool(_FRACTION.search(expr))


def _str_is_int(x: str) -> bool:
    try:
        value = float(_strip_properly_formatted_commas(x))
        return abs(value - round(value)) <= 1e-7
    except Exception:  # noqa: BLE001 (the reference's grader: a text that is no number is not an integer)
        return False


def _str_to_int(x: str) -> int:
    return int(float(x.replace(",", "")))


def _strip_properly_formatted_commas(expr: str) -> str:
    while True:  # "1,000,000" -> "1000000", but not the commas of a tuple
        stripped = _COMMA_THOUSANDS.sub(r"\1\3\4", expr)
        if stripped == expr:
            return stripped
        expr = stripped


def _normalize(expr: str | None) -> str | None:
    if expr is None:
        return None
    m = _TEXT.search(expr)
    if m is not None:
        expr = m.group("text")
    expr = expr.replace("\\%", "%").replace("\\$", "$").replace("$", "").replace("%", "")
    expr = expr.replace(" or ", " , ").replace(" and ", " , ")
    expr = expr.replace("million", "*10^6").replace("billion", "*10^9").replace("trillion", "*10^12")
    for unit in _UNITS:
        expr = re.sub(f"{unit}(es)?(s)? *(\\^[0-9]+)?", "", expr)
    expr = re.sub(r"\^ *\\circ", "", expr)
    if len(expr) > 0 and expr[0] == "{" and expr[-1] == "}":
        expr = expr[1:-1]
    expr = re.sub(r",\\! *", "", expr)
    if _is_float(expr) and _is_int(float(expr)):
        expr = str(round(float(expr)))
    if "\\" in expr:
        with contextlib.suppress(Exception):  # the reference's grader keeps the text LaTeX cannot parse
            expr = _parse_latex(expr)
    expr = re.sub("- *", "-", expr)  # mixed numbers and negative signs
    expr = _MIXED_NUMBER.sub(r"\1+\2", expr)  # "7 3/4" -> "7+3/4"
    expr = expr.replace(" ", "").replace("{", "").replace("}", "").lower()
    if _str_is_int(expr):
        expr = str(_str_to_int(expr))
    return expr


def _unknown_letters(expr: str) -> int:
    return len({c for c in expr.replace("sqrt", "").replace("frac", "") if c.isalpha()})


def _should_allow_eval(expr: str) -> bool:
    if _unknown_letters(expr) > 2:
        return False
    if any(bad in expr for bad in _BAD_SUBSTRINGS):
        return False
    return not any(re.search(bad, expr) for bad in _BAD_REGEXES)


def _equal_under_sympy(truth: str, given: str) -> bool:
    try:
        expr = f"({truth})-({given})"
        if _should_allow_eval(expr):
            import sympy

            return bool(sympy.simplify(_sympy_parse(expr)) == 0)
    except Exception:  # noqa: BLE001 (the reference's grader: what sympy cannot parse or simplify is not equal)
        pass
    return False


def _split_tuple(expr: str) -> list[str]:
    expr = _strip_properly_formatted_commas(expr)
    if len(expr) == 0:
        return []
    if (len(expr) > 2 and expr[0] in _TUPLE_CHARS and expr[-1] in _TUPLE_CHARS
            and all(ch not in expr[1:-1] for ch in _TUPLE_CHARS)):
        return [elem.strip() for elem in expr[1:-1].split(",")]
    return [expr]


def grade_answer(given_answer: str | None, ground_truth: str) -> bool:
    """PRM800K grader.py `grade_answer`."""
    if given_answer is None:
        return False
    if normalize_answer(ground_truth) == normalize_answer(given_answer):
        return True
    truth, given = _normalize(ground_truth), _normalize(given_answer)
    if truth is None:
        return False
    if truth == given:
        return True
    if not given:
        return False
    truth_elems, given_elems = _split_tuple(truth), _split_tuple(given)
    if len(truth_elems) > 1 and (truth[0] != given[0] or truth[-1] != given[-1]):
        return False
    if len(truth_elems) != len(given_elems):
        return False
    for t, g in zip(truth_elems, given_elems, strict=True):
        if _is_frac(t) and _is_frac(g):
            correct = t == g  # unreduced fractions are not simplified into a match
        elif _str_is_int(t) != _str_is_int(g):
            correct = False  # an integer answer needs an integer, not sympy's opinion
        else:
            correct = _equal_under_sympy(t, g)
        if not correct:
            return False
    return True


__all__ = ["grade_answer", "normalize_answer", "require_dependencies"]
