"""gpt-oss-120b: reasoning (AIME, GPQA, LiveCodeBench) by openai/gpt-oss-120b in the harmony format (language/gpt-oss-120b).

The modules: generation (output lengths, sampling, end ids, the model, with their sources), dataset
(the MLCommons folder: performance, accuracy and TEST07 sets), accuracy (eval_mlperf_accuracy.py's
parsers, graders and weighted score), livecodebench (the release and folder of code_generation_lite
problems; cmx.mlperf.scoring.livecodebench runs them in the sandbox), model (the folder
get-ml-model-gpt-oss-120b reports), tiny (a random GptOss, a harmony tokenizer, the sets). `BENCHMARK` imports them when called.

Its performance and accuracy runs read different sets, so `load_dataset_for(folder, mode)` picks
the one a test reads; `load_dataset(folder)` is the accuracy set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.base import Dataset, Generation
from cmx.mlperf.benchmarks.gpt_oss_120b.generation import REFERENCE_SAMPLING
from cmx.mlperf.benchmarks.gpt_oss_120b.model import MODEL
from cmx.mlperf.benchmarks.kit.model import ModelDefaults, ModelSpec

if TYPE_CHECKING:
    from cmx.execute.context import StepContext
    from cmx.mlperf.benchmarks.kit.dataset_step import DatasetFacts, DatasetMade


@dataclass(frozen=True)
class GptOss120b(ModelDefaults):
    family: str = "gpt-oss-120b"
    # constants.py (b66003e) MODEL_CONFIG['v6.0'/'v6.1']['models']: one name, one target (99%)
    names: tuple[str, ...] = ("gpt-oss-120b",)
    # loadgen/mlperf.conf: gpt-oss-120b.* and gpt-oss-120b-interactive.*
    loadgen_models: Mapping[str, str] = field(default_factory=lambda: {
        "Offline": "gpt-oss-120b", "Server": "gpt-oss-120b", "Interactive": "gpt-oss-120b-interactive"})
    # README.md "Generation Configuration": 10240 output tokens for performance runs (and TEST07/TEST09);
    # generation_config.json: sampled at temperature 1.0, no seed; the model's own end ids stop it (generation.py)
    generation: Generation = Generation(max_tokens=10240, sampling=REFERENCE_SAMPLING)
    model: ModelSpec = MODEL  # model.py: the checkpoint's size, its folder's files, describe, the tiny model

    def load_dataset(self, path: Path) -> Dataset:
        """The accuracy set of the MLCommons folder `path` (what accuracy.txt is scored on)."""
        return self.load_dataset_for(path, "accuracy")

    def load_dataset_for(self, path: Path, mode: str) -> Dataset:
        """The set the `mode` test reads: performance/test09 the performance set, accuracy its own, test07 GPQA's."""
        from cmx.mlperf.benchmarks.gpt_oss_120b.dataset import load_set

        return load_set(path, mode)

    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1) -> Mapping[str, float | int]:
        from cmx.mlperf.benchmarks.gpt_oss_120b.scorer import score_log

        return score_log(accuracy_log, dataset, tokenizer_dir, jobs=jobs).as_dict()

    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
        from cmx.mlperf.benchmarks.gpt_oss_120b.tiny import make_tiny_sets

        return make_tiny_sets(dest, tokenizer_dir, rows, seed)

    def dataset_facts(self) -> DatasetFacts:
        from cmx.mlperf.benchmarks.gpt_oss_120b.dataset import ACCURACY_SAMPLES, PERFORMANCE_SAMPLES
        from cmx.mlperf.benchmarks.kit.dataset_step import DatasetFacts

        # a folder: every file of the R2 listing; `rows` counts the accuracy set, a tiny set has the performance set's
        return DatasetFacts(ACCURACY_SAMPLES, what="gpt-oss-120b-format", default_name="gpt-oss-data",
                            tiny_rows=PERFORMANCE_SAMPLES, whole_listing=True)

    def finish_dataset(self, step: StepContext, path: Path, *, is_tiny: bool) -> DatasetMade:
        from cmx.mlperf.benchmarks.gpt_oss_120b.dataset import finish_dataset

        return finish_dataset(step, path, is_tiny=is_tiny)


BENCHMARK = GptOss120b()
