"""The Benchmark Protocol's shared defaults: what every benchmark has unless it says otherwise.

A benchmark package's `__init__` subclasses `BenchmarkDefaults`, states its names, its LoadGen
model, its generation and its ModelSpec, and defines its parts (`load_dataset`, `score`,
`make_tiny_dataset`, `dataset_facts`) as methods that import the package's own module inside the
method: mypy checks each call and what it returns, and the package's `__init__` stays free of heavy
imports (numpy, pandas and tokenizers load on the first call). A method is defined here where most
benchmarks share it, and overridden only where a benchmark differs (gpt-oss-120b's per-test sets,
the dataset step's `finish_dataset`, whisper's and qwen3-vl's samples and answers).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts, DatasetMade
from cmx.mlperf.benchmarks.kit.model import ModelDefaults
from cmx.mlperf.samples import PromptSource
from cmx.mlperf.scoring.external import ExternalScorer

if TYPE_CHECKING:  # base imports this package
    from cmx.execute.context import StepContext
    from cmx.mlperf.benchmarks.base import Dataset, Generation
    from cmx.mlperf.samples import ChatSource, ResponseEncoder, VideoSource

D = TypeVar("D")


class WrongDataset(CmxError):
    """A benchmark's part was handed a dataset its own loader does not make."""


def dataset_as(kind: type[D], dataset: Dataset) -> D:
    """`dataset`, which a benchmark's own `load_dataset` made, as the class its scorer and prompts read."""
    if not isinstance(dataset, kind):
        raise WrongDataset(f"{type(dataset).__name__} at {dataset.path} is not a {kind.__name__}",
                           hint="hand a benchmark's parts the dataset its own load_dataset returned")
    return dataset


@dataclass(frozen=True)
class BenchmarkDefaults(ModelDefaults):
    """A BENCHMARK's facts and the defaults of the parts most benchmarks share. A package defines the abstract
    parts (mypy refuses a BENCHMARK that lacks one); LoadGen runs `loadgen_model` in Offline and Server, and
    `<loadgen_model>-interactive` in Interactive where the benchmark has that scenario."""

    family: str
    names: tuple[str, ...]
    loadgen_model: str
    generation: Generation
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

    # --- the parts every package defines, each importing its own module when called ------------------------
    @abstractmethod
    def load_dataset(self, path: Path) -> Dataset: ...

    @abstractmethod
    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1, scorer: ExternalScorer | None = None) -> Mapping[str, float | int]: ...

    @abstractmethod
    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path: ...

    @abstractmethod
    def dataset_facts(self) -> DatasetFacts: ...

    # --- the defaults ----------------------------------------------------------------------------------------
    def load_dataset_for(self, path: Path, mode: str) -> Dataset:
        """One set for every test: `load_dataset`'s."""
        return self.load_dataset(path)

    def finish_dataset(self, step: StepContext, path: Path, *, is_tiny: bool) -> DatasetMade:
        """Nothing after the download or the tiny set: the loader reads `path`."""
        return DatasetMade(path)

    def accuracy_files(self, accuracy_dir: Path, dataset: Dataset) -> dict[str, Path]:
        """None: the packaged accuracy/ folder holds the logs and accuracy.txt only."""
        return {}

    def format_accuracy_txt(self, values: Mapping[str, float | int], log_sha256: str) -> str:
        """The text LLMs' accuracy.txt: the reference's result dict, then the hash."""
        from cmx.mlperf.scoring.accuracy_txt import format_accuracy_txt

        return format_accuracy_txt(values, log_sha256)

    def prompt_source(self, dataset: Dataset, model_dir: Path) -> PromptSource | ChatSource | VideoSource:
        """The dataset itself: a text LLM's prompts are token ids already. A benchmark whose dataset holds no token
        ids (audio, conversations) defines its own."""
        if not isinstance(dataset, PromptSource):
            raise WrongDataset(f"{self.family}'s dataset {type(dataset).__name__} has no prompt token ids",
                               hint=f"{self.family} defines prompt_source: what the QSL reads of its samples")
        return dataset

    def response_encoder(self, model_dir: Path) -> ResponseEncoder | None:
        """None: the output token ids, as int32."""
        return None


__all__ = ["BenchmarkDefaults", "WrongDataset", "dataset_as"]
