"""Qwen3-VL's scorer against what multimodal/qwen3-vl's evaluation.py computes: the strict reply parsing
(pydantic's model_validate_json of a three-field model with extra keys forbidden: the test builds that model
with pydantic and compares it with cmx's parser reply for reply), the category hierarchical F1 on hand-made
replies (the figures worked out in the comments), and accuracy.txt."""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path

import pytest

from cmx.mlperf.benchmarks.qwen3_vl.accuracy import (
    CATEGORY_PAD,
    category_levels,
    evaluate,
    format_accuracy_txt,
    hierarchical_f1,
    parse_reply,
)
from cmx.mlperf.loadgen.accuracy_log import AccuracyError, AccuracyRecord

CHECKER_F1 = r'\{.*"f1":\s*([\d\.]+).*\}'  # constants.py ACC_PATTERN["F1_HIERARCHICAL"]
GOOD = '{"category": "Apparel > Shirts > Polo Shirts", "brand": "acme", "is_secondhand": false}'

REPLIES = [
    GOOD,
    f"  {GOOD}\n",                                                    # surrounding whitespace: parsed
    f"```json\n{GOOD}\n```",                                          # a code fence: unparsable
    f"Here it is: {GOOD}",                                            # text around it: unparsable
    '{"category": "A", "brand": "b", "is_secondhand": false, "brands": ["b"]}',  # an extra key
    '{"category": "A", "brand": "b"}',                                # a missing key
    '{"category": null, "brand": "b", "is_secondhand": true}',        # a null
    '{"category": 7, "brand": "b", "is_secondhand": true}',           # a number for a string
    '{"category": "A", "brand": "b", "is_secondhand": "yes"}',        # lax booleans
    '{"category": "A", "brand": "b", "is_secondhand": "Off"}',
    '{"category": "A", "brand": "b", "is_secondhand": 1}',
    '{"category": "A", "brand": "b", "is_secondhand": 2}',
    '{"category": "A", "brand": "b", "is_secondhand": "maybe"}',
    '{"category": "A", "brand": "b", "is_secondhand": NaN}',
    '{"category": "A", "brand": "b", "is_secondhand": true} {}',      # two values
    '[]', '', 'null', '"text"',
    '{"category": "A", "category": "B", "brand": "b", "is_secondhand": true}',  # a repeated key: the last wins
]


def pydantic_parse(text: str):
    """ProductMetadata's validation as the reference does it: a pydantic model of the three fields, extra keys
    forbidden, lax mode, model_validate_json."""
    pydantic = pytest.importorskip("pydantic")

    class Product(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid")
        category: str
        brand: str
        is_secondhand: bool

    try:
        return Product.model_validate_json(text)
    except pydantic.ValidationError:
        return None


@pytest.mark.parametrize("text", REPLIES)
def test_a_reply_parses_exactly_when_pydantics_strict_schema_validation_accepts_it(text: str):
    ours, theirs = parse_reply(text), pydantic_parse(text)
    assert (ours is None) == (theirs is None), text
    if ours is not None:
        assert (ours.category, ours.brand, ours.is_secondhand) == (theirs.category, theirs.brand, theirs.is_secondhand)


def test_random_replies_parse_as_pydantic_parses_them():
    rng = random.Random(0)
    values = ['"A > B"', '"x"', "true", "false", "0", "1", "2", '"no"', '"T"', "null", "1.0", "[]", "{}", '" yes "']
    keys = ["category", "brand", "is_secondhand", "extra"]
    for _ in range(400):
        chosen = rng.sample(keys, rng.randint(0, 4))
        text = "{" + ", ".join(f'"{k}": {rng.choice(values)}' for k in chosen) + "}"
        assert (parse_reply(text) is None) == (pydantic_parse(text) is None), text


def test_the_category_matches_are_the_common_prefix_of_stripped_levels():
    assert category_levels("A > B > C", "A > B > D") == (2, 3, 3)
    assert category_levels("A >  B ", "A > B > C") == (2, 2, 3)  # each level stripped
    assert category_levels("B > A", "A > B") == (0, 2, 2)  # a mismatch at the top ends the matching
    assert category_levels("A>B", "A > B") == (0, 1, 2)  # the separator is " > "
    assert category_levels("", "A") == (0, 1, 1)


def test_the_hierarchical_f1_is_micro_over_every_reply():
    # matches 3 + 1 = 4, predicted 3 + 2 = 5, true 3 + 3 = 6: hP 0.8, hR 2/3, F1 = 2*0.8*(2/3)/(0.8+2/3) = 8/11
    f1 = hierarchical_f1([("A > B > C", "A > B > C"), ("A > X", "A > B > C")])
    assert f1 == pytest.approx(8 / 11)
    assert hierarchical_f1([("X", "A")]) == 0.0 and hierarchical_f1([]) == 0.0


def _record(i: int, qsl_idx: int, text: str) -> AccuracyRecord:
    return AccuracyRecord(seq_id=i, qsl_idx=qsl_idx, data=text.encode())


def test_an_unparsable_reply_counts_as_padding_as_deep_as_the_truth_and_repeats_count():
    truths = ["Apparel > Shirts > Polo Shirts", "Home > Kitchen"]
    fenced = f"```json\n{GOOD}\n```"
    result = evaluate([_record(0, 0, GOOD), _record(1, 1, fenced), _record(2, 0, GOOD)], truths)
    # matches 3 + 0 + 3 = 6; predicted 3 + 2 (padding of the truth's depth) + 3 = 8; true 3 + 2 + 3 = 8: F1 0.75
    assert (result.f1, result.replies, result.unparsable) == (0.75, 3, 1)
    assert CATEGORY_PAD not in truths[1]
    with pytest.raises(AccuracyError, match="outside the 2 rows"):
        evaluate([_record(0, 5, GOOD)], truths)
    with pytest.raises(AccuracyError, match="not UTF-8 text"):
        evaluate([AccuracyRecord(0, 0, b"\xff\xfe")], truths)


def test_accuracy_txt_is_the_evaluators_result_and_its_hash_then_the_logs():
    text = format_accuracy_txt({"f1": 0.75}, "a" * 64)
    line = json.dumps({"f1": 0.75}, sort_keys=True)
    assert text == f"Results\n\n{line}\n\nhash={hashlib.sha256(line.encode()).hexdigest()}\nhash={'a' * 64}\n"
    matched = [re.match(CHECKER_F1, row) for row in text.splitlines()]
    assert [float(m.group(1)) for m in matched if m] == [0.75]


def test_cmx_reads_the_f1_as_the_checker_does_and_finds_the_logs_hash_among_the_hash_lines():
    from cmx.mlperf.rounds import load_round
    from cmx.mlperf.scoring.accuracy_txt import hash_lines, meets_targets, parse_accuracy_txt

    text = format_accuracy_txt({"f1": 0.7788}, "b" * 64)
    values = parse_accuracy_txt(text)
    assert values["f1"] == 0.7788 and values["hash"] != "b" * 64  # the checker's first hash= is the result's own
    assert hash_lines(text)[-1] == "b" * 64
    targets = load_round("v6.1").benchmark("qwen3-vl-235b-a22b").accuracy
    assert meets_targets(values, targets) and not meets_targets(parse_accuracy_txt(
        format_accuracy_txt({"f1": 0.79}, "b" * 64)), targets)


def test_a_text_log_is_read_byte_by_byte(tmp_path: Path):
    from cmx.mlperf.loadgen.accuracy_log import read_accuracy_log

    log = tmp_path / "mlperf_log_accuracy.json"
    log.write_text(json.dumps([{"seq_id": 0, "qsl_idx": 0, "data": b"abc".hex().upper()}]))
    assert read_accuracy_log(log, item_size=1)[0].data == b"abc"
    with pytest.raises(AccuracyError, match="not a whole number of int32 token ids"):
        read_accuracy_log(log)
