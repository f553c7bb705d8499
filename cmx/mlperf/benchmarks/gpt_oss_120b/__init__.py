"""gpt-oss-120b: reasoning (AIME, GPQA, LiveCodeBench) by openai/gpt-oss-120b in the harmony format
(language/gpt-oss-120b).

The modules: generation (output lengths, sampling, end ids, the model, with their sources), dataset
(the MLCommons folder: performance, accuracy and TEST07 sets), accuracy (eval_mlperf_accuracy.py's
parsers, graders and weighted score), livecodebench (the release and folder of code_generation_lite
problems; cmx.mlperf.scoring.livecodebench runs them in the sandbox), model (the folder
get-ml-model-gpt-oss-120b reports), tiny (a random GptOss, a harmony tokenizer, the sets). `BENCHMARK`'s
methods import them when called.

Its performance and accuracy runs read different sets, so `load_dataset_for(folder, mode)` picks
the one a test reads; `load_dataset(folder)` is the accuracy set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.base import Benchmark, Dataset, Generation
from cmx.mlperf.benchmarks.gpt_oss_120b.generation import REFERENCE_SAMPLING
from cmx.mlperf.benchmarks.gpt_oss_120b.model import MODEL
from cmx.mlperf.benchmarks.kit.benchmark import BenchmarkDefaults, dataset_as
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts
from cmx.mlperf.benchmarks.kit.model import ModelSpec
from cmx.mlperf.scoring.external import ExternalScorer

if TYPE_CHECKING:
    from cmx.execute.context import StepContext
    from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetMade


@dataclass(frozen=True)
class GptOss120b(BenchmarkDefaults):
    family: str = "gpt-oss-120b"
    # constants.py (b66003e) MODEL_CONFIG['v6.0'/'v6.1']['models']: one name, one target (99%)
    names: tuple[str, ...] = ("gpt-oss-120b",)
    loadgen_model: str = "gpt-oss-120b"  # loadgen/mlperf.conf: gpt-oss-120b.* and gpt-oss-120b-interactive.*
    # README.md "Generation Configuration": 10240 output tokens for performance runs (and TEST07/TEST09);
    # generation_config.json: sampled at temperature 1.0, no seed; the model's own end ids stop it (generation.py)
    generation: Generation = Generation(max_tokens=10240, sampling=REFERENCE_SAMPLING)
    model: ModelSpec = MODEL  # model.py: the checkpoint's size, its folder's files, describe, the tiny model

    def load_dataset(self, path: Path) -> Dataset:
        """The accuracy set (what accuracy.txt is scored on)."""
        from cmx.mlperf.benchmarks.gpt_oss_120b.dataset import load_set

        return load_set(path)

    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1, scorer: ExternalScorer | None = None) -> Mapping[str, float | int]:
        from cmx.mlperf.benchmarks.gpt_oss_120b.dataset import GptOssDataset
        from cmx.mlperf.benchmarks.gpt_oss_120b.scorer import score_log

        return score_log(accuracy_log, dataset_as(GptOssDataset, dataset), tokenizer_dir, jobs=jobs).as_dict()

    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
        from cmx.mlperf.benchmarks.gpt_oss_120b.tiny import make_tiny_sets

        return make_tiny_sets(dest, tokenizer_dir, rows, seed)

    def dataset_facts(self) -> DatasetFacts:
        from cmx.mlperf.benchmarks.gpt_oss_120b.dataset import FACTS

        return FACTS

    def load_dataset_for(self, path: Path, mode: str) -> Dataset:
        """The set the `mode` test reads: performance/test09 the performance set, accuracy its own, test07 GPQA's."""
        from cmx.mlperf.benchmarks.gpt_oss_120b.dataset import load_set

        return load_set(path, mode)

    def finish_dataset(self, step: StepContext, path: Path, *, is_tiny: bool) -> DatasetMade:
        """The folder of the sets, each checked, with the LiveCodeBench problems of --input lcb_path linked in."""
        from cmx.mlperf.benchmarks.gpt_oss_120b.dataset import finish_dataset

        return finish_dataset(step, path, is_tiny=is_tiny)


BENCHMARK: Benchmark = GptOss120b()
