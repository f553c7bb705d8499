"""mixtral-8x7b: OpenOrca, GSM8K and MBXP prompts by Mixtral-8x7B-Instruct-v0.1 (language/mixtral-8x7b).

The modules: generation (the reference's sampling and output length, with their sources), dataset
(the processed pickle), accuracy (evaluate-accuracy.py: ROUGE, tokens_per_sample), gsm8k (its answer
extraction), mbxp (evaluate_mbxp.py and mxeval's harnesses, run in cmx's sandbox), model (the
checkpoint folder), tiny_model and tiny_dataset (a random Mixtral and a generated set in the real
format). `BENCHMARK` imports them when called.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.base import Dataset, Generation
from cmx.mlperf.benchmarks.kit.model import ModelDefaults, ModelSpec
from cmx.mlperf.benchmarks.mixtral_8x7b.generation import MAX_NEW_TOKENS, REFERENCE_SAMPLING
from cmx.mlperf.benchmarks.mixtral_8x7b.model import MODEL

if TYPE_CHECKING:
    from cmx.mlperf.benchmarks.kit.dataset_step import DatasetFacts


@dataclass(frozen=True)
class Mixtral8x7b(ModelDefaults):
    family: str = "mixtral-8x7b"
    # constants.py (b66003e) MODEL_CONFIG['v5.1'/'v6.0']['models']: one name, one target (99%)
    names: tuple[str, ...] = ("mixtral-8x7b",)
    # loadgen/mlperf.conf: mixtral-8x7b.* (no interactive model)
    loadgen_models: Mapping[str, str] = field(default_factory=lambda: {
        "Offline": "mixtral-8x7b", "Server": "mixtral-8x7b"})
    # SUT.py gen_kwargs: greedy (do_sample False), max_new_tokens 1024, min_new_tokens 2; EOS </s>
    generation: Generation = Generation(max_tokens=MAX_NEW_TOKENS, sampling=REFERENCE_SAMPLING)
    model: ModelSpec = MODEL  # model.py: the checkpoint's size, its folder's files, describe, the tiny model

    def load_dataset(self, path: Path) -> Dataset:
        from cmx.mlperf.benchmarks.mixtral_8x7b.dataset import load_mixtral

        return load_mixtral(path)

    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1) -> Mapping[str, float | int]:
        from cmx.mlperf.benchmarks.mixtral_8x7b.accuracy import (
            evaluate,
            reference_decoder,
        )
        from cmx.mlperf.loadgen.accuracy_log import read_accuracy_log
        from cmx.mlperf.scoring.sandbox import run_programs

        decode = reference_decoder(tokenizer_dir)
        result = evaluate(read_accuracy_log(accuracy_log), dataset, decode, run_programs,  # type: ignore[arg-type]
                          jobs=jobs)
        return result.as_dict()

    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
        from cmx.mlperf.benchmarks.mixtral_8x7b.tiny_dataset import make_tiny_dataset

        return make_tiny_dataset(dest, tokenizer_dir, rows, seed).path

    def dataset_facts(self) -> DatasetFacts:
        from cmx.mlperf.benchmarks.kit.dataset_step import DatasetFacts
        from cmx.mlperf.benchmarks.mixtral_8x7b.dataset import SAMPLES

        # the name when the R2 listing is not read: the file of README.md's wget alternative
        return DatasetFacts(SAMPLES, default_name="09292024_mixtral_15k_mintoken2_v1.pkl")


BENCHMARK = Mixtral8x7b()
