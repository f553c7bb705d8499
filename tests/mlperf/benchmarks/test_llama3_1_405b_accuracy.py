"""cmx.mlperf.benchmarks.llama3_1_405b.accuracy against hand-computed values of evaluate-accuracy.py's rules."""

from __future__ import annotations

from array import array

import pytest

from cmx.mlperf.benchmarks.llama3_1_405b.accuracy import evaluate, niah_em, qa_em
from cmx.mlperf.loadgen.accuracy_log import AccuracyError, AccuracyRecord
from cmx.mlperf.scoring.accuracy_txt import format_accuracy_txt, parse_accuracy_txt

U1 = "abcdef12-3456-7890-abcd-ef1234567890"
U2 = "00000000-0000-0000-0000-000000000000"


def test_niah_em_scores_the_characters_of_the_reference_uuid_found_in_the_predicted_one():
    assert niah_em(U1, f"The uuid is {U1}.") == 100.0
    assert niah_em(U1, f"The uuid is {U1.upper()}.") == 100.0  # case-insensitive
    assert niah_em(U1, "no uuid here") == 0.0
    # U1's 36 characters: its 4 dashes and its 2 zeros occur in U2 -> 6/36
    assert niah_em(U1, U2) == round(6 / 36 * 100, 2) == 16.67
    # two predicted uuids, one reference: zip pairs one, the sum is divided by the 2 predicted
    assert niah_em(U1, f"{U1} and {U2}") == 50.0
    # two references, one prediction: only the first reference is paired
    assert niah_em(f"{U1} {U2}", U1) == 100.0
    assert niah_em("", U1) == 0.0  # a prediction but no reference uuid: nothing paired, 0 / 1


def test_qa_em_takes_what_follows_the_last_answer_marker_then_normalises():
    assert qa_em("Paris", "Paris") == 100.0
    assert qa_em("the city of Paris", "Paris") == 100.0  # the prediction is a substring of the label
    assert qa_em("Paris|paris france", "I think PARIS") == 100.0  # whitespace and case removed, entry in it
    assert qa_em("New York", "Answer: maybe. Answer: The answer is new  york") == 100.0
    assert qa_em("Paris", "Answer: Paris is wrong. Answer: Rome") == 0.0  # only after the last marker
    # no space after the colon: the whole text counts, and normalised it still holds the label
    assert qa_em("London", "Answer:London") == 100.0
    assert qa_em("answer", "Answer: Rome") == 0.0  # the marker is cut off before matching
    assert qa_em("a||b", "zzz") == 100.0  # an empty entry is in every answer
    assert qa_em("Rome", "Berlin") == 0.0


def _record(i: int, ids: list[int], seq: int | None = None) -> AccuracyRecord:
    return AccuracyRecord(seq_id=i if seq is None else seq, qsl_idx=i, data=array("i", ids).tobytes())


def test_evaluate_means_each_key_over_its_own_samples_in_first_appearance_order():
    texts = {1: "the cat sat", 2: f"Answer: {U1}", 3: "Answer: Rome", 4: "the cat sat on the mat"}
    references = ["the cat sat on the mat", U1, "Paris", "a dog"]
    metrics = ["rouge", "niah_em", "qa_em", "rouge"]
    records = [_record(1, [2, 9]), _record(0, [1, 9, 9]), _record(2, [3]), _record(3, [4, 9]),
               _record(0, [1], seq=7)]  # a duplicate of qsl_idx 0: dropped

    def decode(ids: list[int]) -> str:
        return texts[ids[0]]

    result = evaluate(records, references, metrics, decode)
    values = result.as_dict()
    assert list(values) == ["exact_match", "rougeL", "gen_len", "gen_num", "gen_tok_len", "tokens_per_sample"]
    assert values["exact_match"] == (100.0 + 0.0) / 2
    # rougeL F of "the cat sat" vs the 6-word reference: LCS 3, P 1, R 1/2 -> 2/3; "the cat sat on the mat" vs
    # "a dog": 0
    assert values["rougeL"] == pytest.approx((200 / 3 + 0) / 2)
    assert values["gen_num"] == 4 and values["gen_tok_len"] == 2 + 3 + 1 + 2
    assert values["tokens_per_sample"] == round(8 / 4, 1)
    assert values["gen_len"] == sum(len(t) for t in texts.values())
    assert result.duplicates == 1
    parsed = parse_accuracy_txt(format_accuracy_txt(values, "0" * 64))
    assert parsed["exact_match"] == 50.0 and parsed["tokens_per_sample"] == 2.0


def test_a_key_no_sample_uses_is_absent_and_a_bad_metric_is_refused():
    values = evaluate([_record(0, [5])], ["x"], ["qa_em"], lambda ids: "x").as_dict()
    assert "rougeL" not in values and values["exact_match"] == 100.0
    with pytest.raises(AccuracyError, match="'bleu'"):
        evaluate([_record(0, [5])], ["x"], ["bleu"], lambda ids: "x")
    with pytest.raises(AccuracyError, match="outside"):
        evaluate([_record(3, [5])], ["x"], ["qa_em"], lambda ids: "x")


def test_sentence_splitting_applies_to_exact_match_as_in_the_reference():
    # postprocess_text joins sentences with newlines before qa_em: "Rome. Paris" becomes "Rome.\nParis", which
    # is not a substring of the label "Rome. Paris", but normalised (whitespace removed) it matches
    values = evaluate([_record(0, [1])], ["Rome. Paris"], ["qa_em"], lambda ids: "Rome. Paris").as_dict()
    assert values["exact_match"] == 100.0
