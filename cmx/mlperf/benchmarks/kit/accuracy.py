"""What the benchmarks' scorers share: the records an accuracy log holds to score, and each one's reference."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cmx.mlperf.loadgen.accuracy_log import AccuracyError, AccuracyRecord, unique_samples


def samples_to_score(records: Iterable[AccuracyRecord], jobs: int) -> tuple[list[AccuracyRecord], int]:
    """The first record of each sample and how many repeats were dropped (unique_samples), once `jobs` (the
    scoring processes) is checked; a log with no records is refused."""
    if jobs < 1:
        raise AccuracyError(f"jobs must be 1 or more, not {jobs}")
    samples, duplicates = unique_samples(records)
    if not samples:
        raise AccuracyError("there are no records to evaluate",
                            hint="read them with read_accuracy_log from an accuracy-mode run")
    return samples, duplicates


def reference_text(references: Sequence[str], record: AccuracyRecord, dataset: str) -> str:
    """The reference text of `record`'s sample; `dataset` names the samples a run of the benchmark reads."""
    if not 0 <= record.qsl_idx < len(references):
        raise AccuracyError(f"record seq_id {record.seq_id} has qsl_idx {record.qsl_idx}, outside the "
                            f"{len(references)} references",
                            hint=f"evaluate against the dataset the run used ({dataset})")
    target = references[record.qsl_idx]
    if not isinstance(target, str):
        raise AccuracyError(f"the reference for qsl_idx {record.qsl_idx} is a {type(target).__name__}, not text")
    return target
