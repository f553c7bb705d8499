"""Whisper's scorer against speech2text's evaluator (mlcommons/inference at b66003e1): the labels LoadGen is
answered with, the word errors that count concatenations as matches, openai-whisper's normaliser, the WER and
the accuracy.txt line the checker reads.

The expected figures of the hand-made transcripts were computed by the reference's own functions
(reference_SUT.py's answer, accuracy_eval.py's word_error_rate with helpers.py and legacy_helpers.py) and are
written here as numbers. openai-whisper's normaliser itself is compared live: its source distribution comes from
PyPI (pinned by version and sha256) and its normalizers package is imported from the unpacked files, without
the rest of openai-whisper (which needs torch, numba and tiktoken).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from cmx.mlperf.benchmarks.whisper.accuracy import evaluate, format_accuracy_txt, score_log
from cmx.mlperf.benchmarks.whisper.normalizer import NORMALIZER_JSON, english_normalizer, read_spelling_table
from cmx.mlperf.benchmarks.whisper.transcript import (
    LABELS,
    labels_from_bytes,
    labels_text,
    reference_transcript,
    response_bytes,
    response_labels,
)
from cmx.mlperf.benchmarks.whisper.wer import clip_errors, edit_distance, merge_concatenations, word_errors
from cmx.mlperf.loadgen.accuracy_log import AccuracyError, AccuracyRecord
from cmx.mlperf.scoring.accuracy_txt import parse_accuracy_txt

OPENAI_WHISPER = "openai-whisper==20250625"
OPENAI_WHISPER_SDIST_SHA256 = "37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96"
# the checker's ACC_PATTERN["ACCURACY"] (tools/submission/submission_checker/constants.py)
CHECKER_ACCURACY = r"Word Error Rate\:.*, accuracy=([0-9\.]+)%"
SHA = "ab" * 32

# (reference transcript, what vLLM generated) -> (errors, reference words), from the reference's functions
HAND_MADE = [
    ("the airplane landed at the airport", " The air plane landed at the air port.", 0, 6),
    ("mister smith paid twenty dollars", " Mr. Smith paid $20.", 0, 4),
    ("i won't colour it", " I will not color it.", 0, 5),
    ("twenty five percent of the people", " 25% of the people", 0, 4),
    ("he's here", " He is here!", 0, 3),
    ("", " Hello there.", 2, 0),  # an empty transcript is kept: its words are insertions
    ("one two three four", "", 1, 1),  # "1234" once normalised
    ("the cat sat on the mat", " the cat sat on the mat", 0, 6),
    ("the cat sat on the mat", " The cat sat on a mat and", 2, 6),
    ("it is a well known fact", " It's a well-known fact.", 0, 6),
    ("she sells seashells by the sea shore", " She sells sea shells by the seashore.", 0, 7),
    ("café au lait", " Cafe au lait", 1, 3),  # é is not a label: the reference's "caf" is a miss
]
# accuracy_eval.py's line for all of HAND_MADE, in order, as one log
HAND_MADE_LINE = "Word Error Rate: 11.76470588235294%, accuracy=88.23529411764706%"


@pytest.fixture(scope="module")
def openai_whisper(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """openai-whisper's EnglishTextNormalizer class and its english.json, from its sdist on PyPI."""
    pytest.importorskip("more_itertools", reason="openai-whisper's normaliser imports more_itertools (the dev extra)")
    where = tmp_path_factory.mktemp("openai-whisper")
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                    OPENAI_WHISPER, "-d", str(where)], check=True, capture_output=True, timeout=300)
    (sdist,) = where.glob("openai_whisper-*.tar.gz")
    import hashlib

    assert hashlib.sha256(sdist.read_bytes()).hexdigest() == OPENAI_WHISPER_SDIST_SHA256
    package = where / "reference_normalizers"
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            if "/whisper/normalizers/" in member.name and member.isfile():
                package.mkdir(exist_ok=True)
                (package / Path(member.name).name).write_bytes(tar.extractfile(member).read())  # type: ignore[union-attr]
    spec = importlib.util.spec_from_file_location("reference_normalizers", package / "__init__.py",
                                                  submodule_search_locations=[str(package)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["reference_normalizers"] = module
    spec.loader.exec_module(module)
    return module.EnglishTextNormalizer, package / "english.json"


@pytest.fixture(scope="module")
def model_dir(openai_whisper: tuple[Any, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint folder with the spelling table a Hugging Face Whisper checkpoint ships as normalizer.json."""
    folder = tmp_path_factory.mktemp("whisper-large-v3")
    shutil.copy(openai_whisper[1], folder / NORMALIZER_JSON)
    return folder


def words(text: str) -> list[str]:
    return text.split()


def record(seq_id: int, qsl_idx: int, generated: str) -> AccuracyRecord:
    return AccuracyRecord(seq_id, qsl_idx, response_bytes(generated))


# --- the answer to LoadGen ---------------------------------------------------------------------------


def test_the_labels_are_the_references_42_in_its_order():
    assert len(LABELS) == 42
    assert "".join(LABELS) == " abcdefghijklmnopqrstuvwxyz'0123456789$%+-"


def test_the_answer_is_the_lower_cased_stripped_text_with_only_label_characters():
    assert labels_text(response_labels("  Mr. O'Neil paid $25.50, +10% - Café!  ")) == "mr o'neil paid $2550 +10% - caf"


def test_the_answer_is_int64_little_endian_and_reads_back():
    data = response_bytes(" ab-")
    assert data == b"".join(i.to_bytes(8, "little") for i in (1, 2, 41))
    assert labels_from_bytes(data) == [1, 2, 41]


def test_a_record_that_is_not_whole_int64_labels_is_refused():
    with pytest.raises(AccuracyError, match="not a whole number of int64"):
        labels_from_bytes(b"\x01\x00\x00\x00")


def test_a_label_outside_the_42_is_refused_naming_it():
    with pytest.raises(AccuracyError, match="label 42, outside the 42 labels"):
        labels_text([1, 42])
    with pytest.raises(AccuracyError, match="label -1"):
        labels_text([-1])


def test_a_reference_transcript_keeps_its_case_as_the_manifest_reader_does():
    # manifest.py maps characters to labels without lower-casing: upper case is dropped, not folded
    assert reference_transcript("Hello, world's end") == "ello world's end"


# --- word errors ---------------------------------------------------------------------------------------


def test_edit_distance_counts_insertions_deletions_and_substitutions():
    assert edit_distance([], ["a", "b"]) == 2
    assert edit_distance(["a", "b", "c"], ["a", "x", "c", "d"]) == 2
    assert edit_distance(list("kitten"), list("sitting")) == 3


def test_words_run_together_on_either_side_are_one_word_on_both():
    assert merge_concatenations(words("the air plane"), words("the airplane")) == (["the", "airplane"],) * 2
    assert merge_concatenations(words("a basketball"), words("a basket ball")) == (["a", "basketball"],) * 2
    assert clip_errors(words("the airplane landed at the airport"),
                       words("the air plane landed at the air port")) == (0, 6)


def test_plain_word_distance_would_count_the_concatenations():
    # the example: jiwer-like word distance gives 0.235 where the reference gives 0
    ref, hyp = words("the airplane landed at the airport"), words("the air plane landed at the air port")
    assert edit_distance(ref, hyp) == 4


def test_up_to_three_words_join_and_four_do_not():
    assert clip_errors(["abc"], ["a", "b", "c"]) == (0, 1)
    assert clip_errors(["abcd"], ["a", "b", "c", "d"]) == (4, 1)


def test_the_walk_is_greedy_as_the_references_is():
    # an inserted word shifts the pairs: "sea shore" then meets "seashore" one step late, and is not merged
    assert clip_errors(words("by the seashore"), words("by uh the sea shore")) == (3, 3)


def test_word_errors_sum_errors_and_reference_words_over_clips():
    errors = word_errors([("a b c", "a b c"), ("a b", "a x y"), ("", "z")])
    assert (errors.errors, errors.words, errors.clips) == (0 + 2 + 1, 5, 3)
    assert errors.wer == 3 / 5


# --- openai-whisper's normaliser -----------------------------------------------------------------------


NORMALISER_CASES = [
    "Mr. Smith paid $20.50 for 3 apples, 25% off!", "I'm gonna colour the 1st and 2nd harbour",
    "twenty one hundred and five", "he said 'hello' -- and left", "it's the 1990s, o'clock",
    "one point five million dollars", "Dr Jones won't", "mrs wilkins' cat", "nineteen eighty four",
    "ten thousand and one", "a + b = c", "seventy-seven", "i 'll", "organise, realise", "hmm um uh",
    "[noise] (laughs) hello", "two thirds of a pound", "fifty cents", "the 21st century", "Ms. Brown's 2nd",
    "St. John's", "one oh five", "a 1.5 b", "zero point two five", "twenty twenty-one", "it costs £5",
    "Ph.D.", "we've, they'd, she'll", "ninety-nine per cent", "",
]


def test_cmx_normalises_as_openai_whisper_does(openai_whisper: tuple[Any, Path], model_dir: Path):
    reference = openai_whisper[0]()
    ours = english_normalizer(model_dir)
    for text in NORMALISER_CASES:
        # both as the evaluator sees them (label characters only) and as written
        for case in (text, reference_transcript(text.lower())):
            assert ours(case) == reference(case), case


def test_a_checkpoint_without_normalizer_json_names_the_file(tmp_path: Path):
    with pytest.raises(AccuracyError, match=r"normalizer.json does not exist.*spelling table"):
        read_spelling_table(tmp_path)


def test_a_normalizer_json_that_is_not_a_table_of_words_is_refused(tmp_path: Path):
    (tmp_path / NORMALIZER_JSON).write_text(json.dumps(["colour", "color"]))
    with pytest.raises(AccuracyError, match="not a table of words"):
        read_spelling_table(tmp_path)


# --- the evaluator ---------------------------------------------------------------------------------


def test_hand_made_transcripts_score_as_the_reference_scores_them(model_dir: Path):
    normalize = english_normalizer(model_dir)
    for reference, generated, errors, n_words in HAND_MADE:
        if n_words:  # a clip of no words has no rate of its own: it counts in the sum below
            result = evaluate([record(0, 0, generated)], [reference], normalize)
            assert (result.errors, result.words) == (errors, n_words), (reference, generated)
    together = evaluate([record(i, i, h) for i, (_, h, _, _) in enumerate(HAND_MADE)],
                        [r for r, _, _, _ in HAND_MADE], normalize)
    assert (together.errors, together.words, together.clips) == (6, 51, 12)
    assert format_accuracy_txt(together.as_dict(), SHA) == f"{HAND_MADE_LINE}\nhash={SHA}\n"


def test_every_record_is_scored_repeats_included(model_dir: Path):
    normalize = english_normalizer(model_dir)
    once = evaluate([record(0, 0, "a cat")], ["the cat"], normalize)
    twice = evaluate([record(0, 0, "a cat"), record(1, 0, "a cat")], ["the cat"], normalize)
    assert (once.errors, once.words) == (1, 2) and (twice.errors, twice.words) == (2, 4)


def test_transcripts_with_no_words_at_all_have_no_word_error_rate(model_dir: Path):
    with pytest.raises(AccuracyError, match="hold no words once normalised"):
        evaluate([record(0, 0, "hello")], ["um"], english_normalizer(model_dir))


def test_a_record_outside_the_manifest_names_its_index(model_dir: Path):
    with pytest.raises(AccuracyError, match="qsl_idx 3, outside the 1 transcripts"):
        evaluate([record(0, 3, "hello")], ["hello"], english_normalizer(model_dir))


def test_the_checker_reads_the_accuracy_and_cmx_reads_it_back(model_dir: Path):
    result = evaluate([record(0, 0, " the cat sat")], ["the cat sat on the mat"], english_normalizer(model_dir))
    text = format_accuracy_txt(result.as_dict(), SHA)
    assert text == f"Word Error Rate: 50.0%, accuracy=50.0%\nhash={SHA}\n"
    assert float(re.match(CHECKER_ACCURACY, text.splitlines()[0]).group(1)) == 50.0  # type: ignore[union-attr]
    assert parse_accuracy_txt(text) == {"accuracy": 50.0, "wer": 50.0, "hash": SHA}


def test_score_log_reads_loadgens_log_and_the_datasets_transcripts(model_dir: Path, tmp_path: Path):
    log = tmp_path / "mlperf_log_accuracy.json"
    entries = [{"seq_id": i, "qsl_idx": i, "data": response_bytes(text).hex().upper()}
               for i, text in enumerate([" The air plane.", " Mr. Smith"])]
    log.write_text("[\n" + ",\n".join(json.dumps(e) for e in entries) + "\n]\n")

    class Manifest:
        path = tmp_path
        transcripts = ("the airplane", "mister jones")

        def __len__(self) -> int:
            return len(self.transcripts)

        def reference(self, i: int) -> str:
            return self.transcripts[i]

    result = score_log(log, Manifest(), model_dir)  # type: ignore[arg-type]
    assert (result.errors, result.words, result.clips) == (1, 4, 2)
