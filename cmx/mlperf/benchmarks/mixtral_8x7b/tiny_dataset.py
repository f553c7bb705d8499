"""A tiny dataset in the real mixtral-8x7b pickle format, made locally and byte-identically from a seed.

A pandas DataFrame pickle with the twelve columns of 09292024_mixtral_15k_mintoken2_v1.pkl (see
dataset.py), tokenized with the tiny model's tokenizer, whose rows cycle through the three
subsets so that every branch of the metric runs end to end:

- OpenOrca: a generated question under an OpenOrca-style system prompt, a generated answer as
  `gt_output`, stop sequence "</s>";
- GSM8K: a generated word problem about adding two numbers, the sum as `gt_output` and a worked
  answer ending "The answer is N." as `ref_output`, stop sequence "</s>";
- MBXP: a Python function to complete (id `python_<entry point>`), mxeval's `check(candidate)`
  test as `gt_output`, a correct solution closing the code block as `ref_output`, stop sequence
  "\\n```\\n" (the reference's tok_stop_sequence for MBXP rows).

Prompts are framed as the real ones are: a literal "<s>" then "[INST] ... [/INST]", so `tok_input`
starts with the tokenizer's <s> and then the literal one, as the real rows do ([1, 1, 28705, ...],
hf_eval_all.py). The wording of the real prompts (the GSM8K few-shot preamble, the MBXP
instruction) is not published in the reference; the generated wording here only has their
shape. The weights are random, so the scores mean nothing; only the formats are real.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cmx.mlperf.benchmarks.kit.frames import write_frame
from cmx.mlperf.benchmarks.kit.samples import TinyDataset, check_tiny_rows
from cmx.mlperf.benchmarks.mixtral_8x7b.dataset import COLUMNS, SAMPLES, SUBSETS
from cmx.mlperf.benchmarks.synthetic import Lexicon, read_tokenizer

if TYPE_CHECKING:
    from tokenizers import Tokenizer

EOS_STOP, CODE_STOP = "</s>", "\n```\n"  # the real file's stop_sequence values
_SYSTEM_PROMPTS = (
    "You are an AI assistant. User will you give you a task. Your goal is to complete the task as faithfully as "
    "you can.",
    "You are a helpful assistant, who always provide explanation. Think like you are answering to a five year old.",
    "You are an AI assistant that helps people find information.",
)
_GSM8K_PREAMBLE = "As an expert problem solver solve step by step the following mathematical questions."
_OPERATIONS = (("add", "a + b"), ("subtract", "a - b"), ("multiply", "a * b"), ("larger_of", "max(a, b)"))


def make_tiny_dataset(dest: Path, tokenizer_dir: Path, rows: int = SAMPLES, seed: int = 0) -> TinyDataset:
    """Write a pickle of `rows` generated samples (OpenOrca, GSM8K, MBXP in turn), tokenized with the
    tokenizer in `tokenizer_dir`. The same arguments give the same bytes."""
    import pandas as pd

    check_tiny_rows(rows)
    tokenizer = read_tokenizer(Path(tokenizer_dir))
    rng = np.random.Generator(np.random.PCG64([seed, 4]))
    lexicon = Lexicon.shared()
    records = [_SAMPLERS[SUBSETS[row % len(SUBSETS)]](lexicon, rng, row) for row in range(rows)]
    inputs = [r["input"] for r in records]
    tok_input = [e.ids for e in tokenizer.encode_batch(inputs)]
    tok_ref = [e.ids for e in tokenizer.encode_batch([r["ref_output"] for r in records], add_special_tokens=False)]
    stops = {CODE_STOP: _mid_text_ids(tokenizer, CODE_STOP)}
    eos = tokenizer.token_to_id(EOS_STOP)
    columns: dict[str, list[object]] = {c: [] for c in COLUMNS}
    for record, ids, ref_ids in zip(records, tok_input, tok_ref, strict=False):
        stop = record["stop_sequence"]
        for key in ("dataset", "id", "question", "input", "ref_output", "gt_output", "stop_sequence"):
            columns[key].append(record[key])
        columns["tok_input"].append(ids)
        columns["tok_ref_output"].append(ref_ids)
        columns["tok_stop_sequence"].append([eos] if stop == EOS_STOP else stops[stop])
        columns["tok_input_len"].append(len(ids))
        columns["tok_ref_output_len"].append(len(ref_ids))
    frame = pd.DataFrame({c: pd.Series(v, dtype="int64" if c.endswith("_len") else object)
                          for c, v in columns.items()}, columns=list(COLUMNS))
    return TinyDataset(write_frame(frame, dest, protocol=4), rows, seed)


def _mid_text_ids(tokenizer: Tokenizer, text: str) -> list[int]:
    """The ids of `text` as the model writes it after other text: without the "▁" a text start gets
    (the real MBXP tok_stop_sequence, [13, 13940, 28832, 13], has none)."""
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    return ids[1:] if ids and ids[0] == tokenizer.token_to_id("▁") else ids


def _openorca(lexicon: Lexicon, rng: np.random.Generator, row: int) -> dict[str, str]:
    question, answer = lexicon.texts(rng, np.array([int(rng.integers(8, 80)), int(rng.integers(8, 120))]))
    system = _SYSTEM_PROMPTS[int(rng.integers(len(_SYSTEM_PROMPTS)))]
    origin = ("cot", "flan", "niv", "t0")[int(rng.integers(4))]
    return {"dataset": "OpenOrca", "id": f"{origin}.{int(rng.integers(1_000_000))}", "question": question,
            "input": f"<s>[INST] {system}\n\n{question} [/INST]", "ref_output": answer, "gt_output": answer,
            "stop_sequence": EOS_STOP}


def _gsm8k(lexicon: Lexicon, rng: np.random.Generator, row: int) -> dict[str, str]:
    a, b = (int(x) for x in rng.integers(2, 5000, size=2))
    story = lexicon.texts(rng, np.array([int(rng.integers(6, 30))]))[0]
    question = f"{story} One box holds {a:,} items and another holds {b:,} items. How many items are there in all?"
    answer = (f"The first box holds {a} items and the second {b}, so together {a} + {b} = {a + b}. "
              f"The answer is {a + b}.")
    return {"dataset": "GSM8K", "id": f"train.{int(rng.integers(7473))}", "question": question,
            "input": f"<s> [INST] {_GSM8K_PREAMBLE}\n\nQ: {question}\nA: [/INST]", "ref_output": answer,
            "gt_output": str(a + b), "stop_sequence": EOS_STOP}


def _mbxp(lexicon: Lexicon, rng: np.random.Generator, row: int) -> dict[str, str]:
    name, expression = _OPERATIONS[int(rng.integers(len(_OPERATIONS)))]
    entry_point = f"{name}_{row}"
    pairs = [tuple(int(x) for x in rng.integers(-50, 50, size=2)) for _ in range(3)]
    asserts = "".join(f"    assert candidate({a}, {b}) == {eval(expression, {'a': a, 'b': b})}\n"
                      for a, b in pairs)
    prompt = f'def {entry_point}(a, b):\n    """Return {expression} for the two numbers."""\n'
    return {"dataset": "MBXP", "id": f"python_{entry_point}", "question": prompt,
            "input": f"<s> [INST] Complete the following code. Be concise, don't output anything that isn't "
                     f"necessary.\n```python\n{prompt}``` [/INST]",
            "ref_output": f"{prompt}    return {expression}\n```\n",
            "gt_output": f"\n\ndef check(candidate):\n{asserts}",
            "stop_sequence": CODE_STOP}


_SAMPLERS = {"OpenOrca": _openorca, "GSM8K": _gsm8k, "MBXP": _mbxp}


__all__ = ["CODE_STOP", "EOS_STOP", "make_tiny_dataset"]
