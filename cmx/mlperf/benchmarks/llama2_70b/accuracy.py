"""llama2-70b's accuracy: ROUGE-1/2/L/Lsum of the decoded outputs against OpenOrca's references, and tokens per sample.

What the MLCommons reference does, and cmx reproduces (language/llama2-70b/evaluate-accuracy.py):
each `data` field is the hex of the output token ids (int32 for this harness, `--dtype int32`
in `run_accuracy.sh`); a `qsl_idx` seen before is skipped, so the first record of a sample
counts; outputs are decoded with `skip_special_tokens=True` (the caller's `decode`); ROUGE as
cmx.mlperf.scoring.rouge computes it; `gen_len` is the number of characters of the
post-processed predictions, `gen_tok_len` the number of output tokens, and
`tokens_per_sample = round(gen_tok_len / gen_num, 1)`. The checker reads ROUGE-1, ROUGE-2,
ROUGE-L and tokens_per_sample for llama2-70b; cmx's regex sentence splitter (see rouge.py)
changes none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.kit.accuracy import RougeResult, reference_text, samples_to_score
from cmx.mlperf.loadgen.accuracy_log import AccuracyError, AccuracyRecord, read_accuracy_log
from cmx.mlperf.scoring.rouge import mean_percent, postprocess_text, rouge_fmeasures

if TYPE_CHECKING:
    from cmx.mlperf.benchmarks.base import Dataset


@dataclass(frozen=True)
class AccuracyResult(RougeResult):
    """The llama2-70b metrics, rounded as the reference rounds them; `duplicates` counts skipped records."""

    gen_tok_len: int
    tokens_per_sample: float
    duplicates: int = 0

    def as_dict(self) -> dict[str, float | int]:
        """The reference's result dict, in its key order (ROUGE's, then the token counts), plain numbers only."""
        return {**super().as_dict(), "gen_tok_len": int(self.gen_tok_len),
                "tokens_per_sample": float(self.tokens_per_sample)}


def evaluate(records: Sequence[AccuracyRecord], references: Sequence[str],
             decode: Callable[[list[int]], str], *, jobs: int = 1) -> AccuracyResult:
    """Score `records` against `references` (indexed by qsl_idx) the way the reference does.

    `decode` turns token ids into text and must drop special tokens (the harness passes
    `lambda ids: tokenizer.decode(ids, skip_special_tokens=True)`). `jobs` > 1 scores in that
    many processes (ROUGE-L is quadratic in pure Python: about 45 ms a sample, so a full
    24,576-sample run takes about 20 minutes on one core); the result does not depend on it.
    The processes are spawned, so the program's main module must be safe to import.
    """
    samples, duplicates = samples_to_score(records, jobs)
    predictions: list[str] = []
    targets: list[str] = []
    gen_tok_len = 0
    for record in samples:
        target = reference_text(references, record, "llama2-70b: 24,576 OpenOrca samples")
        tokens = record.tokens
        gen_tok_len += len(tokens)
        text = decode(tokens)
        if not isinstance(text, str):
            raise AccuracyError(f"decode returned a {type(text).__name__}, not text",
                                hint="pass lambda ids: tokenizer.decode(ids, skip_special_tokens=True)")
        predictions.append(postprocess_text(text))
        targets.append(postprocess_text(target))
    fmeasures = rouge_fmeasures(list(zip(targets, predictions, strict=True)), jobs)
    gen_num = len(predictions)
    return AccuracyResult(
        **{name: mean_percent(values) for name, values in fmeasures.items()},
        gen_len=sum(len(p) for p in predictions),
        gen_num=gen_num,
        gen_tok_len=gen_tok_len,
        tokens_per_sample=round(gen_tok_len / gen_num, 1),
        duplicates=duplicates,
    )


def score_log(accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *, jobs: int = 1) -> AccuracyResult:
    """BENCHMARK.score: an accuracy run's log against `dataset`'s references, decoded by the tokenizer in
    `tokenizer_dir` without its special tokens (as SUT.py decodes)."""
    from transformers import AutoTokenizer  # imported when scoring: it takes seconds

    references = [dataset.reference(i) for i in range(len(dataset))]
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    return evaluate(read_accuracy_log(accuracy_log), references,
                    lambda ids: tokenizer.decode(ids, skip_special_tokens=True), jobs=jobs)
