"""deepseek-r1's answer extraction and checks against hand-computed cases, the reference's odd ones included
(eval_accuracy.py at mlcommons/inference b66003e)."""

from __future__ import annotations

import pytest

from cmx.mlperf.benchmarks.deepseek_r1.answers import (
    evaluate_aime,
    evaluate_math500,
    evaluate_multiple_choice,
    is_correct,
    parse,
    parse_aime_answer,
    parse_boxed_math,
    parse_code,
    parse_multiple_choice,
    text_of,
)


@pytest.mark.parametrize(("text", "max_option", "expected"), [
    ("The answer is (B) at first.\nANSWER: C", "D", "C"),          # the last ANSWER wins
    ("Final Answer: (d)", "D", "D"),                               # any case, parentheses
    ("answer=c)", "D", "C"),
    ("ANSWER: E", "D", None),                                      # GPQA stops at D and has no fallback
    ("ANSWER: Bold claim", "D", None),                             # a letter followed by letters is a word
    ("ANSWERS: A", "D", None),                                     # ANSWER must end at a word boundary
    ("['ANSWER: A']", "D", "A"),                                   # a list's repr around the text
    ("ANSWER:\\nB", "D", "B"),                                     # a literal backslash-n counts as a newline
    ("I think it is a good one", "J", "A"),                        # MMLU-Pro fallback: the last lone letter, "a"
    ("no letters here 42", "J", None),
    ("", "D", None),
])
def test_multiple_choice_takes_the_last_answer_line_or_mmlu_pros_last_lone_letter(text, max_option, expected):
    assert parse_multiple_choice(text, max_option) == expected


def test_multiple_choice_is_right_only_for_a_valid_option_equal_to_the_truth():
    assert evaluate_multiple_choice("a".upper(), "a", "ABCD") is True
    assert evaluate_multiple_choice("E", "E", "ABCD") is False   # not a GPQA option, even when it matches
    assert evaluate_multiple_choice("B", "C", "ABCD") is False
    assert evaluate_multiple_choice(None, "C", "ABCD") is False


@pytest.mark.parametrize(("text", "expected"), [
    ("first \\boxed{\\frac{1}{2}} then \\boxed{3}", "3"),
    ("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{3}}{2}"),   # nested braces are matched
    ("\\boxed{12", None),                                        # unclosed
    ("\\boxed {5}", None),                                       # a space breaks `\boxed{`
    ("\\boxed{ x }", "x"),
])
def test_boxed_math_is_the_last_balanced_box(text, expected):
    assert parse_boxed_math(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("\\boxed{ 042 }", 42),
    ("Answer: 5 and so \\boxed{1000}", None),  # a box out of 0..999 is None: no fall back to Answer:
    ("Answer: 12.5", None),                    # a decimal is no integer answer
    ("answer:  7", 7),
    ("\\boxed{12} but Answer: 13", 12),        # a box before an Answer: line
    ("\\boxed{-3}", None),
])
def test_aime_takes_a_boxed_integer_then_an_answer_line_in_range(text, expected):
    assert parse_aime_answer(text) == expected


def test_aime_compares_integers_of_the_ground_truth():
    assert evaluate_aime(42, "042") is True
    assert evaluate_aime(7, "7.0") is False  # int("7.0") fails in the reference too
    assert evaluate_aime(None, "7") is False


def test_code_is_the_first_python_block_even_in_the_reasoning():
    text = "<think>\n```python\nprint(1)\n```\n</think>\nFinal:\n```python\nprint(2)\n```"
    assert parse_code(text) == "print(1)"
    assert parse_code("```py\nprint(1)\n```") is None
    assert parse_code("```python3\nx = 1\n```") == "3\nx = 1"  # the reference's regex keeps the 3


def test_the_reasoning_is_not_cut_off_the_last_answer_counts():
    text = "<think>\nMaybe \\boxed{4}? No.\n</think>\nThe answer is \\boxed{5}"
    assert parse("math500", text) == "5" and parse("aime", text) == 5
    assert parse("gpqa", "<think>ANSWER: A</think>\nANSWER: B") == "B"


def test_text_is_stripped_and_missing_values_are_empty():
    assert text_of(None) == "" and text_of(float("nan")) == "" and text_of("  x \n") == "x"
    assert parse("math500", None) is None


def test_math500_grades_with_prm800k():
    assert evaluate_math500("\\frac12", "\\frac{1}{2}") is True
    assert evaluate_math500("", "1") is False
    assert is_correct("math500", "2/4", "\\frac{1}{2}") is False
