"""A tiny dataset in the real llama3.1-405b pickle format, made locally and byte-identically from a seed.

The tiny model is llama3.1-8b's (the same Llama 3.1 architecture and tokenizer layout), reached
through the registry (`benchmark_for`), not by importing that package. The dataset is a pandas
DataFrame pickle with the columns the reference reads (see dataset.py), and its rows cycle through
the three scorers of evaluate-accuracy.py so that every branch of the metric runs end to end:

- `rouge`: a generated article to summarise, a generated summary as `gt_output`;
- `niah_em`: a haystack of generated sentences with one "special magic uuid" in it, the
  question for it, and the UUID as `gt_output`;
- `qa_em`: a generated passage, a question, and two `|`-separated acceptable answers.

The weights are random, so the scores mean nothing; only the formats are real.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cmx.mlperf.benchmarks.kit.frames import write_frame
from cmx.mlperf.benchmarks.kit.samples import TinyDataset, check_tiny_rows
from cmx.mlperf.benchmarks.llama3_1_405b.dataset import (
    METRICS,
    REQUIRED_COLUMNS,
    SAMPLES,
)
from cmx.mlperf.benchmarks.synthetic import Lexicon, read_llama3_tokenizer

BOS = "<|begin_of_text|>"


def make_tiny_dataset(dest: Path, tokenizer_dir: Path, rows: int = SAMPLES, seed: int = 0) -> TinyDataset:
    """Write a pickle of `rows` generated samples (rouge, niah_em, qa_em in turn), tokenized with the
    tokenizer in `tokenizer_dir` (<|begin_of_text|> first). The same arguments give the same bytes."""
    import pandas as pd

    check_tiny_rows(rows)
    tokenizer = read_llama3_tokenizer(Path(tokenizer_dir), BOS, "Answer:")
    rng = np.random.Generator(np.random.PCG64([seed, 3]))
    lexicon = Lexicon.shared()
    prompts, answers, metrics = [], [], []
    for row in range(rows):
        metric = METRICS[row % len(METRICS)]
        prompt, answer = _SAMPLERS[metric](lexicon, rng)
        prompts.append(prompt)
        answers.append(answer)
        metrics.append(metric)
    ids = [e.ids for e in tokenizer.encode_batch(prompts)]
    frame = pd.DataFrame({"input": prompts, "tok_input": ids, "tok_input_len": [len(i) for i in ids],
                          "gt_output": answers, "metric": metrics}, columns=list(REQUIRED_COLUMNS))
    return TinyDataset(write_frame(frame, dest, protocol=4), rows, seed)


def _uuid(rng: np.random.Generator) -> str:
    digits = "".join("0123456789abcdef"[d] for d in rng.integers(0, 16, size=32))
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def _rouge(lexicon: Lexicon, rng: np.random.Generator) -> tuple[str, str]:
    article, summary = lexicon.texts(rng, np.array([int(rng.integers(40, 160)), int(rng.integers(12, 30))]))
    return f"Summarize the following text.\n\n{article}\n\nSummary:", summary


def _niah(lexicon: Lexicon, rng: np.random.Generator) -> tuple[str, str]:
    before, after = lexicon.texts(rng, rng.integers(20, 80, size=2))
    key, answer = lexicon.texts(rng, np.array([2]), last="")[0].lower().rstrip("."), _uuid(rng)
    return (f"{before} One of the special magic uuids for {key} is: {answer}. {after}\n\n"
            f"What is the special magic uuid for {key} mentioned in the provided text? Answer:", answer)


def _qa(lexicon: Lexicon, rng: np.random.Generator) -> tuple[str, str]:
    passage = lexicon.texts(rng, np.array([int(rng.integers(30, 120))]))[0]
    question = lexicon.texts(rng, np.array([8]), last="?")[0]
    first, second = lexicon.texts(rng, np.array([2, 3]), last="")
    return f"{passage}\n\nQuestion: {question}\nAnswer:", f"{first.rstrip('.')}|{second.rstrip('.')}"


_SAMPLERS = {"rouge": _rouge, "niah_em": _niah, "qa_em": _qa}


__all__ = ["make_tiny_dataset"]
