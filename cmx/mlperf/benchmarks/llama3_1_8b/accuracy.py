"""The llama3.1-8b accuracy metric: score a LoadGen accuracy log with ROUGE, write accuracy.txt as the checker reads it.

What `language/llama3.1-8b/evaluation.py` of mlcommons/inference does, and cmx reproduces:
records whose `qsl_idx` was seen before are dropped (the first counts); each `data` is read as
token ids of `--dtype` and decoded with `tokenizer.batch_decode(..., skip_special_tokens=True)`;
predictions and references (the dataset's `output`) are stripped and split into sentences
joined by newlines (nltk `sent_tokenize`); ROUGE comes from Hugging Face `evaluate`'s "rouge"
(`rouge_score.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], use_stemmer=True)`,
`score(reference, prediction)` pair by pair, `use_aggregator=False`); each metric is
`round(np.mean(fmeasures) * 100, 4)`; `gen_len` is the sum of the characters of the
post-processed predictions and `gen_num` their number. Reading the log, de-duplication,
sentence splitting and ROUGE scoring are shared (cmx.mlperf.loadgen.accuracy_log, cmx.mlperf.scoring.rouge).

Where llama3.1-8b differs from llama2-70b:

- Keys: rouge1, rouge2, rougeL, rougeLsum, gen_len, gen_num; no gen_tok_len and no
  tokens_per_sample. The checker (tools/submission/submission_checker/constants.py) checks
  ROUGE1, ROUGE2, ROUGEL, ROUGELSUM at 99% of 38.7792, 15.9075, 24.4957, 35.793 and GEN_LEN
  between 90% and 110% of 8167644: rougeLsum and gen_len count here.
- Printing (cmx.mlperf.scoring.accuracy_txt writes the file): the reference prints each ROUGE value as a
  string (`'rouge1': '38.7792'`) and gen_len as a numpy integer, which numpy 2 prints `np.int64(8167644)`, a
  form the checker's GEN_LEN pattern `'gen_len':\\s([\\d.]+)` does not match. cmx prints plain numbers
  (`'rouge1': 38.7792`, `'gen_len': 8167644`), which every pattern matches.
- dtype: the SUT logs int32 ids, but evaluation.py's `--dtype` defaults to int64 (README.md and
  run_accuracy.sh pass int32). `evaluate` takes the dtype, and refuses an int64 log read as
  int32 (every other int32 word zero) and an int32 log read as int64.
- Decoding: Llama-3.1-8B-Instruct's tokenizer_config.json sets clean_up_tokenization_spaces,
  which transformers 4.46 (the reference's requirements.txt) applies when decoding (" ." becomes
  ".", " n't" becomes "n't"...) and transformers 5 ignores for BPE tokenizers.
  `reference_decoder` decodes as 4.46 does, whatever transformers is installed.
- Sentences: nltk's punkt data must be downloaded at run time; cmx splits with
  cmx.mlperf.scoring.rouge.split_sentences, whose newlines can differ from punkt's in rare places,
  which moves rougeLsum and gen_len (checked here) slightly. Pass `split=nltk.sent_tokenize`
  where punkt_tab is installed to match the reference exactly.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cmx.mlperf.benchmarks.kit.accuracy import RougeResult, reference_text, samples_to_score
from cmx.mlperf.loadgen.accuracy_log import AccuracyError, AccuracyLogError, AccuracyRecord, read_accuracy_log
from cmx.mlperf.scoring.decode import reference_decoder
from cmx.mlperf.scoring.rouge import (
    ROUGE_TYPES,
    mean_percent,
    rouge_fmeasures,
    split_sentences,
)

if TYPE_CHECKING:
    from cmx.mlperf.benchmarks.base import Dataset

TokenDtype = Literal["int32", "int64"]
_ITEMSIZE = {"int32": 4, "int64": 8}
_INT32_MAX = 2**31 - 1
_MIN_WORDS_FOR_DTYPE_GUESS = 8  # int32 words needed before "every other one is zero" means int64


@dataclass(frozen=True)
class AccuracyResult(RougeResult):
    """The llama3.1-8b metrics (ROUGE's alone), rounded as the reference rounds them; `duplicates` counts skipped
    records."""

    duplicates: int = 0


# --- the metric --------------------------------------------------------------------------------

def evaluate(records: Sequence[AccuracyRecord], references: Sequence[str], decode: Callable[[list[int]], str], *,
             dtype: TokenDtype = "int32", jobs: int = 1,
             split: Callable[[str], list[str]] = split_sentences) -> AccuracyResult:
    """Score `records` (from cmx.mlperf.loadgen.accuracy_log.read_accuracy_log) against `references` (indexed
    by qsl_idx).

    `decode` turns token ids into text without special tokens (`reference_decoder` does it as the
    reference does). `dtype` is the width of the logged ids. `jobs` > 1 scores in that many
    spawned processes (the result does not depend on it). `split` splits a text into sentences.
    """
    if dtype not in _ITEMSIZE:
        raise AccuracyError(f"dtype must be int32 or int64, not {dtype!r}")
    samples, duplicates = samples_to_score(records, jobs)
    if dtype == "int32" and _looks_like_int64(samples):
        raise AccuracyLogError("the log holds int64 token ids (every other int32 word is zero), not int32",
                               hint="evaluate it with dtype=\"int64\" (evaluation.py's default); cmx's SUT logs int32")
    predictions: list[str] = []
    targets: list[str] = []
    for record in samples:
        text = decode(token_ids(record, dtype))
        if not isinstance(text, str):
            raise AccuracyError(f"decode returned a {type(text).__name__}, not text",
                                hint="pass reference_decoder(MODEL_DIR), or a function of the token ids that "
                                     "returns tokenizer.decode(ids, skip_special_tokens=True)")
        predictions.append("\n".join(split(text.strip())))
        target = reference_text(references, record, "llama3.1-8b: 13,368 CNN/DailyMail samples")
        targets.append("\n".join(split(target.strip())))
    fmeasures = rouge_fmeasures(list(zip(targets, predictions, strict=True)), jobs)
    return AccuracyResult(**{name: mean_percent(fmeasures[name]) for name in ROUGE_TYPES},
                          gen_len=sum(len(p) for p in predictions), gen_num=len(predictions), duplicates=duplicates)


def token_ids(record: AccuracyRecord, dtype: TokenDtype = "int32") -> list[int]:
    """The output token ids of `record`, its `data` read as little-endian `dtype` integers."""
    if dtype == "int32":
        return record.tokens
    if len(record.data) % 8:
        raise AccuracyLogError(f"record seq_id {record.seq_id} (qsl_idx {record.qsl_idx}) has {len(record.data)} "
                               "bytes of data, not a whole number of int64 token ids",
                               hint="the log holds int32 ids: evaluate it with dtype=\"int32\"")
    values = array("q")
    values.frombytes(record.data)
    if sys.byteorder == "big":  # pragma: no cover - LoadGen logs little-endian bytes
        values.byteswap()
    if values and (min(values) < 0 or max(values) > _INT32_MAX):
        raise AccuracyLogError(f"record seq_id {record.seq_id} (qsl_idx {record.qsl_idx}) read as int64 holds "
                               f"{max(values) if min(values) >= 0 else min(values)}, not a token id",
                               hint="the log holds int32 ids: evaluate it with dtype=\"int32\"")
    return values.tolist()


def _looks_like_int64(records: Sequence[AccuracyRecord]) -> bool:
    """Whether int32 words come in pairs whose second word is always zero: int64 ids, little-endian."""
    high_words = 0
    for record in records:
        words = record.tokens
        if len(words) % 2 or any(words[1::2]):
            return False
        high_words += len(words) // 2
    return high_words * 2 >= _MIN_WORDS_FOR_DTYPE_GUESS


def score_log(accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *, jobs: int = 1) -> AccuracyResult:
    """BENCHMARK.score: an accuracy run's log against `dataset`'s references, decoded as the reference decodes."""
    references = [dataset.reference(i) for i in range(len(dataset))]
    return evaluate(read_accuracy_log(accuracy_log), references, reference_decoder(tokenizer_dir), jobs=jobs)


__all__ = ["AccuracyResult", "TokenDtype", "evaluate", "score_log",
           "token_ids"]
