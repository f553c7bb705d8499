"""llama3.1-8b: CNN/DailyMail summaries by Llama-3.1-8B-Instruct, ROUGE and GEN_LEN (language/llama3.1-8b in
mlcommons/inference).

The modules: generation (the reference's sampling, output length, EOS and token dtype, with
their sources), dataset (cnn_eval.json), model (what a checkpoint folder must hold), accuracy
(evaluation.py's metric), tiny (a random Llama 3 and a generated CNN/DailyMail set).
`BENCHMARK` is what the generic parts see; its methods import those modules when called.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx.mlperf.benchmarks.base import Benchmark, Dataset, Generation
from cmx.mlperf.benchmarks.kit.benchmark import BenchmarkDefaults
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts
from cmx.mlperf.benchmarks.kit.model import ModelSpec
from cmx.mlperf.benchmarks.llama3_1_8b.generation import REFERENCE_SAMPLING
from cmx.mlperf.benchmarks.llama3_1_8b.model import MODEL
from cmx.mlperf.scoring.external import ExternalScorer


@dataclass(frozen=True)
class Llama3_1_8b(BenchmarkDefaults):
    family: str = "llama3.1-8b"
    names: tuple[str, ...] = ("llama3.1-8b",)  # one accuracy target (constants.py: 99% of the reference)
    loadgen_model: str = "llama3_1-8b"  # loadgen/mlperf.conf: llama3_1-8b.* and llama3_1-8b-interactive.*
    # SUT_VLLM.py gen_kwargs: greedy (temperature 0, top_k 1, seed 42: generation.py), max_tokens 128, min_tokens 1
    # (2 here: LoadGen needs two tokens for TPOT); vLLM stops at the model's own end ids (generation_config.json)
    generation: Generation = Generation(max_tokens=128, sampling=REFERENCE_SAMPLING)
    model: ModelSpec = MODEL  # model.py: the checkpoint's size, its folder's files, describe, the tiny model

    def load_dataset(self, path: Path) -> Dataset:
        from cmx.mlperf.benchmarks.llama3_1_8b.dataset import load_cnndm

        return load_cnndm(path)

    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1, scorer: ExternalScorer | None = None) -> Mapping[str, float | int]:
        from cmx.mlperf.benchmarks.llama3_1_8b.accuracy import score_log

        return score_log(accuracy_log, dataset, tokenizer_dir, jobs=jobs).as_dict()

    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
        from cmx.mlperf.benchmarks.llama3_1_8b.tiny import make_tiny_cnndm

        return make_tiny_cnndm(dest, tokenizer_dir, rows, seed).path

    def dataset_facts(self) -> DatasetFacts:
        from cmx.mlperf.benchmarks.llama3_1_8b.dataset import FACTS

        return FACTS


BENCHMARK: Benchmark = Llama3_1_8b()
