"""deepseek-r1: reasoning answers (math, multiple choice, code) by DeepSeek-R1 (language/deepseek-r1).

The modules: generation (the reference's output length, sampling and model pin, with their sources),
prompts (the chat template applied as the reference SUT applies it), dataset (the processed
pickle), answers and math_grader (eval_accuracy.py's extraction and checks, PRM800K's grader),
livecodebench (the release and tests file its code rows are graded with, by
cmx.mlperf.scoring.livecodebench), accuracy (the metric: exact_match, tokens_per_sample), model (the
checkpoint folder) and tiny (a random DeepseekV3 with MLA and MoE, its tokenizer and chat template, a
dataset of every subset). `BENCHMARK`'s methods
import them when called.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.base import Benchmark, Dataset, Generation
from cmx.mlperf.benchmarks.deepseek_r1.generation import REFERENCE_SAMPLING
from cmx.mlperf.benchmarks.deepseek_r1.model import MODEL
from cmx.mlperf.benchmarks.kit.benchmark import BenchmarkDefaults, dataset_as
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts
from cmx.mlperf.benchmarks.kit.model import ModelSpec
from cmx.mlperf.scoring.external import ExternalScorer

if TYPE_CHECKING:
    from cmx.execute.context import StepContext
    from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetMade


@dataclass(frozen=True)
class DeepSeekR1(BenchmarkDefaults):
    family: str = "deepseek-r1"
    # constants.py (b66003e) MODEL_CONFIG['v5.1'/'v6.0'/'v6.1']['models']: one name, one target
    names: tuple[str, ...] = ("deepseek-r1",)
    loadgen_model: str = "deepseek-r1"  # loadgen/mlperf.conf: deepseek-r1.* and deepseek-r1-interactive.*
    # backend_registry.py: greedy (seed 42: generation.py), MAX_OSL 20000 new tokens; vLLM stops at the model's end id
    generation: Generation = Generation(max_tokens=20_000, sampling=REFERENCE_SAMPLING)
    model: ModelSpec = MODEL  # model.py: the checkpoint's size, its folder's files, describe, the tiny model

    def load_dataset(self, path: Path) -> Dataset:
        from cmx.mlperf.benchmarks.deepseek_r1.dataset import load_deepseek

        return load_deepseek(path)

    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1, scorer: ExternalScorer | None = None) -> Mapping[str, float | int]:
        from cmx.mlperf.benchmarks.deepseek_r1.accuracy import score_log
        from cmx.mlperf.benchmarks.deepseek_r1.dataset import DeepSeekDataset

        return score_log(accuracy_log, dataset_as(DeepSeekDataset, dataset), tokenizer_dir, jobs=jobs).as_dict()

    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
        from cmx.mlperf.benchmarks.deepseek_r1.tiny import make_tiny_dataset

        return make_tiny_dataset(dest, tokenizer_dir, rows, seed).path

    def dataset_facts(self) -> DatasetFacts:
        from cmx.mlperf.benchmarks.deepseek_r1.dataset import FACTS

        return FACTS

    def finish_dataset(self, step: StepContext, path: Path, *, is_tiny: bool) -> DatasetMade:
        """A tiny set made whole; a download moved to source/, with its LiveCodeBench tests and prompt ids."""
        from cmx.mlperf.benchmarks.deepseek_r1.dataset import finish_dataset

        return finish_dataset(step, path, is_tiny=is_tiny)


BENCHMARK: Benchmark = DeepSeekR1()
