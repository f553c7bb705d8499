"""cmx.mlperf.loadgen.accuracy_log: LoadGen accuracy logs, ROUGE as the llama2-70b reference scores it, accuracy.txt,
truncation."""

from __future__ import annotations

import hashlib
import json
import re
import struct
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from rouge_score import rouge_scorer

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.llama2_70b.accuracy import AccuracyResult, evaluate
from cmx.mlperf.loadgen.accuracy_log import (
    AccuracyError,
    AccuracyLogError,
    AccuracyRecord,
    is_truncated_accuracy_log,
    read_accuracy_log,
    truncate_accuracy_log,
)
from cmx.mlperf.rounds import load_round
from cmx.mlperf.scoring.accuracy_txt import (
    CHECKER_PATTERNS,
    format_accuracy_txt,
    meets_targets,
    parse_accuracy_txt,
    read_accuracy_txt,
)
from cmx.mlperf.scoring.rouge import postprocess_text, split_sentences

# A real published llama2-70b-99 result (AMD, MLPerf Inference v6.0 sample tree); read, never copied.
SAMPLE = Path("/work/shared/mlperf-sample/closed/AMD/results/8xMI300X_2xEPYC_9575F/llama2-70b-99")
needs_sample = pytest.mark.skipif(not SAMPLE.is_dir(), reason="the MLPerf sample submission is not on this machine")

EOS = 2
SPECIAL = {0, 1, EOS}  # <unk>, <s>, </s>
SHA = "ab" * 32


CLOSED_99 = load_round("v6.0").benchmark("llama2-70b-99").accuracy


class Vocab:
    """A word-level tokenizer: ids 0-2 are special tokens, which decode skips (skip_special_tokens)."""

    def __init__(self) -> None:
        self.words = ["<unk>", "<s>", "</s>"]

    def encode(self, text: str) -> list[int]:
        ids = []
        for word in text.split(" "):
            if word not in self.words:
                self.words.append(word)
            ids.append(self.words.index(word))
        return ids

    def decode(self, ids: list[int]) -> str:
        return " ".join(self.words[i] for i in ids if i not in SPECIAL)


def hex_tokens(tokens: list[int]) -> str:
    return struct.pack(f"<{len(tokens)}i", *tokens).hex().upper()  # as LoadGen logs int32 ids


def entry(seq_id: int, qsl_idx: int, tokens: list[int], **extra: object) -> dict:
    return {"seq_id": seq_id, "qsl_idx": qsl_idx, "data": hex_tokens(tokens), **extra}


def write_log(path: Path, entries: list[dict]) -> Path:
    """mlperf_log_accuracy.json laid out as LoadGen writes it: one record per line."""
    lines = ["{ " + ", ".join(f"{json.dumps(k)} : {json.dumps(v)}" for k, v in e.items()) + " }" for e in entries]
    path.write_text("[\n" + ",\n".join(lines) + ("\n" if lines else "") + "]\n")
    return path


def records_for(vocab: Vocab, outputs: list[str]) -> list[AccuracyRecord]:
    """One record per output, qsl_idx = position, ending with EOS as a model's output does."""
    return [AccuracyRecord(i, i, bytes.fromhex(hex_tokens([*vocab.encode(text), EOS])))
            for i, text in enumerate(outputs)]


def f1(overlap: int, n_pred: int, n_ref: int) -> Fraction:
    precision, recall = Fraction(overlap, n_pred), Fraction(overlap, n_ref)
    return 2 * precision * recall / (precision + recall) if overlap else Fraction(0)


def percent(values: list[Fraction]) -> float:
    return round(float(sum(values) / len(values)) * 100, 4)


# --- ROUGE -------------------------------------------------------------------------------------

def test_rouge_matches_f_measures_computed_by_hand() -> None:
    references = ["the cat sat on the mat", "running dogs", "Hello world."]
    outputs = ["the cat ran", "the dog runs", "hello, WORLD"]
    vocab = Vocab()
    result = evaluate(records_for(vocab, outputs), references, vocab.decode)

    # 1: ref [the cat sat on the mat], pred [the cat ran]: unigrams the+cat, bigram "the cat",
    #    LCS "the cat". 2: stems ref [run dog], pred [the dog run]: unigrams run+dog, no common
    #    bigram, LCS of length 1. 3: identical after lowercasing and dropping punctuation.
    rouge1 = [f1(2, 3, 6), f1(2, 3, 2), Fraction(1)]
    rouge2 = [f1(1, 2, 5), f1(0, 2, 1), Fraction(1)]
    rouge_l = [f1(2, 3, 6), f1(1, 3, 2), Fraction(1)]
    assert (result.rouge1, result.rouge2, result.rougeL) == (percent(rouge1), percent(rouge2), percent(rouge_l))
    assert (result.rouge1, result.rouge2, result.rougeL) == (74.8148, 42.8571, 61.4815)
    assert result.rougeLsum == result.rougeL  # one sentence each: summary-level LCS is plain LCS


def test_stemming_makes_running_match_run() -> None:
    vocab = Vocab()
    result = evaluate(records_for(vocab, ["the dog run"]), ["The dog is running"], vocab.decode)
    # ref [the dog is run], pred [the dog run]: 3 common unigrams; P = 1, R = 3/4
    assert result.rouge1 == percent([f1(3, 3, 4)]) == 85.7143
    unstemmed = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=False).score("The dog is running", "the dog run")
    assert round(unstemmed["rouge1"].fmeasure * 100, 4) < result.rouge1


def test_sentence_splitting_changes_neither_rouge1_rouge2_nor_rouge_l() -> None:
    reference = "Paris is the capital of France. It is large!  Mr. Smith lives there, e.g. in the centre."
    output = "The capital of France is Paris. It is very large. Smith lives in the centre?"
    vocab = Vocab()
    result = evaluate(records_for(vocab, [output]), [reference], vocab.decode)
    raw = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True).score(reference, output)
    assert result.rouge1 == round(raw["rouge1"].fmeasure * 100, 4)
    assert result.rouge2 == round(raw["rouge2"].fmeasure * 100, 4)
    assert result.rougeL == round(raw["rougeL"].fmeasure * 100, 4)
    assert result.rougeLsum != result.rougeL  # rougeLsum does read the sentences


def test_sentences_end_at_punctuation_but_not_after_abbreviations_or_initials() -> None:
    text = 'Dr. Smith met J. Doe in the U.S. today. "Really?" she asked!  Yes (e.g. this). Fine...\nok'
    assert split_sentences(text) == [
        "Dr. Smith met J. Doe in the U.S. today.",
        '"Really?"',
        "she asked!",
        "Yes (e.g. this).",
        "Fine...",
        "ok",
    ]
    assert split_sentences("A list:\n- one\n- two.  Next.") == ["A list:\n- one\n- two.", "Next."]
    assert postprocess_text("  One. Two.  \n") == "One.\nTwo."
    assert split_sentences("   ") == []


def test_tokens_per_sample_counts_every_logged_token_and_rounds_to_one_place() -> None:
    vocab = Vocab()
    records = [AccuracyRecord(i, i, bytes.fromhex(hex_tokens(ids)))
               for i, ids in enumerate([vocab.encode("a"), [*vocab.encode("b"), EOS], [*vocab.encode("c"), EOS]])]
    result = evaluate(records, ["a", "b", "c"], vocab.decode)
    assert (result.gen_num, result.gen_tok_len) == (3, 5)  # EOS tokens count, as in the reference
    assert result.tokens_per_sample == 1.7  # 5 / 3 = 1.666...
    assert result.gen_len == 3  # characters of the decoded outputs
    for value in (result.rouge1, result.rouge2, result.rougeL, result.rougeLsum):
        assert value == round(value, 4)


def test_a_repeated_qsl_idx_counts_only_its_first_record() -> None:
    vocab = Vocab()
    first, second = [*vocab.encode("the cat sat"), EOS], [*vocab.encode("something else entirely here"), EOS]
    records = [AccuracyRecord(0, 0, bytes.fromhex(hex_tokens(first))),
               AccuracyRecord(1, 0, bytes.fromhex(hex_tokens(second)))]
    result = evaluate(records, ["the cat sat"], vocab.decode)
    assert (result.rouge1, result.gen_num, result.gen_tok_len, result.duplicates) == (100.0, 1, 4, 1)


def test_a_qsl_idx_outside_the_references_is_an_error() -> None:
    vocab = Vocab()
    with pytest.raises(AccuracyError, match="qsl_idx 1, outside the 1 references") as err:
        evaluate(records_for(vocab, ["a", "b"]), ["a"], vocab.decode)
    assert err.value.hint


def test_scoring_in_several_processes_gives_the_same_result() -> None:
    vocab = Vocab()
    outputs = [f"answer {i} is {i % 7} and {i % 3} so the total is {i % 11}" for i in range(300)]
    references = [f"the total is {i % 5} because {i % 7} and {i % 3}" for i in range(300)]
    records = records_for(vocab, outputs)
    assert evaluate(records, references, vocab.decode, jobs=2) == evaluate(records, references, vocab.decode)


# --- the accuracy log --------------------------------------------------------------------------

def test_data_is_read_as_little_endian_int32_like_the_reference(tmp_path: Path) -> None:
    tokens = [29871, 13, 32000, 1, EOS]
    log = write_log(tmp_path / "mlperf_log_accuracy.json",
                    [entry(7, 3, tokens, token_data=hex_tokens(tokens[:1]), token_count=5)])
    (record,) = read_accuracy_log(log)
    reference = np.frombuffer(bytes.fromhex(json.loads(log.read_text())[0]["data"]), np.int32)
    assert record.tokens == reference.tolist() == tokens
    assert (record.seq_id, record.qsl_idx, record.token_count, record.first_tokens) == (7, 3, 5, [29871])


def test_log_keeps_duplicates_in_file_order(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.json", [entry(0, 5, [10, EOS]), entry(1, 5, [11, EOS]), entry(2, 6, [12])])
    assert [(r.seq_id, r.qsl_idx) for r in read_accuracy_log(log)] == [(0, 5), (1, 5), (2, 6)]


@pytest.mark.parametrize(("content", "message"), [
    (None, "does not exist"),
    ("", "is empty"),
    ("[\n]\n", "has no records"),
    ('[\n{ "seq_id" : 0, "qsl_idx" : 0, "data" : "0D00', "not valid JSON"),
    ('{"seq_id": 0}', "not the list LoadGen writes"),
    ('[{"seq_id": 0, "qsl_idx": "3", "data": "0D000000"}]', "qsl_idx is '3', not an integer"),
    ('[{"seq_id": 0, "qsl_idx": 3, "data": "0D0000000D00"}]', "6 bytes, not a whole number of int32"),
    ('[{"seq_id": 0, "qsl_idx": 3, "data": "XYZ0"}]', "data is not a hex string"),
    ('[{"seq_id": 0, "qsl_idx": 3}]', "has no data"),
])
def test_unusable_logs_are_refused_with_a_reason(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "mlperf_log_accuracy.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(AccuracyLogError, match=re.escape(message)) as err:
        read_accuracy_log(path)
    assert isinstance(err.value, CmxError)
    assert str(path) in err.value.message


def test_empty_log_hint_says_how_loadgen_fills_it(tmp_path: Path) -> None:
    with pytest.raises(AccuracyLogError) as err:
        read_accuracy_log(write_log(tmp_path / "log.json", []))
    assert "accuracy mode" in err.value.hint and "audit.config" in err.value.hint


# --- accuracy.txt ------------------------------------------------------------------------------

def sample_result(**changes: object) -> AccuracyResult:
    values: dict = {"rouge1": 44.4465, "rouge2": 22.0638, "rougeL": 28.625, "rougeLsum": 42.0251,
                    "gen_len": 29614748, "gen_num": 24576, "gen_tok_len": 7399575, "tokens_per_sample": 301.1}
    return AccuracyResult(**{**values, **changes})


def test_accuracy_txt_is_the_reference_print_plus_the_hash_line() -> None:
    assert format_accuracy_txt(sample_result(), SHA) == (
        "\nResults\n\n"
        "{'rouge1': 44.4465, 'rouge2': 22.0638, 'rougeL': 28.625, 'rougeLsum': 42.0251, 'gen_len': 29614748, "
        "'gen_num': 24576, 'gen_tok_len': 7399575, 'tokens_per_sample': 301.1}\n"
        f"\nhash={SHA}\n")


def test_accuracy_txt_prints_plain_numbers_even_from_numpy_values() -> None:
    result = sample_result(rouge1=np.round(np.float64(44.44651), 4), rouge2=np.float64(22.0638),
                           gen_len=np.int64(29614748), tokens_per_sample=np.float64(301.1))
    text = format_accuracy_txt(result, SHA)
    assert "np." not in text and "float64" not in text and "int64" not in text
    assert parse_accuracy_txt(text)["rouge1"] == 44.4465


def test_numpy_reprs_are_invisible_to_the_checker_patterns() -> None:
    # why plain floats matter: numpy 2 prints np.float64(...), which the checker's regexes miss
    numpy2_line = "{'rouge1': np.float64(44.4465), 'rouge2': np.float64(22.0638), 'tokens_per_sample': 301.1}\n"
    parsed = parse_accuracy_txt(numpy2_line)
    assert "rouge1" not in parsed and "rouge2" not in parsed and parsed["tokens_per_sample"] == 301.1


def test_parse_reads_back_what_format_wrote() -> None:
    result = sample_result(rouge1=43.1, rougeLsum=0.0001, tokens_per_sample=300.0)
    assert parse_accuracy_txt(format_accuracy_txt(result, SHA)) == {**result.as_dict(), "hash": SHA}


def test_parse_reads_lines_as_the_checker_opens_them() -> None:
    text = format_accuracy_txt(sample_result(), SHA).replace("\n", "\r\n")
    assert parse_accuracy_txt(text)["hash"] == SHA  # text mode turns \r\n into \n before the regex
    assert parse_accuracy_txt("nothing here\n") == {}


def test_checker_patterns_are_the_submission_checkers() -> None:
    assert CHECKER_PATTERNS["rouge1"] == r".*'rouge1':\s+'?([\d.]+)'?.*"
    assert CHECKER_PATTERNS["tokens_per_sample"] == r".*'tokens_per_sample':\s([\d.]+).*"


def test_a_bad_hash_is_refused() -> None:
    with pytest.raises(AccuracyError, match="not a sha256"):
        format_accuracy_txt(sample_result(), "ABC")


@needs_sample
@pytest.mark.parametrize(("scenario", "expected"), [
    ("Offline", {"rouge1": 44.4465, "rouge2": 22.0638, "rougeL": 28.625, "rougeLsum": 42.0251,
                 "gen_len": 29614748, "gen_num": 24576, "gen_tok_len": 7399575, "tokens_per_sample": 301.1}),
    ("Server", {"rouge1": 44.4406, "rouge2": 22.0593, "rougeL": 28.6063, "rougeLsum": 42.0258,
                "gen_len": 29615930, "gen_num": 24576, "gen_tok_len": 7403652, "tokens_per_sample": 301.3}),
    ("Interactive", {"rouge1": 44.4542, "rouge2": 22.0419, "rougeL": 28.6112, "rougeLsum": 42.0341,
                     "gen_len": 29579723, "gen_num": 24576, "gen_tok_len": 7399913, "tokens_per_sample": 301.1}),
])
def test_real_accuracy_txt_parses_and_is_reproduced_byte_for_byte(scenario: str, expected: dict) -> None:
    path = SAMPLE / scenario / "accuracy" / "accuracy.txt"
    parsed = read_accuracy_txt(path)
    assert {k: v for k, v in parsed.items() if k != "hash"} == expected
    assert re.fullmatch(r"[0-9a-f]{64}", str(parsed["hash"]))
    assert format_accuracy_txt(AccuracyResult(**expected), str(parsed["hash"])) == path.read_text()
    assert meets_targets(parsed, CLOSED_99) == []


# --- targets -----------------------------------------------------------------------------------

def test_meets_targets_uses_the_checkers_inclusive_bounds() -> None:
    low = {metric: CLOSED_99.minimum(metric) for metric in ("rouge1", "rouge2", "rougeL")}
    at_the_limits = sample_result(**low, tokens_per_sample=CLOSED_99.maximum("tokens_per_sample"))
    assert meets_targets(at_the_limits, CLOSED_99) == []


def test_meets_targets_names_each_shortfall_in_a_sentence() -> None:
    result = sample_result(rouge1=43.0, rougeL=20.5, tokens_per_sample=330.2)
    assert meets_targets(result, CLOSED_99) == [
        "ROUGE-1 is 43.0, below the minimum 43.986888",
        "ROUGE-L is 20.5, below the minimum 28.330038",
        "tokens per sample is 330.2, above the maximum 323.895",
    ]
    assert meets_targets(sample_result(tokens_per_sample=200.0), CLOSED_99) == [
        "tokens per sample is 200.0, below the minimum 265.005"]


def test_meets_targets_reports_values_missing_from_accuracy_txt() -> None:
    parsed = parse_accuracy_txt("{'rouge1': np.float64(44.5), 'rouge2': 22.1, 'rougeL': 28.7}\nhash=00\n")
    assert meets_targets(parsed, CLOSED_99) == ["ROUGE-1 is missing", "tokens per sample is missing"]


# --- truncation --------------------------------------------------------------------------------

def big_log(tmp_path: Path) -> Path:
    entries = [entry(i, i, [*list(range(i, i + 60)), EOS], token_count=61) for i in range(40)]
    path = tmp_path / "full" / "mlperf_log_accuracy.json"
    path.parent.mkdir()
    write_log(path, entries)
    assert path.stat().st_size > 20_000
    return path


def test_truncation_keeps_the_first_and_last_4096_characters_and_returns_the_full_hash(tmp_path: Path) -> None:
    full = big_log(tmp_path)
    content = full.read_bytes()
    dest = tmp_path / "tree" / "accuracy" / "mlperf_log_accuracy.json"
    digest = truncate_accuracy_log(full, dest)
    assert digest == hashlib.sha256(content).hexdigest()
    assert dest.read_bytes() == content[:4096] + b"\n\n...\n\n" + content[-4096:]
    assert dest.stat().st_size == 8199 <= 10 * 1024  # the checker's MAX_ACCURACY_LOG_SIZE
    assert full.read_bytes() == content
    assert is_truncated_accuracy_log(dest) and not is_truncated_accuracy_log(full)
    with pytest.raises(AccuracyLogError, match="truncated copy") as err:
        read_accuracy_log(dest)
    assert "full" in err.value.hint


def test_truncation_in_place_replaces_the_file(tmp_path: Path) -> None:
    full = big_log(tmp_path)
    digest = hashlib.sha256(full.read_bytes()).hexdigest()
    assert truncate_accuracy_log(full, full) == digest
    assert is_truncated_accuracy_log(full)
    assert [p.name for p in full.parent.iterdir()] == ["mlperf_log_accuracy.json"]


def test_a_log_under_4096_bytes_is_copied_whole(tmp_path: Path) -> None:
    small = write_log(tmp_path / "small.json", [entry(0, 0, [5, 6, EOS], token_count=3)])
    digest = truncate_accuracy_log(small, tmp_path / "copy.json")
    assert (tmp_path / "copy.json").read_bytes() == small.read_bytes()
    assert digest == hashlib.sha256(small.read_bytes()).hexdigest()


def test_truncating_a_missing_log_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(AccuracyLogError, match="does not exist"):
        truncate_accuracy_log(tmp_path / "nope.json", tmp_path / "out.json")


@needs_sample
@pytest.mark.parametrize("scenario", ["Offline", "Server", "Interactive"])
def test_real_submission_logs_are_detected_as_truncated(scenario: str) -> None:
    path = SAMPLE / scenario / "accuracy" / "mlperf_log_accuracy.json"
    assert is_truncated_accuracy_log(path)
    with pytest.raises(AccuracyLogError, match="truncated copy"):
        read_accuracy_log(path)


@needs_sample
def test_truncating_a_real_log_gives_the_submission_shape(tmp_path: Path) -> None:
    full = SAMPLE / "Server" / "TEST06" / "accuracy" / "mlperf_log_accuracy.json"
    digest = truncate_accuracy_log(full, tmp_path / "mlperf_log_accuracy.json")
    assert digest == hashlib.sha256(full.read_bytes()).hexdigest()
    truncated = (tmp_path / "mlperf_log_accuracy.json").read_bytes()
    published = (SAMPLE / "Server" / "accuracy" / "mlperf_log_accuracy.json").read_bytes()
    assert len(truncated) == len(published) == 8199
    assert truncated[4096:4103] == published[4096:4103] == b"\n\n...\n\n"
    assert truncated[:2] == published[:2] == b"[\n" and truncated[-4:] == published[-4:] == b"}\n]\n"
