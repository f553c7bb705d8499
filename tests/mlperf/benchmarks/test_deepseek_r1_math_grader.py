"""PRM800K's grade_answer as deepseek-r1's MATH500 check calls it, against hand-computed cases."""

from __future__ import annotations

import importlib.util

import pytest

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.deepseek_r1 import math_grader
from cmx.mlperf.benchmarks.deepseek_r1.math_grader import grade_answer, normalize_answer


@pytest.mark.parametrize(("given", "truth", "expected"), [
    ("\\frac{1}{2}", "0.5", True),          # MATH normalisation: 0.5 is \frac{1}{2}
    ("1/2", "\\frac12", True),              # a/b and \frac12 both become \frac{1}{2}
    ("2/4", "\\frac{1}{2}", False),         # an unreduced fraction is not simplified into a match
    ("10", "10.0", True),                   # a float that is an integer
    ("1,000", "1000", True),                # thousands commas
    ("(1,2)", "(1, 2)", True),
    ("[1,2)", "(1,2)", False),              # an interval's brackets must match
    ("6/2", "3", False),                    # an integer answer needs an integer
    ("k = 3", "3", True),                   # a short left-hand side is dropped
    ("5", "5\\text{ cm}", True),            # units after "\text{ "
    ("x^2+2x+1", "(x+1)^2", True),          # sympy: the difference simplifies to 0
    ("x^2+2x", "(x+1)^2", False),
    ("\\text{(B)}", "(B)", True),
    (None, "3", False),
])
def test_grade_answer(given, truth, expected):
    assert grade_answer(given, truth) is expected


def test_normalize_answer_returns_the_stripped_answer_when_a_step_fails():
    # two "\text{ " units: the reference's assert fails inside its try and the answer comes back as it was
    assert normalize_answer(" 3\\text{ m}\\text{ s} ") == "3\\text{ m}\\text{ s}"
    assert normalize_answer("\\text{ 7 }") == "7"


def test_grading_refuses_to_start_without_pylatexenc_rather_than_score_answers_wrong(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pylatexenc" else real(name, *a))
    with pytest.raises(CmxError, match="pylatexenc is not installed"):
        math_grader.require_dependencies()
