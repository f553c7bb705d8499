"""An accuracy log scored as eval_mlperf_accuracy.py scores it: int32 ids decoded with special tokens kept,
graded per row.

The reference decodes each record's hex data as little-endian int32 ids (`decode_hex_to_tokens`),
detokenizes with `skip_special_tokens=False` (so the harmony channel markers stay for
`extract_final_section`), skips a qsl_idx beyond the set, and grades every record it reads
(accuracy mode logs each sample once). LiveCodeBench rows need the problems' tests, read from the
`livecodebench/` folder beside the sets (livecodebench.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.gpt_oss_120b.accuracy import GptOssAccuracy, evaluator_for, grade
from cmx.mlperf.benchmarks.gpt_oss_120b.livecodebench import FOLDER, read_problems, run_rows
from cmx.mlperf.benchmarks.synthetic import read_tokenizer

if TYPE_CHECKING:
    from cmx.mlperf.benchmarks.gpt_oss_120b.dataset import GptOssDataset

log = logging.getLogger(__name__)


def score_log(accuracy_log: Path, dataset: GptOssDataset, tokenizer_dir: Path, *, jobs: int = 1) -> GptOssAccuracy:
    """The accuracy of an accuracy run's log against `dataset` (a GptOssDataset), decoding with the tokenizer
    in `tokenizer_dir`."""
    from cmx.mlperf.loadgen.accuracy_log import read_accuracy_log

    records = [r for r in read_accuracy_log(accuracy_log) if r.qsl_idx < len(dataset)]
    tokenizer = read_tokenizer(Path(tokenizer_dir))
    token_lists = [r.tokens for r in records]
    texts = tokenizer.decode_batch(token_lists, skip_special_tokens=False)
    names = [dataset.dataset(r.qsl_idx) for r in records]
    truths = [dataset.reference(r.qsl_idx) for r in records]
    needs_code = any(evaluator_for(n).kind == "code" for n in names)
    problems = read_problems(Path(dataset.path).parent.parent / FOLDER) if needs_code else {}

    def run_code(jobs_: Sequence[tuple[int, str, str]]) -> dict[int, bool]:
        return run_rows(jobs_, problems, workers=max(1, jobs))

    result = grade(texts, names, truths, [len(t) for t in token_lists], run_code)
    for s in result.subsets:
        log.info("%s: %d of %d correct (repeats %d)", s.name, s.correct, s.total, s.repeats)
    return result


__all__ = ["score_log"]
