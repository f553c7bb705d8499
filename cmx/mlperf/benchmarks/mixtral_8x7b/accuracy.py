"""The mixtral-8x7b accuracy metric: what `language/mixtral-8x7b/evaluate-accuracy.py` computes, reproduced.

The reference (mlcommons/inference b66003e):

1. Reads the accuracy log in file order. `gen_num` counts *every* record, duplicates included
   (it is incremented before the `qsl_idx in seen` check); a record whose `qsl_idx` was seen
   before is then dropped. Each kept record's `data` is read as `--dtype` ids (int32 in
   README.md and run_accuracy.sh) and `gen_tok_len` adds up their number, whatever the subset.
2. Splits the kept records by the row's `dataset`: OpenOrca, GSM8K, anything else MBXP.
3. OpenOrca: `batch_decode(skip_special_tokens=True)`, `postprocess_text` (strip, one sentence a
   line), Hugging Face `evaluate`'s rouge with `use_stemmer=True, use_aggregator=False`, each of
   rouge1, rouge2, rougeL, rougeLsum `float(round(np.mean(v) * 100, 4))`; `gen_len` is the number
   of characters of the post-processed OpenOrca predictions. With no OpenOrca sample there are
   no rouge keys and gen_len is 0.
4. GSM8K: see gsm8k.py; `gsm8k` is `100.0 * correct / total`, unrounded. (With no GSM8K sample
   the reference divides by zero; cmx leaves the key out and says so in the log.)
5. MBXP: see mbxp.py; `mbxp` is the pass@1 percentage, unrounded, or 0 when no MBXP sample
   was in the log.
6. The result dict: the rouge keys, gsm8k, mbxp, gen_len, gen_num, gen_tok_len and
   `tokens_per_sample = round(gen_tok_len / gen_num, 1)`, printed after "Results".

Decoding: the reference loads the slow sentencepiece tokenizer (`use_fast=False`); cmx decodes
with the tokenizer folder's AutoTokenizer (the fast one where there is a tokenizer.json), whose
decode of Mixtral's ids with skip_special_tokens gives the same text for the byte-fallback BPE.
Sentences are split by cmx.mlperf.scoring.rouge's splitter (see there: ROUGE-1/2/L unaffected).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.mixtral_8x7b.dataset import MixtralDataset
from cmx.mlperf.benchmarks.mixtral_8x7b.gsm8k import gsm8k_accuracy
from cmx.mlperf.benchmarks.mixtral_8x7b.mbxp import MbxpProblem, MbxpResult, grade
from cmx.mlperf.loadgen.accuracy_log import AccuracyError, AccuracyRecord, read_accuracy_log
from cmx.mlperf.scoring.rouge import ROUGE_TYPES, mean_percent, postprocess_text, rouge_fmeasures

if TYPE_CHECKING:
    from cmx.mlperf.scoring.sandbox import Outcome

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MixtralAccuracy:
    """evaluate-accuracy.py's result dict; a metric whose subset had no sample is None (absent from the dict)."""

    rouge: tuple[tuple[str, float], ...]  # (rouge1 ... rougeLsum, value); () without OpenOrca samples
    gsm8k: float | None
    mbxp: float | int
    gen_len: int
    gen_num: int
    gen_tok_len: int
    tokens_per_sample: float
    samples: tuple[tuple[str, int], ...] = ()  # scored samples per subset
    mbxp_detail: MbxpResult | None = None

    def as_dict(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {k: float(v) for k, v in self.rouge}
        if self.gsm8k is not None:
            out["gsm8k"] = float(self.gsm8k)
        out["mbxp"] = self.mbxp if isinstance(self.mbxp, int) else float(self.mbxp)
        out.update({"gen_len": int(self.gen_len), "gen_num": int(self.gen_num), "gen_tok_len": int(self.gen_tok_len),
                    "tokens_per_sample": float(self.tokens_per_sample)})
        return out


def evaluate(records: Sequence[AccuracyRecord], dataset: MixtralDataset, decode: Callable[[list[int]], str],
             run_programs: Callable[..., list[Outcome]], *, jobs: int = 1) -> MixtralAccuracy:
    """Score int32 `records` against `dataset` (indexed by qsl_idx) as the reference does.

    `decode` turns ids into text without special tokens; `run_programs` is
    cmx.mlperf.scoring.sandbox.run_programs (or a stand-in with its signature); `jobs` is the
    ROUGE processes and the sandbox's workers. Raises AccuracyError for a log that does not fit
    the dataset, and LanguageUnavailable (before any program runs) for an MBXP language this
    machine cannot grade.
    """
    if jobs < 1:
        raise AccuracyError(f"jobs must be 1 or more, not {jobs}")
    if not records:
        raise AccuracyError("there are no records to evaluate",
                            hint="read them with read_accuracy_log from an accuracy-mode run")
    seen: set[int] = set()
    orca_preds: list[str] = []
    orca_targets: list[str] = []
    gsm_preds: list[str] = []
    gsm_truths: list[str] = []
    problems: list[MbxpProblem] = []
    gen_tok_len = 0
    for record in records:
        i = record.qsl_idx
        if i in seen:
            continue
        seen.add(i)
        if not 0 <= i < len(dataset):
            raise AccuracyError(f"record seq_id {record.seq_id} has qsl_idx {i}, outside the {len(dataset)} samples",
                                hint="evaluate against the dataset the run used")
        tokens = record.tokens
        gen_tok_len += len(tokens)
        text = decode(tokens)
        if not isinstance(text, str):
            raise AccuracyError(f"decode returned a {type(text).__name__}, not text")
        subset = dataset.subset(i)
        if subset == "OpenOrca":
            orca_preds.append(postprocess_text(text))
            orca_targets.append(postprocess_text(dataset.reference(i)))
        elif subset == "GSM8K":
            gsm_preds.append(text)
            gsm_truths.append(dataset.reference(i))
        else:
            problems.append(MbxpProblem.from_row(dataset.sample_id(i), dataset.reference(i), text))
    rouge: tuple[tuple[str, float], ...] = ()
    if orca_preds:
        fmeasures = rouge_fmeasures(list(zip(orca_targets, orca_preds, strict=True)), jobs)
        rouge = tuple((name, mean_percent(fmeasures[name])) for name in ROUGE_TYPES)
    gsm_score = gsm8k_accuracy(gsm_preds, gsm_truths) if gsm_preds else None
    if gsm_score is None:
        _log.warning("no GSM8K sample is in the accuracy log: gsm8k is left out (the reference divides by zero)")
    detail = grade(problems, run_programs, workers=jobs) if problems else None
    gen_num = len(records)
    return MixtralAccuracy(
        rouge=rouge, gsm8k=gsm_score, mbxp=detail.score if detail else 0,
        gen_len=sum(len(p) for p in orca_preds), gen_num=gen_num, gen_tok_len=gen_tok_len,
        tokens_per_sample=round(gen_tok_len / gen_num, 1),
        samples=(("OpenOrca", len(orca_preds)), ("GSM8K", len(gsm_preds)), ("MBXP", len(problems))),
        mbxp_detail=detail)


def reference_decoder(tokenizer_dir: Path | str) -> Callable[[list[int]], str]:
    """`tokenizer.decode(ids, skip_special_tokens=True)` with the folder's tokenizer, as the reference decodes."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=True)


def score_log(accuracy_log: Path, dataset: MixtralDataset, tokenizer_dir: Path, *, jobs: int = 1) -> MixtralAccuracy:
    """BENCHMARK.score: an accuracy run's log against `dataset`, its MBXP programs run in cmx's sandbox."""
    from cmx.mlperf.scoring.sandbox import run_programs

    return evaluate(read_accuracy_log(accuracy_log), dataset, reference_decoder(tokenizer_dir), run_programs,
                    jobs=jobs)


__all__ = ["MixtralAccuracy", "evaluate", "reference_decoder", "score_log"]
