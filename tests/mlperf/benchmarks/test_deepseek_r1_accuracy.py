"""deepseek-r1's metric (eval_accuracy.py): exact_match and tokens_per_sample, hand-computed."""

from __future__ import annotations

from array import array

import pytest

from cmx.mlperf.benchmarks.deepseek_r1.accuracy import evaluate
from cmx.mlperf.loadgen.accuracy_log import AccuracyError, AccuracyRecord
from cmx.mlperf.scoring.livecodebench import Problem
from cmx.mlperf.scoring.sandbox import Program, SandboxUnavailable, run_program

TEXTS = {0: "<think>\nhmm</think>\\boxed{42}", 1: "ANSWER: B", 2: "so \\boxed{\\frac12}", 3: "it is a",
         4: "```python\nprint(sum(map(int, input().split())))\n```", 5: "no code", 6: "```python\nprint(0)\n```"}


def decode(ids: list[int]) -> str:
    return TEXTS[ids[0]]


def record(seq: int, qsl: int, tokens: list[int]) -> AccuracyRecord:
    return AccuracyRecord(seq_id=seq, qsl_idx=qsl, data=array("i", tokens).tobytes())


def no_problems() -> dict[str, Problem]:
    raise AssertionError("no code sample: the problems are not read")


def test_exact_match_and_tokens_per_sample_are_plain_means_over_unique_samples():
    answers = ["42", "C", "\\frac{1}{2}", "A"]
    subsets = ["aime", "gpqa", "math500", "mmlu_pro"]
    records = [record(0, 0, [0, 0, 0]), record(1, 1, [1] * 5), record(2, 2, [2, 2]), record(3, 3, [3] * 4),
               record(4, 0, [1]),      # a second answer to sample 0: the first counts
               record(5, 9, [0])]      # outside the dataset: skipped
    result = evaluate(records, answers, subsets, decode, no_problems)
    assert result.as_dict() == {"exact_match": 75.0, "tokens_per_sample": 3.5, "num-samples": 4}
    assert [g.correct for g in result.graded] == [True, False, True, True] and result.skipped == 2
    assert result.by_subset() == {"aime": (1, 1), "gpqa": (0, 1), "math500": (1, 1), "mmlu_pro": (1, 1)}


def test_a_missing_ground_truth_scores_zero_and_no_records_is_an_error():
    result = evaluate([record(0, 0, [0])], [None], ["aime"], decode, no_problems)
    assert result.exact_match == 0.0 and result.graded[0].extracted == 42
    with pytest.raises(AccuracyError, match="no records"):
        evaluate([], ["1"], ["aime"], decode, no_problems)


def test_code_samples_pass_only_with_code_a_known_problem_and_every_test_passed():
    try:
        run_program(Program("python", "print(1)"))
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox here: {exc}")
    problems = {"sum": Problem("sum", ("1 2\n",), ("3\n",), None)}
    records = [record(0, 0, [4]), record(1, 1, [4]), record(2, 2, [5]), record(3, 3, [6])]
    answers = ["sum", "unknown-id", "sum", "sum"]
    result = evaluate(records, answers, ["livecodebench"] * 4, decode, lambda: problems, timeout_s=5)
    assert [g.correct for g in result.graded] == [True, False, False, False]
    assert result.exact_match == 25.0 and result.tokens_per_sample == 1.0
