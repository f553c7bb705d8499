"""GSM8K exact match as language/mixtral-8x7b/evaluate-accuracy.py grades it: the answer number pulled out of the text.

The reference (mlcommons/inference b66003e), per GSM8K sample:

1. the decoded output is cut at the first "\\nQ:" (the model starting a new few-shot question);
2. `find_number`: if "The answer is" occurs, the first number after its *last* occurrence; if
   there is none there (or no delimiter), the last number of the whole text; else "";
3. `maybe_remove_comma` drops every "," ("5,600" -> "5600");
4. `try_float` of it and of `gt_output`; a prediction that is no number counts as wrong, and
   so does a ground truth that is none (None == x is False); otherwise float equality.

A number is `-?[\\d,]*\\.?\\d+`: optional minus, digits and commas, an optional point, digits.
So "3." reads as "3", ".5" as ".5", "1,2,3" as "123" and "$-7" as "-7".
"""

from __future__ import annotations

import re

ANSWER_DELIMITER = "The answer is"  # evaluate-accuracy.py find_number's default
_NUMBER = re.compile(r"-?[\d,]*\.?\d+", re.MULTILINE | re.DOTALL | re.IGNORECASE)


def find_numbers(text: str) -> list[str]:
    """evaluate-accuracy.py `find_numbers`: every number in the text, in order."""
    return _NUMBER.findall(text)


def find_number(text: str, answer_delimiter: str = ANSWER_DELIMITER) -> str:
    """evaluate-accuracy.py `find_number`: the most relevant number of the text, or ""."""
    if answer_delimiter in text:
        numbers = find_numbers(text.split(answer_delimiter)[-1])
        if numbers:
            return numbers[0]
    numbers = find_numbers(text)
    return numbers[-1] if numbers else ""


def try_float(text: str) -> float | None:
    """evaluate-accuracy.py `try_float`: float(text), or None when it is not a number."""
    try:
        return float(text)
    except (ValueError, TypeError, OverflowError):
        return None


def extract_answer(prediction: str) -> str:
    """The number the reference compares for one decoded output (commas removed), or ""."""
    return find_number(prediction.split("\nQ:")[0]).replace(",", "")


def is_correct(prediction: str, ground_truth: str) -> bool:
    """Whether the reference counts this GSM8K answer as correct."""
    predicted = try_float(extract_answer(prediction))
    if predicted is None:
        return False
    return try_float(ground_truth) == predicted


def gsm8k_accuracy(predictions: list[str], ground_truths: list[str]) -> float:
    """`100.0 * correct / total`, as the reference computes result["gsm8k"] (not rounded)."""
    if len(predictions) != len(ground_truths):
        raise ValueError(f"{len(predictions)} predictions for {len(ground_truths)} ground truths")
    if not predictions:
        raise ValueError("no GSM8K samples to grade")
    correct = sum(is_correct(p, g) for p, g in zip(predictions, ground_truths, strict=True))
    return 100.0 * correct / len(predictions)


__all__ = ["ANSWER_DELIMITER", "extract_answer", "find_number", "find_numbers", "gsm8k_accuracy", "is_correct",
           "try_float"]
