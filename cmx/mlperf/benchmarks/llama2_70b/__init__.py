"""llama2-70b: OpenOrca prompts, Llama-2-70b-chat, ROUGE and tokens per sample (language/llama2-70b in
mlcommons/inference).

The modules: generation (the reference's sampling and output length, with their sources), dataset
(the processed OpenOrca pickle), model (what a checkpoint folder must hold), accuracy (the
reference's evaluate-accuracy.py), tiny (a random Llama 2 and a generated OpenOrca). `BENCHMARK` is what
the generic parts see; its methods import those modules when called.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx.mlperf.benchmarks.base import Benchmark, Dataset, Generation
from cmx.mlperf.benchmarks.kit.benchmark import BenchmarkDefaults
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts
from cmx.mlperf.benchmarks.kit.model import ModelSpec
from cmx.mlperf.benchmarks.llama2_70b.generation import MAX_NEW_TOKENS, REFERENCE_SAMPLING
from cmx.mlperf.benchmarks.llama2_70b.model import MODEL
from cmx.mlperf.scoring.external import ExternalScorer


@dataclass(frozen=True)
class Llama2_70b(BenchmarkDefaults):
    family: str = "llama2-70b"
    names: tuple[str, ...] = ("llama2-70b-99", "llama2-70b-99.9")
    loadgen_model: str = "llama2-70b"  # loadgen/mlperf.conf: llama2-70b.* and llama2-70b-interactive.*
    # language/llama2-70b/SUT.py gen_kwargs: greedy (do_sample False, num_beams 1), max_new_tokens 1024,
    # min_new_tokens 1 (2 here: LoadGen needs two tokens for TPOT); EOS is the tokenizer's </s>
    generation: Generation = Generation(max_tokens=MAX_NEW_TOKENS, sampling=REFERENCE_SAMPLING)
    model: ModelSpec = MODEL  # model.py: the checkpoint's size, its folder's files, describe, the tiny model

    def load_dataset(self, path: Path) -> Dataset:
        from cmx.mlperf.benchmarks.llama2_70b.dataset import load_openorca

        return load_openorca(path)

    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1, scorer: ExternalScorer | None = None) -> Mapping[str, float | int]:
        from cmx.mlperf.benchmarks.llama2_70b.accuracy import score_log

        return score_log(accuracy_log, dataset, tokenizer_dir, jobs=jobs).as_dict()

    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
        from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_openorca

        return make_tiny_openorca(dest, tokenizer_dir, rows, seed).path

    def dataset_facts(self) -> DatasetFacts:
        from cmx.mlperf.benchmarks.llama2_70b.dataset import FACTS

        return FACTS


BENCHMARK: Benchmark = Llama2_70b()
