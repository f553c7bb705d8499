"""Whisper's accuracy: the word error rate of the transcripts against LibriSpeech's, as speech2text's evaluator
computes it (accuracy_eval.py in mlcommons/inference), and the accuracy.txt it prints.

Each record of the accuracy log is scored, in file order, repeats included: the reference keeps no
set of samples seen (an accuracy run issues each sample once). A record's int64 labels become text
(transcript.py); the manifest's transcript goes through the same label filter; both are normalised
(normalizer.py) and split on whitespace; the word errors count concatenations as matches (wer.py).
WER is the errors over the reference words of every record, and accuracy is 100 minus WER in percent:
the checker reads `accuracy=` from the line `Word Error Rate: <WER>%, accuracy=<accuracy>%`, with both
numbers printed as Python prints a float, as the reference prints them.

A transcript that normalises to nothing (an empty one, or only fillers) is kept, as the reference
keeps it: it adds no words, and every word the model said for it is an insertion.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.whisper.normalizer import english_normalizer
from cmx.mlperf.benchmarks.whisper.transcript import labels_from_bytes, labels_text, reference_transcript
from cmx.mlperf.benchmarks.whisper.wer import WordErrors, word_errors
from cmx.mlperf.loadgen.accuracy_log import AccuracyError, AccuracyRecord, read_accuracy_log
from cmx.mlperf.scoring.accuracy_txt import valid_sha256

if TYPE_CHECKING:
    from cmx.mlperf.benchmarks.base import Dataset

DATASET = "whisper: the 1,633 clips of LibriSpeech dev-clean and dev-other, repacked (dev-all-repack.json)"


def evaluate(records: Sequence[AccuracyRecord], references: Sequence[str],
             normalize: Callable[[str], str]) -> WordErrors:
    """Score every record against `references` (the manifest's transcripts, indexed by qsl_idx)."""
    if not records:
        raise AccuracyError("there are no records to evaluate",
                            hint="read them with read_accuracy_log from an accuracy-mode run")
    pairs = []
    for record in records:
        where = f"record seq_id {record.seq_id}"
        if not 0 <= record.qsl_idx < len(references):
            raise AccuracyError(f"{where} has qsl_idx {record.qsl_idx}, outside the {len(references)} transcripts",
                                hint=f"evaluate against the manifest the run used ({DATASET})")
        hypothesis = labels_text(labels_from_bytes(record.data, where), where)
        pairs.append((normalize(reference_transcript(references[record.qsl_idx])), normalize(hypothesis)))
    errors = word_errors(pairs)
    if errors.words == 0:
        raise AccuracyError(f"the {errors.clips} reference transcripts scored hold no words once normalised, so "
                            "there is no word error rate", hint=f"score against the real manifest ({DATASET})")
    return errors


def score_log(accuracy_log: Path, dataset: Dataset, model_dir: Path, *, jobs: int = 1) -> WordErrors:
    """BENCHMARK.score: an accuracy run's log against `dataset`'s transcripts, normalised with the spelling table of
    the checkpoint in `model_dir`. `jobs` is the kit's; scoring 1,633 clips takes about a second on one core."""
    del jobs
    references = [dataset.reference(i) for i in range(len(dataset))]
    return evaluate(read_accuracy_log(accuracy_log), references, english_normalizer(model_dir))


def format_accuracy_txt(values: Mapping[str, float | int], log_sha256: str) -> str:
    """accuracy.txt as the evaluator prints it and truncate_accuracy_log.py completes it."""
    return f"Word Error Rate: {values['wer']}%, accuracy={values['accuracy']}%\nhash={valid_sha256(log_sha256)}\n"
