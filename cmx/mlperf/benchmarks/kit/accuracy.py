"""What the benchmarks' scorers share: the records a log holds to score, their references, ROUGE's result, AIME's
answer."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cmx.mlperf.loadgen.accuracy_log import AccuracyError, AccuracyRecord, unique_samples

# AIME's answer as deepseek-r1's eval_accuracy.py and gpt-oss-120b's eval_mlperf_accuracy.py both extract it
_AIME_BOXED = re.compile(r"\\boxed{\s*(\d+)\s*}")
_AIME_ANSWER = re.compile(r"Answer:\s*(\d+)(?!\.)\b", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class RougeResult:
    """ROUGE-1/2/L/Lsum means in percent and the generated text's characters and samples, as the summarisation
    references (llama2-70b, llama3.1-8b) print them first."""

    rouge1: float
    rouge2: float
    rougeL: float  # the metric's own name, as accuracy.txt spells it
    rougeLsum: float
    gen_len: int
    gen_num: int

    def as_dict(self) -> dict[str, float | int]:
        """The reference's result dict, in its key order, with plain Python numbers only."""
        return {"rouge1": float(self.rouge1), "rouge2": float(self.rouge2), "rougeL": float(self.rougeL),
                "rougeLsum": float(self.rougeLsum), "gen_len": int(self.gen_len), "gen_num": int(self.gen_num)}


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


def aime_answer(text: str) -> int | None:
    """The last \\boxed{digits} anywhere in `text`, else the last `Answer: digits` not followed by a point; only
    0 to 999 counts (None: no answer)."""
    if not text:
        return None
    boxed = list(_AIME_BOXED.finditer(text))
    if boxed:
        found = boxed[-1].group(1)
    else:
        answers = list(_AIME_ANSWER.finditer(text))
        if not answers:
            return None
        found = answers[-1].group(1)
    value = int(found)
    return value if 0 <= value <= 999 else None
