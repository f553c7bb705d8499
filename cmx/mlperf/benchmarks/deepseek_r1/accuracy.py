"""The deepseek-r1 accuracy metric: what `language/deepseek-r1/eval_accuracy.py` computes from an accuracy log.

The reference (mlcommons/inference b66003e), `process_mlperf_log_accuracy` then `process_dataframe`
and `print_evaluation_results`:

1. Reads the log; a record whose `qsl_idx` was seen before is dropped (the first counts), one
   outside the dataset is skipped. `data` is int32 ids; `tok_model_output_len` is their number
   (the end id vLLM keeps included).
2. Decodes them with DeepSeek-R1's tokenizer, `batch_decode(skip_special_tokens=True)`.
3. Per sample, the subset's parser extracts an answer and its check grades it (answers.py;
   LiveCodeBench runs the code: cmx.mlperf.scoring.livecodebench); `prompt_accuracy` is 100.0 or 0.0, and 0.0
   when nothing was extracted or the ground truth is missing.
4. Prints `{'exact_match': mean prompt_accuracy, 'tokens_per_sample': mean tok_model_output_len,
   'num-samples': rows}`: neither mean is rounded.

The checker reads exact_match and TOKENS_PER_SAMPLE (constants.py ACC_PATTERN); cmx prints plain
numbers (cmx.mlperf.scoring.accuracy_txt).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.mlperf.benchmarks.deepseek_r1.answers import is_correct, parse
from cmx.mlperf.benchmarks.deepseek_r1.math_grader import require_dependencies
from cmx.mlperf.loadgen.accuracy_log import AccuracyError, AccuracyRecord, read_accuracy_log
from cmx.mlperf.scoring.decode import reference_decoder
from cmx.mlperf.scoring.livecodebench import TEST_TIMEOUT_S, Problem, grade

if TYPE_CHECKING:
    from cmx.mlperf.benchmarks.deepseek_r1.dataset import DeepSeekDataset


@dataclass(frozen=True)
class Graded:
    """One sample as the reference grades it."""

    qsl_idx: int
    subset: str
    extracted: object
    correct: bool
    tokens: int


@dataclass(frozen=True)
class AccuracyResult:
    """eval_accuracy.py's printed result, with the per-sample grades behind it."""

    exact_match: float
    tokens_per_sample: float
    samples: int
    graded: tuple[Graded, ...] = field(default=(), repr=False)
    skipped: int = 0  # records of a qsl_idx seen before or outside the dataset

    def as_dict(self) -> dict[str, float | int]:
        return {"exact_match": float(self.exact_match), "tokens_per_sample": float(self.tokens_per_sample),
                "num-samples": int(self.samples)}

    def by_subset(self) -> dict[str, tuple[int, int]]:
        """(correct, samples) per subset, as the reference logs them."""
        out: dict[str, tuple[int, int]] = {}
        for g in self.graded:
            right, total = out.get(g.subset, (0, 0))
            out[g.subset] = (right + int(g.correct), total + 1)
        return out


def evaluate(records: Sequence[AccuracyRecord], answers: Sequence[object], subsets: Sequence[str],
             decode: Callable[[list[int]], str], problems: Callable[[], dict[str, Problem]], *,
             timeout_s: int = TEST_TIMEOUT_S, jobs: int = 1) -> AccuracyResult:
    """Grade `records` against `answers` and `subsets` (indexed by qsl_idx). `problems` gives LiveCodeBench's
    problems by question_id; it is called only when some sample is a code one."""
    if jobs < 1:
        raise AccuracyError(f"jobs must be 1 or more, not {jobs}")
    if len(answers) != len(subsets):
        raise AccuracyError(f"{len(answers)} answers but {len(subsets)} subsets: they come from one dataset")
    seen: set[int] = set()
    rows: list[tuple[int, str, str | int | None, int, object]] = []  # qsl_idx, subset, extracted, tokens, truth
    skipped = 0
    for record in records:
        if record.qsl_idx in seen or not 0 <= record.qsl_idx < len(answers):
            skipped += 1
            continue
        seen.add(record.qsl_idx)
        text = decode(record.tokens)
        subset = subsets[record.qsl_idx]
        rows.append((record.qsl_idx, subset, parse(subset, text), len(record.tokens), answers[record.qsl_idx]))
    if not rows:
        raise AccuracyError("there are no records to evaluate",
                            hint="read them with read_accuracy_log from an accuracy-mode run")
    if any(r[1] == "math500" for r in rows):
        require_dependencies()
    correct = [False] * len(rows)
    code_rows = []
    for n, (_, subset, extracted, _, truth) in enumerate(rows):
        if extracted is None or _missing(truth):
            continue
        if subset == "livecodebench":
            code_rows.append(n)
        else:
            correct[n] = is_correct(subset, extracted, truth)
    if code_rows:
        correct = _grade_code(rows, code_rows, correct, problems, timeout_s, jobs)
    graded = tuple(Graded(q, s, e, c, t) for (q, s, e, t, _), c in zip(rows, correct, strict=True))
    accuracy = [100.0 if c else 0.0 for c in correct]
    return AccuracyResult(_mean(accuracy), _mean([float(r[3]) for r in rows]), len(rows), graded, skipped)


# a row's extracted answer is Any: parse() gives str | int | None, and a livecodebench row's is its code or None
def _grade_code(rows: list[tuple[int, str, Any, int, object]], code_rows: list[int],
                correct: list[bool], problems: Callable[[], dict[str, Problem]],
                timeout_s: int, jobs: int) -> list[bool]:
    # evaluate_livecodebench: no code, or an unknown question_id, is wrong (scoring.livecodebench.grade)
    passed = grade([(rows[n][2], str(rows[n][4])) for n in code_rows], problems(), timeout_s=timeout_s,
                   workers=jobs)
    out = list(correct)
    for n, ok in zip(code_rows, passed, strict=False):
        out[n] = ok
    return out


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _mean(values: list[float]) -> float:
    """pandas' mean of a float64 column: numpy's (pairwise) sum divided by the count."""
    import numpy as np

    return float(np.sum(np.asarray(values, dtype=np.float64)) / len(values))


def score_log(accuracy_log: Path, dataset: DeepSeekDataset, tokenizer_dir: Path, *, jobs: int = 1) -> AccuracyResult:
    """BENCHMARK.score: an accuracy run's log against `dataset`'s answers; its code rows run LiveCodeBench's tests
    (the file beside the dataset), read only when some row is a code one."""
    from cmx.mlperf.benchmarks.deepseek_r1.livecodebench import load_tests

    n = len(dataset)
    answers = [dataset.answer(i) for i in range(n)]
    subsets = [dataset.subset(i) for i in range(n)]
    tests = dataset.tests_path
    return evaluate(read_accuracy_log(accuracy_log), answers, subsets, reference_decoder(tokenizer_dir),
                    lambda: load_tests(tests), jobs=jobs)


__all__ = ["AccuracyResult", "Graded", "evaluate", "score_log"]
