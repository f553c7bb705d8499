"""mixtral-8x7b: OpenOrca, GSM8K and MBXP prompts by Mixtral-8x7B-Instruct-v0.1 (language/mixtral-8x7b).

The modules: generation (the reference's sampling and output length, with their sources), dataset
(the processed pickle), accuracy (evaluate-accuracy.py: ROUGE, tokens_per_sample), gsm8k (its answer
extraction), mbxp (evaluate_mbxp.py and mxeval's harnesses, run in cmx's sandbox), model (the
checkpoint folder), tiny_model and tiny_dataset (a random Mixtral and a generated set in the real
format). `BENCHMARK`'s methods import them when called.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx.mlperf.benchmarks.base import Benchmark, Dataset, Generation
from cmx.mlperf.benchmarks.kit.benchmark import BenchmarkDefaults, dataset_as
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts
from cmx.mlperf.benchmarks.kit.model import ModelSpec
from cmx.mlperf.benchmarks.mixtral_8x7b.generation import MAX_NEW_TOKENS, REFERENCE_SAMPLING
from cmx.mlperf.benchmarks.mixtral_8x7b.model import MODEL
from cmx.mlperf.scoring.external import ExternalScorer


@dataclass(frozen=True)
class Mixtral8x7b(BenchmarkDefaults):
    family: str = "mixtral-8x7b"
    # constants.py (b66003e) MODEL_CONFIG['v5.1'/'v6.0']['models']: one name, one target (99%)
    names: tuple[str, ...] = ("mixtral-8x7b",)
    loadgen_model: str = "mixtral-8x7b"  # loadgen/mlperf.conf: mixtral-8x7b.*
    interactive: bool = False  # mlperf.conf has no mixtral-8x7b-interactive
    # SUT.py gen_kwargs: greedy (do_sample False), max_new_tokens 1024, min_new_tokens 2; EOS </s>
    generation: Generation = Generation(max_tokens=MAX_NEW_TOKENS, sampling=REFERENCE_SAMPLING)
    model: ModelSpec = MODEL  # model.py: the checkpoint's size, its folder's files, describe, the tiny model

    def load_dataset(self, path: Path) -> Dataset:
        from cmx.mlperf.benchmarks.mixtral_8x7b.dataset import load_mixtral

        return load_mixtral(path)

    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1, scorer: ExternalScorer | None = None) -> Mapping[str, float | int]:
        from cmx.mlperf.benchmarks.mixtral_8x7b.accuracy import score_log
        from cmx.mlperf.benchmarks.mixtral_8x7b.dataset import MixtralDataset

        return score_log(accuracy_log, dataset_as(MixtralDataset, dataset), tokenizer_dir, jobs=jobs).as_dict()

    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
        from cmx.mlperf.benchmarks.mixtral_8x7b.tiny_dataset import make_tiny_dataset

        return make_tiny_dataset(dest, tokenizer_dir, rows, seed).path

    def dataset_facts(self) -> DatasetFacts:
        from cmx.mlperf.benchmarks.mixtral_8x7b.dataset import FACTS

        return FACTS


BENCHMARK: Benchmark = Mixtral8x7b()
