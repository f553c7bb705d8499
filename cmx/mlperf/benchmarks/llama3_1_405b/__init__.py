"""llama3.1-405b: long-context summaries, needle-in-a-haystack and QA by Llama-3.1-405B-Instruct
(language/llama3.1-405b).

The modules: generation (the reference's sampling and output length, with their sources), dataset
(the processed pickle), accuracy (evaluate-accuracy.py: ROUGE-L, the two exact-match scorers,
tokens_per_sample), tiny (a generated dataset in the real format; the tiny model is llama3.1-8b's,
the same architecture, reached through the registry). `BENCHMARK`'s methods import them when called.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from cmx.mlperf.benchmarks.base import Benchmark, Dataset, Generation
from cmx.mlperf.benchmarks.kit.benchmark import BenchmarkDefaults, dataset_as
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts
from cmx.mlperf.benchmarks.kit.model import GB, ModelDefaults, ModelSpec
from cmx.mlperf.benchmarks.llama3_1_405b.generation import REFERENCE_SAMPLING
from cmx.mlperf.scoring.external import ExternalScorer


@dataclass(frozen=True)
class Llama3_1_405b(BenchmarkDefaults):
    family: str = "llama3.1-405b"
    # constants.py (b66003e) MODEL_CONFIG['v5.1'/'v6.0']['models']: one name, one target (99%)
    names: tuple[str, ...] = ("llama3.1-405b",)
    loadgen_model: str = "llama3_1-405b"  # loadgen/mlperf.conf: llama3_1-405b.* and llama3_1-405b-interactive.*
    # SUT_VLLM.py gen_kwargs: greedy (temperature 1, top_k 1, seed 42: generation.py), max_tokens 2000, min_tokens 1
    # (2 here: LoadGen needs two tokens for TPOT); vLLM stops at the model's own end ids
    generation: Generation = Generation(max_tokens=2000, sampling=REFERENCE_SAMPLING)

    def load_dataset(self, path: Path) -> Dataset:
        from cmx.mlperf.benchmarks.llama3_1_405b.dataset import load_llama405b

        return load_llama405b(path)

    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1, scorer: ExternalScorer | None = None) -> Mapping[str, float | int]:
        from cmx.mlperf.benchmarks.llama3_1_405b.accuracy import score_log
        from cmx.mlperf.benchmarks.llama3_1_405b.dataset import Llama405bDataset

        return score_log(accuracy_log, dataset_as(Llama405bDataset, dataset), tokenizer_dir, jobs=jobs).as_dict()

    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
        from cmx.mlperf.benchmarks.llama3_1_405b.tiny import make_tiny_dataset

        return make_tiny_dataset(dest, tokenizer_dir, rows, seed).path

    def dataset_facts(self) -> DatasetFacts:
        from cmx.mlperf.benchmarks.llama3_1_405b.dataset import FACTS

        return FACTS

    @property
    def model(self) -> ModelSpec:
        """llama3.1-8b's model side (a Llama 3.1 folder holds the same files at 8B and 405B) at 405B's size:
        Llama-3.1-405B-Instruct's 405.9 B parameters in bfloat16, about 800 GB of safetensors
        (get-ml-model-llama3-405b's include help)."""
        return replace(_llama3_1_8b().model, size=800 * GB)


def _llama3_1_8b() -> ModelDefaults:
    """llama3.1-8b's BENCHMARK, through the registry (a benchmark package imports no other)."""
    from cmx.mlperf.benchmarks import benchmark_for

    bench = benchmark_for("llama3.1-8b")
    assert isinstance(bench, ModelDefaults)  # it is built on the kit's defaults
    return bench


BENCHMARK: Benchmark = Llama3_1_405b()
