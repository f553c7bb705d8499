"""The llama3.1-405b accuracy metric: what `language/llama3.1-405b/evaluate-accuracy.py` computes, reproduced.

The reference (mlcommons/inference b66003e):

1. Reads the accuracy log; a record whose `qsl_idx` was seen before is dropped (the first
   counts). Each `data` is read as `--dtype` ids (int32 in README.md and run_accuracy.sh);
   `gen_tok_len` adds up their number (the end id vLLM keeps included).
2. Decodes them with `tokenizer.batch_decode(..., skip_special_tokens=True)` (transformers
   4.46.2, requirements.txt; Llama 3.1 has no slow tokenizer, so `use_fast=False` still gets the
   fast one, which applies clean_up_tokenization_spaces as tokenizer_config.json asks).
3. `postprocess_text`: predictions *and* references are stripped and re-joined one sentence a
   line (nltk `sent_tokenize`), for every metric, the exact-match ones included.
4. Scores each sample with the scorer its `metric` column names:
   - `rouge`: `{'rougeL': 100 * fmeasure}` of `rouge_scorer.RougeScorer(['rougeL'], use_stemmer=True)`
     `.score(target, pred)`;
   - `niah_em`: the UUIDs (`[\\w]{8}-[\\w]{4}-[\\w]{4}-[\\w]{4}-[\\w]{12}`) of target and prediction
     are paired in order (`zip`, so the shorter list decides); for each pair the score is the
     share of the *characters* of the target UUID that occur anywhere in the predicted UUID
     (case-insensitive: the reference iterates over a string, not a list of answers); the sum is
     divided by the number of predicted UUIDs, times 100, `round(..., 2)`; no predicted UUID: 0.0;
   - `qa_em`: if the prediction contains "Answer: ", only what follows its last occurrence
     counts; 100.0 if that is a substring of the target as it is; else whitespace is removed
     and case folded from it and from each `|`-separated target entry, and 100.0 if any entry
     is a substring of it (an empty entry always is), else 0.0.
5. `describe().loc["mean"]` of the per-sample dicts: `rougeL` is the mean over the rouge samples
   only and `exact_match` over the niah and qa samples only (NaN elsewhere is skipped); a key
   whose scorer graded no sample is absent; the keys come in the order they first appear in the
   log's (de-duplicated) record order. Neither mean is rounded.
6. Adds `gen_len` (characters of the post-processed predictions), `gen_num`, `gen_tok_len` and
   `tokens_per_sample = round(gen_tok_len / gen_num, 1)`.

The checker reads ROUGEL, exact_match and TOKENS_PER_SAMPLE (constants.py). Printing: numpy 2
would print `np.int64(...)` for gen_len; cmx writes plain numbers (cmx.mlperf.scoring.accuracy_txt).
Sentences are split by cmx.mlperf.scoring.rouge.split_sentences unless `split=` (e.g.
`nltk.sent_tokenize`) is given, as for llama3.1-8b.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.kit.accuracy import samples_to_score
from cmx.mlperf.loadgen.accuracy_log import AccuracyError, AccuracyRecord, read_accuracy_log
from cmx.mlperf.scoring.decode import reference_decoder
from cmx.mlperf.scoring.rouge import rouge_fmeasures, split_sentences

if TYPE_CHECKING:
    from cmx.mlperf.benchmarks.llama3_1_405b.dataset import Llama405bDataset

_UUID = re.compile(r"[\w]{8}-[\w]{4}-[\w]{4}-[\w]{4}-[\w]{12}")  # evaluate-accuracy.py niah_em
_ANSWER = "Answer: "  # evaluate-accuracy.py qa_em


# --- the per-sample scorers, as evaluate-accuracy.py writes them ------------------------------------

def niah_em(label: str, pred: str) -> float:
    """evaluate-accuracy.py `niah_em(label, pred)['exact_match']`."""
    label_uuids = _UUID.findall(label)
    pred_uuids = _UUID.findall(pred)
    if not pred_uuids:
        return 0.0
    score = sum(sum(1.0 if r.lower() in p.lower() else 0.0 for r in ref) / len(ref)
                for p, ref in zip(pred_uuids, label_uuids, strict=False)) / len(pred_uuids) * 100
    return round(score, 2)


def qa_em(label: str, pred: str) -> float:
    """evaluate-accuracy.py `qa_em(label, pred)['exact_match']`."""
    answer = pred
    if _ANSWER in pred:
        answer = pred[pred.rfind(_ANSWER) + len(_ANSWER):]
    if answer in label:
        return 100.0
    normalized = re.sub(r"\s+", "", answer).lower()
    entries = [re.sub(r"\s+", "", entry).lower() for entry in label.split("|")]
    return 100.0 if any(entry in normalized for entry in entries) else 0.0


# --- the metric ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class AccuracyResult:
    """evaluate-accuracy.py's result dict; `scores` holds the means in the order the reference prints them."""

    scores: tuple[tuple[str, float], ...]  # (rougeL | exact_match, mean), first-appearance order
    gen_len: int
    gen_num: int
    gen_tok_len: int
    tokens_per_sample: float
    duplicates: int = 0

    def as_dict(self) -> dict[str, float | int]:
        return {**{k: float(v) for k, v in self.scores}, "gen_len": int(self.gen_len), "gen_num": int(self.gen_num),
                "gen_tok_len": int(self.gen_tok_len), "tokens_per_sample": float(self.tokens_per_sample)}


def evaluate(records: Sequence[AccuracyRecord], references: Sequence[str], metrics: Sequence[str],
             decode: Callable[[list[int]], str], *, jobs: int = 1,
             split: Callable[[str], list[str]] = split_sentences) -> AccuracyResult:
    """Score int32 `records` against `references` and their `metrics` (both indexed by qsl_idx)."""
    if len(references) != len(metrics):
        raise AccuracyError(f"{len(references)} references but {len(metrics)} metrics: they come from one dataset")
    samples, duplicates = samples_to_score(records, jobs)
    preds, targets, kinds = [], [], []
    gen_tok_len = 0
    for record in samples:
        if not 0 <= record.qsl_idx < len(references):
            raise AccuracyError(f"record seq_id {record.seq_id} has qsl_idx {record.qsl_idx}, outside the "
                                f"{len(references)} samples", hint="evaluate against the dataset the run used")
        ids = record.tokens
        gen_tok_len += len(ids)
        text = decode(ids)
        if not isinstance(text, str):
            raise AccuracyError(f"decode returned a {type(text).__name__}, not text")
        preds.append("\n".join(split(text.strip())))
        targets.append("\n".join(split(references[record.qsl_idx].strip())))
        kinds.append(metrics[record.qsl_idx])
    rouge_rows = [i for i, k in enumerate(kinds) if k == "rouge"]
    rouge_l = rouge_fmeasures([(targets[i], preds[i]) for i in rouge_rows], jobs)["rougeL"] if rouge_rows else []
    per_sample: dict[str, list[float]] = {}  # key -> values, keys in first-appearance order
    rouge_values = iter(rouge_l)
    for i, kind in enumerate(kinds):
        if kind == "rouge":
            per_sample.setdefault("rougeL", []).append(100 * next(rouge_values))
        elif kind == "niah_em":
            per_sample.setdefault("exact_match", []).append(niah_em(targets[i], preds[i]))
        elif kind == "qa_em":
            per_sample.setdefault("exact_match", []).append(qa_em(targets[i], preds[i]))
        else:
            raise AccuracyError(f"sample {samples[i].qsl_idx} names the metric {kind!r}, which "
                                "evaluate-accuracy.py does not have (rouge, niah_em, qa_em)")
    gen_num = len(preds)
    return AccuracyResult(tuple((k, _mean(v)) for k, v in per_sample.items()), sum(len(p) for p in preds), gen_num,
                          gen_tok_len, round(gen_tok_len / gen_num, 1), duplicates)


def _mean(values: list[float]) -> float:
    """pandas' mean of a float64 column without NaN: numpy's (pairwise) sum divided by the count."""
    import numpy as np

    return float(np.sum(np.asarray(values, dtype=np.float64)) / len(values))


def score_log(accuracy_log: Path, dataset: Llama405bDataset, tokenizer_dir: Path, *, jobs: int = 1) -> AccuracyResult:
    """BENCHMARK.score: an accuracy run's log against `dataset`'s references, each by its own metric."""
    n = len(dataset)
    references = [dataset.reference(i) for i in range(n)]
    metrics = [dataset.metric(i) for i in range(n)]
    return evaluate(read_accuracy_log(accuracy_log), references, metrics, reference_decoder(tokenizer_dir), jobs=jobs)


__all__ = ["AccuracyResult", "evaluate", "niah_em", "qa_em", "score_log"]
