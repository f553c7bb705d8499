"""deepseek-r1: reasoning answers (math, multiple choice, code) by DeepSeek-R1 (language/deepseek-r1).

The modules: generation (the reference's output length, sampling and model pin, with their sources),
prompts (the chat template applied as the reference SUT applies it), dataset (the processed
pickle), answers and math_grader (eval_accuracy.py's extraction and checks, PRM800K's grader),
livecodebench (the release and tests file its code rows are graded with, by
cmx.mlperf.scoring.livecodebench), accuracy (the metric: exact_match, tokens_per_sample), model (the
checkpoint folder) and tiny (a random DeepseekV3 with MLA and MoE, its tokenizer and chat template, a
dataset of every subset). `BENCHMARK` imports
them when called.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.base import Dataset, Generation
from cmx.mlperf.benchmarks.deepseek_r1.generation import REFERENCE_SAMPLING
from cmx.mlperf.benchmarks.deepseek_r1.model import MODEL
from cmx.mlperf.benchmarks.kit.model import ModelDefaults, ModelSpec

if TYPE_CHECKING:
    from cmx.execute.context import StepContext
    from cmx.mlperf.benchmarks.kit.dataset_step import DatasetFacts, DatasetMade


@dataclass(frozen=True)
class DeepSeekR1(ModelDefaults):
    family: str = "deepseek-r1"
    # constants.py (b66003e) MODEL_CONFIG['v5.1'/'v6.0'/'v6.1']['models']: one name, one target
    names: tuple[str, ...] = ("deepseek-r1",)
    # loadgen/mlperf.conf: deepseek-r1.* and deepseek-r1-interactive.*
    loadgen_models: Mapping[str, str] = field(default_factory=lambda: {
        "Offline": "deepseek-r1", "Server": "deepseek-r1", "Interactive": "deepseek-r1-interactive"})
    # backend_registry.py: greedy (seed 42: generation.py), MAX_OSL 20000 new tokens; vLLM stops at the model's end id
    generation: Generation = Generation(max_tokens=20_000, sampling=REFERENCE_SAMPLING)
    model: ModelSpec = MODEL  # model.py: the checkpoint's size, its folder's files, describe, the tiny model

    def load_dataset(self, path: Path) -> Dataset:
        from cmx.mlperf.benchmarks.deepseek_r1.dataset import load_deepseek

        return load_deepseek(path)

    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1) -> Mapping[str, float | int]:
        from cmx.mlperf.benchmarks.deepseek_r1.accuracy import evaluate, reference_decoder
        from cmx.mlperf.benchmarks.deepseek_r1.livecodebench import load_tests
        from cmx.mlperf.loadgen.accuracy_log import read_accuracy_log

        n = len(dataset)
        answers = [dataset.answer(i) for i in range(n)]  # type: ignore[attr-defined]
        subsets = [dataset.subset(i) for i in range(n)]  # type: ignore[attr-defined]
        tests = dataset.tests_path  # type: ignore[attr-defined]
        result = evaluate(read_accuracy_log(accuracy_log), answers, subsets, reference_decoder(tokenizer_dir),
                          lambda: load_tests(tests), jobs=jobs)
        return result.as_dict()

    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
        from cmx.mlperf.benchmarks.deepseek_r1.tiny import make_tiny_dataset

        return make_tiny_dataset(dest, tokenizer_dir, rows, seed).path

    def dataset_facts(self) -> DatasetFacts:
        from cmx.mlperf.benchmarks.deepseek_r1.dataset import SAMPLES
        from cmx.mlperf.benchmarks.kit.dataset_step import DatasetFacts

        return DatasetFacts(SAMPLES, what="deepseek-r1-format")

    def finish_dataset(self, step: StepContext, path: Path, *, is_tiny: bool) -> DatasetMade:
        from cmx.mlperf.benchmarks.deepseek_r1.dataset import finish_dataset

        return finish_dataset(step, path, is_tiny=is_tiny)


BENCHMARK = DeepSeekR1()
