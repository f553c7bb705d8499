"""The Benchmark Protocol's shared defaults: a BENCHMARK names its parts, and they are imported when first called.

A benchmark package's `__init__` subclasses `BenchmarkDefaults` and states its names, its LoadGen
model, its generation, its ModelSpec and where its dataset loader, scorer, tiny-dataset writer and
DatasetFacts live (`module:name` within the package); it defines a method only where it differs
(gpt-oss-120b's per-test sets, a dataset step's `finish_dataset`). Naming the parts keeps the
package's `__init__` free of heavy imports: numpy, pandas and tokenizers load on the first call.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts
from cmx.mlperf.benchmarks.kit.model import ModelDefaults

if TYPE_CHECKING:  # base and dataset_step import this package
    from cmx.mlperf.benchmarks.base import Dataset, Generation
    from cmx.mlperf.samples import ChatSource, PromptSource, ResponseEncoder


@dataclass(frozen=True)
class BenchmarkDefaults(ModelDefaults):
    """A BENCHMARK of named parts. `loader`: path -> Dataset; `scorer`: (accuracy log, dataset, tokenizer folder,
    jobs=) -> a result with `as_dict()`; `tiny_dataset`: (dest, tokenizer folder, rows, seed) -> the path written,
    or a record with `.path`; `facts`: the DatasetFacts constant. LoadGen runs `loadgen_model` in Offline and
    Server, and `<loadgen_model>-interactive` in Interactive where the benchmark has that scenario."""

    family: str
    names: tuple[str, ...]
    loadgen_model: str
    generation: Generation
    loader: str
    tiny_dataset: str
    scorer: str = "accuracy:score_log"
    facts: str = "dataset:FACTS"
    interactive: bool = True
    response_dtype: str = "int32"  # the harness answers token ids as int32
    test01_sampling_target: int | None = None  # its TEST01 audit.config's; None: no TEST01
    chat: bool = False  # its samples are conversations for an endpoint's chat route (prompt_source: a ChatSource)
    server_flags: tuple[str, ...] = ()  # what every `vllm serve` cmx starts for it takes (the reference's flags)

    @property
    def loadgen_models(self) -> Mapping[str, str]:
        models = {"Offline": self.loadgen_model, "Server": self.loadgen_model}
        if self.interactive:
            models["Interactive"] = f"{self.loadgen_model}-interactive"
        return models

    def part(self, where: str) -> Any:
        """The object `where` names (`module:name` in this benchmark's package), its module imported now."""
        module, _, name = where.partition(":")
        return getattr(importlib.import_module(f"{type(self).__module__}.{module}"), name)

    def load_dataset(self, path: Path) -> Dataset:
        return self.part(self.loader)(path)

    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1) -> Mapping[str, float | int]:
        return self.part(self.scorer)(accuracy_log, dataset, tokenizer_dir, jobs=jobs).as_dict()

    def format_accuracy_txt(self, values: Mapping[str, float | int], log_sha256: str) -> str:
        """The text LLMs' accuracy.txt: the reference's result dict, then the hash."""
        from cmx.mlperf.scoring.accuracy_txt import format_accuracy_txt

        return format_accuracy_txt(values, log_sha256)

    def prompt_source(self, dataset: Dataset, model_dir: Path) -> PromptSource | ChatSource:
        """The dataset itself: its prompts are token ids already."""
        return dataset

    def response_encoder(self, model_dir: Path) -> ResponseEncoder | None:
        """None: the output token ids, as int32."""
        return None

    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
        made = self.part(self.tiny_dataset)(dest, tokenizer_dir, rows, seed)
        return made if isinstance(made, Path) else made.path

    def dataset_facts(self) -> DatasetFacts:
        return self.part(self.facts)
