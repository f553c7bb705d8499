"""gpt-oss-120b's accuracy as eval_mlperf_accuracy.py computes it: AIME and GPQA answers parsed from the final
channel, LiveCodeBench run.

mlcommons/inference b66003e, language/gpt-oss-120b/: the output ids are decoded with special
tokens kept (`detokenize`: skip_special_tokens=False), so the harmony markers stay in the text;
each row is graded by the evaluator its `dataset` names (eval_accuracy.py `DATASET_EVALUATORS`,
the first key contained in the lower-cased name); the final score weighs each sub-dataset by its
repeats (`DATASET_REPEATS`: the accuracy set holds AIME 8 times, GPQA 5, LiveCodeBench 3):
sum(correct / repeats) / sum(total / repeats) × 100, printed for the checker as
`'exact_match': {:.3f}`. The reference prints no tokens_per_sample, but the checker's upper limit
(constants.py accuracy-upper-limit TOKENS_PER_SAMPLE 1.1 × 9999) reads one: cmx adds the mean
output length (the `token_count` eval_mlperf_accuracy.py records per row), rounded to 1 place.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cmx.mlperf.benchmarks.kit.accuracy import aime_answer

# eval_mlperf_accuracy.py DATASET_REPEATS (1 for any other dataset)
DATASET_REPEATS = {"aime25": 8, "gpqa_diamond": 5, "livecodebench_v6": 3}


# --- the harmony format's final channel (eval_accuracy.py) ---------------------------------------

_FINAL = re.compile(r"<\|channel\|>final[^<]*<\|message\|>(.*?)(?:<\|return\|>|$)", re.DOTALL)


def extract_final_section(text: str) -> str:
    """The final channel's message (up to <|return|> or the end); the whole text when there is none.

    The analysis channel (the reasoning) may hold draft answers, so it is not graded where a final
    channel exists. "final" may be followed by stray characters before <|message|> (corrupted
    markers such as `final 明`), as the reference's pattern allows.
    """
    text = text.strip()
    if not text:
        return ""
    match = _FINAL.search(text)
    return match.group(1).strip() if match else text


def strip_markdown_bold(text: str) -> str:
    return re.sub(r"\*\*([^*]+)\*\*", r"\1", text)


# --- parsers (eval_accuracy.py) -------------------------------------------------------------------

def parse_multiple_choice(text: str, max_option: str = "D") -> str | None:
    """The chosen letter: a letter opening the final section, else `Answer: X` there, else the last
    `ANSWER`/`FINAL ANSWER` in the whole text; for 10 options, a lone letter in the final section."""
    text = text.strip()
    if not text:
        return None
    final = strip_markdown_bold(extract_final_section(text))
    if final.startswith(("['", '["')) and final.endswith(("']", '"]')):
        final = final[2:-2].strip()
    final = final.replace(r"\n", "\n").replace(r"\'", "'")
    single = re.match(rf"^[^a-zA-Z]*([A-{max_option}])(?:[^a-zA-Z]|$)", final.strip(), re.IGNORECASE)
    if single:
        return single.group(1).upper()
    answer = re.search(rf"\b(?:Answer|ANSWER)\s*[:.]?\s*([A-{max_option}])\b", final, re.IGNORECASE)
    if answer:
        return answer.group(1).upper()
    full = text.replace(r"\n", "\n").replace(r"\'", "'")
    pattern = rf"\b(?:ANSWER|FINAL\s*ANSWER)\b\s*[:=]?\s*(?:\(?\s*([A-{max_option}])\s*\)?)(?:\s*$|[^A-Za-z])"
    matches = list(re.finditer(pattern, full, re.IGNORECASE))
    if matches:
        return matches[-1].group(1).upper()
    if max_option == "J":
        lone = list(re.finditer(rf"\b([A-{max_option}])\b", final, re.IGNORECASE))
        if lone:
            return lone[-1].group(1).upper()
    return None


def parse_aime_answer(text: str) -> int | None:
    """The last \\boxed{digits} anywhere in the text (analysis included, as the reference does), else
    the last `Answer: digits` not followed by a point; only 0 to 999 counts."""
    return aime_answer(text.strip())


def parse_code(text: str) -> str | None:
    """The program: the last ```python block of the final section, else its last ``` block (a
    leading `python`/`py` line dropped); failing those, the same two searches over the whole text."""
    text = text.strip()
    if not text:
        return None
    final = extract_final_section(text)
    places = (final, text) if final != text else (text,)
    for place in places:
        python = list(re.finditer(r"```python(.*?)```", place, re.DOTALL))
        if python:
            return python[-1].group(1).strip()
        plain = list(re.finditer(r"```(.*?)```", place, re.DOTALL))
        if plain:
            return re.sub(r"^(?:python|py)\s*\n", "", plain[-1].group(1).strip(), flags=re.IGNORECASE)
    return None


# --- graders ------------------------------------------------------------------------------------

def evaluate_multiple_choice(parsed: str | None, truth: str, valid: str) -> bool:
    if not parsed or not truth:
        return False
    return parsed.upper() in valid and parsed.upper() == truth.upper()


def evaluate_aime(parsed: int | None, truth: str) -> bool:
    if parsed is None:
        return False
    try:
        return int(parsed) == int(truth)
    except (TypeError, ValueError):  # int("12.0") fails there too: a wrong answer
        return False


@dataclass(frozen=True)
class Evaluator:
    """How one kind of row is graded: `parse` extracts the answer, `kind` says how it is checked."""

    key: str
    kind: str  # "choice", "integer" or "code"
    parse: Callable[[str], object]
    options: str = ""


# eval_accuracy.py DATASET_EVALUATORS, in its order (the first key contained in the name wins).
# math500 (PRM800K's grader) is left out: no gpt-oss-120b set has such rows, and a row naming it
# is refused rather than graded some other way.
EVALUATORS = (
    Evaluator("gpqa", "choice", lambda t: parse_multiple_choice(t, "D"), "ABCD"),
    Evaluator("mmlu_pro", "choice", lambda t: parse_multiple_choice(t, "J"), "ABCDEFGHIJ"),
    Evaluator("aime", "integer", parse_aime_answer),
    Evaluator("livecodebench", "code", parse_code),
    Evaluator("mmlu", "choice", lambda t: parse_multiple_choice(t, "J"), "ABCDEFGHIJ"),
)


class UnknownSubset(ValueError):
    """A row's dataset has no evaluator (eval_accuracy.py get_evaluator raises too)."""


def evaluator_for(dataset: str) -> Evaluator:
    name = dataset.lower()
    for evaluator in EVALUATORS:
        if evaluator.key in name:
            return evaluator
    raise UnknownSubset(f"no evaluator for dataset {dataset!r}")


# --- the score ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SubsetScore:
    name: str
    correct: int
    total: int
    repeats: int


@dataclass(frozen=True)
class GptOssAccuracy:
    """The score (eval_mlperf_accuracy.py's final_score_percentage), the mean output length, and per-set counts."""

    exact_match: float
    tokens_per_sample: float
    subsets: tuple[SubsetScore, ...]

    def as_dict(self) -> dict[str, float]:
        """What accuracy.txt prints: the checker reads exact_match and tokens_per_sample."""
        return {"exact_match": self.exact_match, "tokens_per_sample": self.tokens_per_sample}


def final_score(subsets: Sequence[SubsetScore]) -> float:
    """sum(correct / repeats) / sum(total / repeats) × 100, rounded as the reference prints it (3 places)."""
    score = sum(s.correct / s.repeats for s in subsets)
    best = sum(s.total / s.repeats for s in subsets)
    return round(score / best * 100, 3) if best > 0 else 0.0


def grade(texts: Sequence[str], datasets: Sequence[str], truths: Sequence[str], token_counts: Sequence[int],
          run_code: Callable[[Sequence[tuple[int, str, str]]], dict[int, bool]]) -> GptOssAccuracy:
    """Grade decoded outputs. `run_code` gets (row, program, question_id) for every LiveCodeBench row
    with a program and a ground truth and returns which passed (see livecodebench.py)."""
    correct: dict[str, int] = {}
    total: dict[str, int] = {}
    code_jobs: list[tuple[int, str, str]] = []
    for i, (text, dataset, truth) in enumerate(zip(texts, datasets, truths, strict=False)):
        evaluator = evaluator_for(dataset)
        total[dataset] = total.get(dataset, 0) + 1
        correct.setdefault(dataset, 0)
        parsed = evaluator.parse(text)
        if evaluator.kind == "code":
            if parsed is not None and truth:
                code_jobs.append((i, str(parsed), truth))
            continue
        # the evaluator's kind says what its parser returns: a letter for "choice", an int for "aime"
        ok = (evaluate_multiple_choice(parsed, truth, evaluator.options)  # type: ignore[arg-type]  # a letter
              if evaluator.kind == "choice" else evaluate_aime(parsed, truth))  # type: ignore[arg-type]  # an int
        correct[dataset] += int(ok)
    passed = run_code(code_jobs) if code_jobs else {}
    for i, _, _ in code_jobs:
        correct[datasets[i]] += int(passed.get(i, False))
    subsets = tuple(SubsetScore(n, correct[n], total[n], DATASET_REPEATS.get(n, 1)) for n in sorted(total))
    mean_tokens = round(sum(token_counts) / len(token_counts), 1) if token_counts else 0.0
    return GptOssAccuracy(final_score(subsets), mean_tokens, subsets)


__all__ = ["DATASET_REPEATS", "EVALUATORS", "GptOssAccuracy", "SubsetScore", "UnknownSubset", "evaluator_for",
           "extract_final_section", "final_score", "grade", "parse_aime_answer", "parse_code",
           "parse_multiple_choice"]
