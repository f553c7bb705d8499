"""gpt-oss-120b's scoring against hand-computed cases, the reference's tricky ones included (eval_accuracy.py,
eval_mlperf_accuracy.py)."""

from __future__ import annotations

import pytest

from cmx.mlperf.benchmarks.gpt_oss_120b.accuracy import (
    SubsetScore,
    UnknownSubset,
    evaluator_for,
    extract_final_section,
    final_score,
    grade,
    parse_aime_answer,
    parse_code,
    parse_multiple_choice,
)

ANALYSIS = "<|channel|>analysis<|message|>Maybe the answer is B. Or \\boxed{12}?<|end|><|start|>assistant"


def test_the_final_channel_is_graded_not_the_reasoning():
    text = f"{ANALYSIS}<|channel|>final<|message|>  C is right.<|return|>"
    assert extract_final_section(text) == "C is right."
    assert parse_multiple_choice(text) == "C"  # the analysis's "B" is a draft


def test_a_corrupted_final_marker_still_opens_the_final_channel():
    assert extract_final_section("<|channel|>final 明<|message|>D<|return|>") == "D"
    assert extract_final_section("<|channel|>final537<|message|>A") == "A"  # no <|return|>: to the end


def test_without_a_final_channel_the_whole_text_is_searched():
    assert extract_final_section("just text") == "just text"
    assert parse_multiple_choice("I think... FINAL ANSWER: (b) done") == "B"


def test_multiple_choice_reads_bold_letters_and_answer_lines():
    assert parse_multiple_choice("<|channel|>final<|message|>**A**<|return|>") == "A"
    assert parse_multiple_choice("<|channel|>final<|message|>The reason is long. Answer: d<|return|>") == "D"
    # a word opening the final section is not a letter answer: "Correct" starts with C but is followed by a letter
    assert parse_multiple_choice("<|channel|>final<|message|>Correct choice is unclear<|return|>") is None
    # E is beyond GPQA's four options
    assert parse_multiple_choice("<|channel|>final<|message|>E<|return|>") is None
    assert parse_multiple_choice("") is None


def test_aime_takes_the_last_boxed_integer_anywhere_even_in_the_reasoning():
    # parse_aime_answer does not look for the final channel: a boxed draft in the analysis counts
    assert parse_aime_answer(f"{ANALYSIS}<|channel|>final<|message|>I am not sure.<|return|>") == 12
    assert parse_aime_answer("\\boxed{7} then \\boxed{ 033 }") == 33
    assert parse_aime_answer("Answer: 250") == 250
    assert parse_aime_answer("Answer: 3.5") is None  # "(?!\\.)" refuses a decimal
    assert parse_aime_answer("\\boxed{1000}") is None  # only 0..999
    assert parse_aime_answer("\\boxed{x+1}") is None


def test_code_comes_from_the_final_sections_last_python_block():
    text = ("<|channel|>analysis<|message|>```python\nprint('draft')\n```<|end|>"
            "<|start|>assistant<|channel|>final<|message|>```python\nprint(1)\n```\n```python\nprint(2)\n```<|return|>")
    assert parse_code(text) == "print(2)"
    assert parse_code("<|channel|>final<|message|>```py\nprint(3)\n```<|return|>") == "print(3)"
    # a final section without code: the whole text is searched, so the analysis's block is taken
    text = "<|channel|>analysis<|message|>```python\nx=1\n```<|end|><|channel|>final<|message|>none"
    assert parse_code(text) == "x=1"
    assert parse_code("no code") is None


def test_rows_are_graded_by_the_first_key_their_dataset_contains():
    assert evaluator_for("GPQA_Diamond").key == "gpqa"
    assert evaluator_for("aime25").kind == "integer"
    assert evaluator_for("livecodebench_v6").kind == "code"
    with pytest.raises(UnknownSubset):
        evaluator_for("math500")  # PRM800K's grader is not part of gpt-oss-120b's sets


def test_the_final_score_weighs_each_set_by_its_repeats():
    # AIME 6/8 right (repeats 8), GPQA 3/5 (repeats 5), LCB 1/3 (repeats 3):
    # (6/8 + 3/5 + 1/3) / (8/8 + 5/5 + 3/3) = (0.75 + 0.6 + 0.3333) / 3 = 56.111 %
    subsets = [SubsetScore("aime25", 6, 8, 8), SubsetScore("gpqa_diamond", 3, 5, 5),
               SubsetScore("livecodebench_v6", 1, 3, 3)]
    assert final_score(subsets) == 56.111
    # unequal sizes: 8 AIME rows all right, 5 GPQA all wrong -> (8/8) / (8/8 + 5/5) = 50 %, not 8/13
    assert final_score([SubsetScore("aime25", 8, 8, 8), SubsetScore("gpqa_diamond", 0, 5, 5)]) == 50.0
    assert final_score([]) == 0.0


def test_grade_counts_answers_runs_code_and_averages_tokens():
    texts = ["<|channel|>final<|message|>\\boxed{42}<|return|>", "<|channel|>final<|message|>B<|return|>",
             "<|channel|>final<|message|>```python\nprint(1)\n```<|return|>", "no code here", "\\boxed{41}"]
    datasets = ["aime25", "gpqa_diamond", "livecodebench_v6", "livecodebench_v6", "aime25"]
    truths = ["42", "B", "q1", "q2", "42"]
    asked: list[tuple[int, str, str]] = []

    def run_code(jobs):
        asked.extend(jobs)
        return {row: True for row, _, _ in jobs}

    result = grade(texts, datasets, truths, [10, 20, 30, 40, 51], run_code)
    assert asked == [(2, "print(1)", "q1")]  # a row with no code is wrong without running anything
    counts = {s.name: (s.correct, s.total, s.repeats) for s in result.subsets}
    assert counts == {"aime25": (1, 2, 8), "gpqa_diamond": (1, 1, 5), "livecodebench_v6": (1, 2, 3)}
    # (1/8 + 1/5 + 1/3) / (2/8 + 1/5 + 2/3) = 0.658333 / 1.116667 = 58.955 %
    assert result.exact_match == 58.955
    assert result.tokens_per_sample == 30.2
    assert result.as_dict() == {"exact_match": 58.955, "tokens_per_sample": 30.2}


def test_a_missing_ground_truth_is_a_wrong_answer():
    result = grade(["\\boxed{5}", "A"], ["aime25", "gpqa_diamond"], ["", ""], [2, 2], lambda jobs: {})
    assert [s.correct for s in result.subsets] == [0, 0]
