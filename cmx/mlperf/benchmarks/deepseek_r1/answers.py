"""Answer extraction and the per-subset checks of eval_accuracy.py (mlcommons/inference b66003e, language/deepseek-r1).

The reference parses the whole decoded output: it does not cut the reasoning (`<think>...</think>`)
from the final answer. The prompt ends with `<think>\\n` (the chat template's generation prompt), and
`</think>` is an ordinary added token of DeepSeek-R1's tokenizer, which `skip_special_tokens=True`
keeps, so the text scored is reasoning, `</think>`, then the answer. Each parser takes the *last*
match in that text (the answer comes last), except `parse_code`, which takes the *first* ```python
block, wherever it is (a block drafted in the reasoning wins over the final one), as the reference does.

- GPQA (`parse_multiple_choice(text, 'D')`) and MMLU-Pro (`'J'`): the last `ANSWER` / `FINAL ANSWER`
  followed by a letter (case-insensitive, optional `:`/`=` and parentheses, and then the end or a
  non-letter); for MMLU-Pro only, else the last standalone letter A-J of any case (an English "a"
  counts as A). Correct when it equals the answer letter (upper-cased) and is a valid option.
- MATH500 (`parse_boxed_math`): the content of the last `\\boxed{...}` with balanced braces (None if
  unclosed), graded by PRM800K's `grade_answer` (math_grader.py).
- AIME (`parse_aime_answer`): the last `\\boxed{N}` of digits, else the last `Answer: N`; kept only
  when 0 <= N <= 999; correct when it equals `int(ground_truth)`.
- LiveCodeBench (`parse_code`): the first ```python block, run against the problem's tests
  (cmx.mlperf.scoring.livecodebench).
Text is `str(x).strip()`, with None and NaN as "" (`validate_text_input`).
"""

from __future__ import annotations

import math
import re

from cmx.mlperf.benchmarks.deepseek_r1.math_grader import grade_answer
from cmx.mlperf.benchmarks.kit.accuracy import aime_answer

_CODE = re.compile(r"```python(.*?)```", re.DOTALL)
_LETTER_J = re.compile(r"\b([A-J])\b", re.IGNORECASE)


def text_of(value: object) -> str:
    """eval_accuracy.py `validate_text_input`: None and NaN are "", anything else str() and stripped."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value).strip()


def parse_multiple_choice(text: object, max_option: str = "D") -> str | None:
    text = text_of(text)
    if not text:
        return None
    if text.startswith(("['", '["')) and text.endswith(("']", '"]')):  # a list's repr around the answer
        text = text[2:-2].strip()
    text = text.replace("\\n", "\n").replace("\\'", "'")
    pattern = (rf"\b(?:ANSWER|FINAL\s*ANSWER)\b\s*[:=]?\s*(?:\(?\s*([A-{max_option}])\s*\)?)"
               r"(?:\s*$|[^A-Za-z])")
    matches = list(re.finditer(pattern, text, re.IGNORECASE))
    if matches:
        return matches[-1].group(1).upper()
    if max_option == "J":
        letters = list(_LETTER_J.finditer(text))
        if letters:
            return letters[-1].group(1).upper()
    return None


def parse_boxed_math(text: object) -> str | None:
    text = text_of(text)
    if not text:
        return None
    start = text.rfind("\\boxed{")
    if start == -1:
        return None
    depth = 0
    for i in range(start + 7, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            if depth == 0:
                return text[start + 7:i].strip()
            depth -= 1
    return None


def parse_aime_answer(text: object) -> int | None:
    return aime_answer(text_of(text))


def parse_code(text: object) -> str | None:
    text = text_of(text)
    if not text:
        return None
    match = _CODE.search(text)
    return match.group(1).strip() if match else None


def evaluate_multiple_choice(parsed: str | None, ground_truth: object, valid_options: str) -> bool:
    if not parsed or not ground_truth:
        return False
    parsed, truth = parsed.upper(), str(ground_truth).upper()
    return parsed in valid_options and parsed == truth


def evaluate_math500(parsed: str | None, ground_truth: object) -> bool:
    if not parsed or not ground_truth:
        return False
    parsed = str(parsed).strip()
    if not parsed:
        return False
    return grade_answer(parsed, str(ground_truth))


def evaluate_aime(parsed: int | None, ground_truth: object) -> bool:
    if parsed is None:
        return False
    try:
        return bool(int(parsed) == int(ground_truth))  # type: ignore[call-overload]  # any cell: int() refusing it is False
    except (ValueError, TypeError):
        return False


def parse(subset: str, text: object) -> str | int | None:
    """The answer the reference extracts for a sample of `subset` (a key of dataset.SUBSETS)."""
    if subset == "gpqa":
        return parse_multiple_choice(text, "D")
    if subset == "mmlu_pro":
        return parse_multiple_choice(text, "J")
    if subset == "math500":
        return parse_boxed_math(text)
    if subset == "aime":
        return parse_aime_answer(text)
    if subset == "livecodebench":
        return parse_code(text)
    raise ValueError(f"no scorer for {subset!r}")


def is_correct(subset: str, parsed: str | int | None, ground_truth: object) -> bool:
    """The check of a non-code subset (LiveCodeBench runs programs: cmx.mlperf.scoring.livecodebench)."""
    if subset == "gpqa":
        return evaluate_multiple_choice(parsed, ground_truth, "ABCD")  # type: ignore[arg-type]  # gpqa parses a letter
    if subset == "mmlu_pro":
        return evaluate_multiple_choice(parsed, ground_truth, "ABCDEFGHIJ")  # type: ignore[arg-type]  # mmlu_pro parses a letter
    if subset == "math500":
        return evaluate_math500(parsed, ground_truth)  # type: ignore[arg-type]  # math500 parses text
    if subset == "aime":
        return evaluate_aime(parsed, ground_truth)  # type: ignore[arg-type]  # aime parses an int
    raise ValueError(f"{subset!r} is not graded by comparison")


__all__ = ["evaluate_aime", "evaluate_math500", "evaluate_multiple_choice", "is_correct", "parse",
           "parse_aime_answer", "parse_boxed_math", "parse_code", "parse_multiple_choice", "text_of"]
