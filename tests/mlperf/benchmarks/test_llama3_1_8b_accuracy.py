"""llama3.1-8b accuracy: evaluation.py's metric on hand-computed cases, the log's dtype, decoding, and accuracy.txt
as the checker reads it.

The ROUGE values below are worked out by hand from rouge-score's definitions (its tokenizer
keeps lowercase alphanumeric runs, and stems only words longer than three letters, so these
short words are compared as they are). A byte "tokenizer" (token id = ASCII code, 200 = EOS)
stands in for Llama 3's where the tokenizer is not what is tested.
"""

from __future__ import annotations

import hashlib
import json
import re
from array import array
from pathlib import Path

import pytest

from cmx.mlperf.benchmarks.llama3_1_8b.accuracy import AccuracyResult, evaluate
from cmx.mlperf.loadgen.accuracy_log import (
    AccuracyError,
    AccuracyLogError,
    read_accuracy_log,
)
from cmx.mlperf.rounds import load_round
from cmx.mlperf.scoring.accuracy_txt import (
    CHECKER_NAMES,
    format_accuracy_txt,
    meets_targets,
    parse_accuracy_txt,
)
from cmx.mlperf.scoring.decode import clean_up_tokenization, reference_decoder

EOS = 200
REFERENCES = ["a b c d", "x y", " cat dog. sun sky. "]
# qsl_idx -> prediction; the second record of qsl 0 is a duplicate the reference skips
RECORDS = [(2, "sun sky.  cat dog."), (0, "a b c e"), (0, "x y"), (1, "y x")]
SHA = hashlib.sha256(b"log").hexdigest()

# tools/submission/submission_checker/constants.py (ACC_PATTERN) and checks/accuracy_check.py, as they read accuracy.txt
ACC_PATTERN = {
    "ROUGE1": r".*'rouge1':\s+'?([\d.]+)'?.*",
    "ROUGE2": r".*'rouge2':\s+'?([\d.]+)'?.*",
    "ROUGEL": r".*'rougeL':\s+'?([\d.]+)'?.*",
    "ROUGELSUM": r".*'rougeLsum':\s+'?([\d.]+)'?.*",
    "GEN_LEN": r".*'gen_len':\s([\d.]+).*",
}
V6_0_TARGETS = {"ROUGE1": 38.7792 * 0.99, "ROUGE2": 15.9075 * 0.99, "ROUGEL": 24.4957 * 0.99,
                "ROUGELSUM": 35.793 * 0.99, "GEN_LEN": 8167644 * 0.9}
V6_0_UPPER = {"GEN_LEN": 8167644 * 1.1}


def decode(ids: list[int]) -> str:
    return bytes(i for i in ids if i != EOS).decode("ascii")


def write_log(path: Path, records: list[tuple[int, str]], typecode: str = "i") -> Path:
    entries = []
    for seq_id, (qsl_idx, text) in enumerate(records):
        ids = array(typecode, [*map(ord, text), EOS])
        entries.append({"seq_id": seq_id, "qsl_idx": qsl_idx, "data": ids.tobytes().hex().upper(),
                        "token_count": len(ids)})
    path.write_text(json.dumps(entries))
    return path


def checker_passes(text: str) -> tuple[bool, dict[str, str]]:
    """accuracy_check.py's accuracy_result_check for llama3.1-8b (closed division), on accuracy.txt's lines."""
    seen, valid, found, hash_val = dict.fromkeys(ACC_PATTERN, False), True, {}, None
    for line in text.splitlines(keepends=True):
        for key, pattern in ACC_PATTERN.items():
            m = re.match(pattern, line)
            if m:
                found[key] = m.group(1)
                seen[key] = float(m.group(1)) >= V6_0_TARGETS[key]
                valid &= seen[key]
            m = re.match(r"^hash=([\w\d]+)$", line)
            if m:
                hash_val = m.group(1)
            m = re.match(ACC_PATTERN["GEN_LEN"], line)
            if m and float(m.group(1)) > V6_0_UPPER["GEN_LEN"]:
                valid = False
    return valid and all(seen.values()) and hash_val is not None, found


# --- the metric ----------------------------------------------------------------------------------

def test_scores_match_the_hand_computed_rouge_and_the_duplicate_is_skipped(tmp_path: Path) -> None:
    records = read_accuracy_log(write_log(tmp_path / "mlperf_log_accuracy.json", RECORDS))
    result = evaluate(records, REFERENCES, decode)
    # per sample (F-measures), A "a b c e" vs "a b c d": R1 3/4, R2 2/3, L 3/4, Lsum 3/4;
    # B "y x" vs "x y": R1 1, R2 0, L 1/2, Lsum 1/2; C, split into two lines each: R1 1, R2 2/3,
    # L 1/2 (one common subsequence of two words), Lsum 1 (each reference line found whole)
    assert (result.rouge1, result.rouge2, result.rougeL, result.rougeLsum) == (91.6667, 44.4444, 58.3333, 75.0)
    # characters after post-processing: "a b c e" 7, "y x" 3, "sun sky.\ncat dog." 17 (two spaces became a newline)
    assert (result.gen_len, result.gen_num, result.duplicates) == (27, 3, 1)
    assert list(result.as_dict()) == ["rouge1", "rouge2", "rougeL", "rougeLsum", "gen_len", "gen_num"]


def test_the_first_record_of_a_sample_counts_not_the_last(tmp_path: Path) -> None:
    swapped = [(0, "x y"), (0, "a b c e")]  # now the first record of qsl 0 is the wrong answer
    result = evaluate(read_accuracy_log(write_log(tmp_path / "log.json", swapped)), REFERENCES, decode)
    assert result.rouge1 == 0.0 and result.gen_num == 1 and result.duplicates == 1


def test_an_int64_log_scores_the_same_when_read_as_int64_and_is_refused_as_int32(tmp_path: Path) -> None:
    as_int32 = evaluate(read_accuracy_log(write_log(tmp_path / "32.json", RECORDS)), REFERENCES, decode)
    records64 = read_accuracy_log(write_log(tmp_path / "64.json", RECORDS, typecode="q"))
    assert evaluate(records64, REFERENCES, decode, dtype="int64") == as_int32
    with pytest.raises(AccuracyLogError, match="holds int64 token ids") as info:
        evaluate(records64, REFERENCES, decode)
    assert 'dtype="int64"' in (info.value.hint or "")


def test_an_int32_log_read_as_int64_is_refused_not_decoded_into_noise(tmp_path: Path) -> None:
    even = read_accuracy_log(write_log(tmp_path / "even.json", [(1, "y x")]))  # 3 ids and EOS: 16 bytes, 2 "int64s"
    with pytest.raises(AccuracyLogError, match="not a token id"):
        evaluate(even, REFERENCES, decode, dtype="int64")
    uneven = read_accuracy_log(write_log(tmp_path / "uneven.json", [(0, "ab")]))  # 2 ids and EOS: 12 bytes
    with pytest.raises(AccuracyLogError, match="not a whole number of int64 token ids"):
        evaluate(uneven, REFERENCES, decode, dtype="int64")


def test_a_qsl_idx_outside_the_dataset_names_the_record_and_the_dataset(tmp_path: Path) -> None:
    records = read_accuracy_log(write_log(tmp_path / "log.json", [(7, "a")]))
    with pytest.raises(AccuracyError, match="qsl_idx 7, outside the 3 references") as info:
        evaluate(records, REFERENCES, decode)
    assert "13,368" in (info.value.hint or "")


def test_a_custom_sentence_splitter_changes_rouge_lsum_and_gen_len_only(tmp_path: Path) -> None:
    records = read_accuracy_log(write_log(tmp_path / "log.json", RECORDS))
    unsplit = evaluate(records, REFERENCES, decode, split=lambda text: [text])
    assert (unsplit.rouge1, unsplit.rouge2, unsplit.rougeL) == (91.6667, 44.4444, 58.3333)
    assert unsplit.rougeLsum == 58.3333 and unsplit.gen_len == 28  # C stays one line, with its two spaces


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(AccuracyError, match="dtype must be int32 or int64"):
        evaluate([], REFERENCES, decode, dtype="int16")  # type: ignore[arg-type]  # the wrong dtype, on purpose
    with pytest.raises(AccuracyError, match="no records to evaluate"):
        evaluate([], REFERENCES, decode)


# --- decoding as the reference does ---------------------------------------------------------------

def test_clean_up_tokenization_is_transformers_4_46s() -> None:
    assert clean_up_tokenization("He said , \"I do n't know .\" It 's ok ! Why ?") == \
        "He said, \"I don't know.\" It's ok! Why?"
    assert clean_up_tokenization("a ' b we 're they 've I 'm") == "a'b we're they've I'm"


def test_the_reference_decoder_drops_special_tokens_and_cleans_up_as_the_tokenizer_config_says(tmp_path: Path) -> None:
    from tokenizers import Tokenizer

    from cmx.mlperf.benchmarks.llama3_1_8b.tiny import make_tiny_llama3

    tiny = make_tiny_llama3(tmp_path / "model", seed=0)
    tok = Tokenizer.from_file(str(tiny.path / "tokenizer.json"))
    text = "Summary : the river is long . It 's old ."
    ids = [tiny.bos_id, *tok.encode(text, add_special_tokens=False).ids, tiny.eot_id]
    assert reference_decoder(tiny.path)(ids) == "Summary : the river is long. It's old."
    config = tiny.path / "tokenizer_config.json"
    config.write_text(config.read_text().replace('"clean_up_tokenization_spaces": true',
                                                 '"clean_up_tokenization_spaces": false'))
    assert reference_decoder(tiny.path)(ids) == text
    with pytest.raises(AccuracyError, match=r"has no tokenizer.json"):
        reference_decoder(tmp_path)


# --- accuracy.txt ---------------------------------------------------------------------------------

PASSING = AccuracyResult(rouge1=38.9012, rouge2=16.0034, rougeL=24.6001, rougeLsum=35.9123, gen_len=8167000,
                         gen_num=13368)


def test_accuracy_txt_passes_the_checkers_patterns_targets_and_upper_limit() -> None:
    text = format_accuracy_txt(PASSING, SHA)
    ok, found = checker_passes(text)
    assert ok and found == {"ROUGE1": "38.9012", "ROUGE2": "16.0034", "ROUGEL": "24.6001", "ROUGELSUM": "35.9123",
                            "GEN_LEN": "8167000"}
    assert set(found) == {CHECKER_NAMES[m] for m in Targets().metrics}
    assert text.endswith(f"\n\nhash={SHA}\n")
    assert parse_accuracy_txt(text) == {**PASSING.as_dict(), "hash": SHA}


@pytest.mark.parametrize(("change", "reason"), [
    ({"rougeLsum": 35.0}, "ROUGE-Lsum"),  # below 35.793 x 0.99 = 35.43507
    ({"gen_len": 7_000_000}, "below"),  # below 8167644 x 0.9
    ({"gen_len": 9_000_000}, "above the maximum"),  # above 8167644 x 1.1
])
def test_a_result_that_misses_a_target_fails_the_checker_and_meets_targets_says_which(change: dict,
                                                                                     reason: str) -> None:
    result = AccuracyResult(**{**PASSING.as_dict(), **change})
    assert not checker_passes(format_accuracy_txt(result, SHA))[0]
    [shortfall] = meets_targets(result, Targets())
    assert reason in shortfall
    assert meets_targets(PASSING, Targets()) == []
    assert meets_targets(parse_accuracy_txt(format_accuracy_txt(PASSING, SHA)), Targets()) == []


def test_numpy_values_are_printed_as_plain_numbers_the_checker_can_read() -> None:
    np = pytest.importorskip("numpy")
    # what evaluation.py prints under numpy 2: gen_len = np.sum(...) shows as np.int64(...), which GEN_LEN misses
    assert re.match(ACC_PATTERN["GEN_LEN"], repr({"gen_len": np.sum([8167000])})) is None
    typed = AccuracyResult(rouge1=np.float64(38.9012), rouge2=np.float64(16.0034), rougeL=np.float64(24.6001),
                           rougeLsum=np.float64(35.9123), gen_len=np.int64(8167000), gen_num=np.int64(13368))
    text = format_accuracy_txt(typed, SHA)
    assert "np." not in text and text == format_accuracy_txt(PASSING, SHA) and checker_passes(text)[0]


def test_a_missing_value_is_named_and_a_bad_hash_is_refused() -> None:
    assert meets_targets({"rouge1": 40.0, "rouge2": 17.0, "rougeL": 25.0, "gen_len": 8167644}, Targets()) == \
        ["ROUGE-Lsum is missing"]
    with pytest.raises(AccuracyError, match="is not a sha256"):
        format_accuracy_txt(PASSING, "ABC")


def Targets():
    """The v6.0 closed targets of llama3.1-8b, from the rounds data (constants.py's numbers)."""
    return load_round("v6.0").benchmark("llama3.1-8b").accuracy

