"""What a benchmark plug-in is: the `Benchmark` protocol, its `Dataset`, and how the reference generates.

A benchmark is one package under cmx/mlperf/benchmarks/ whose `__init__` defines `BENCHMARK`, an
object with the attributes and methods below; `cmx.mlperf.benchmarks.benchmark_for` finds it.
The round's rules (sample counts, latency limits, accuracy targets, compliance tests) are data
in cmx/mlperf/rounds/*.yaml, keyed by the MLPerf names the benchmark lists. The generic parts
(harness, SUTs, backends, packager, checker) know a benchmark only through this protocol.
See docs/benchmarks/adding-a-benchmark.md.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from cmx.errors import CmxError
from cmx.mlperf.backends.base import GREEDY, Sampling
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts, DatasetMade
from cmx.mlperf.benchmarks.kit.model import ModelFolder
from cmx.mlperf.samples import ChatSource, PromptSource, ResponseEncoder, VideoSource
from cmx.mlperf.scoring.external import ExternalScorer

if TYPE_CHECKING:
    from cmx.execute.context import StepContext
    from cmx.mlperf.backends.diffusion import VideoSettings


class DatasetError(CmxError):
    """A dataset file is missing, unreadable, or not in the format the benchmark reads."""


@dataclass(frozen=True)
class Generation:
    """How the reference generates: its `sampling`, at most `max_tokens` output tokens, stopping at the model's EOS.

    `sampling` is the reference SUT's temperature, top_p, top_k and seed (greedy unless the benchmark's
    generation.py cites otherwise); a run uses it unless the user overrides it (cmx_run.json records both).
    `stop_token_ids` are ids besides the tokenizer's EOS that end an answer (Llama 3.1's <|eot_id|>,
    say); `min_tokens` holds them back (LoadGen needs at least 2 tokens to compute TPOT).
    `video`: a text-to-video benchmark's settings (size, frames, steps, seed, guidance, its fixed latent's file,
    relative to the dataset folder), which the diffusion engine runs; None for a benchmark that answers in tokens.
    """

    max_tokens: int
    min_tokens: int = 2
    stop_token_ids: tuple[int, ...] = ()
    sampling: Sampling = GREEDY
    video: VideoSettings | None = None


class Dataset(Protocol):
    """A benchmark's samples as the harness and the evaluator read them: how many, reference i as text, the first n.

    What the QSL reads of them is the benchmark's `prompt_source` (a text LLM's dataset is its own PromptSource:
    prompt i as token ids; whisper's clips and qwen3-vl's products are not token ids), so no caller asks a
    Dataset for prompt ids.
    """

    @property
    def path(self) -> Path: ...

    def __len__(self) -> int: ...

    def reference(self, i: int) -> str: ...

    def limit(self, n: int) -> Dataset: ...


class Benchmark(Protocol):
    """One MLPerf benchmark: its names, dataset, generation, accuracy, `_tiny` generators and model side.

    The kit gives shared defaults (cmx.mlperf.benchmarks.kit.benchmark.BenchmarkDefaults: the parts a benchmark
    names, and kit.model.ModelDefaults: its model.py's ModelSpec); a benchmark defines only what is its own.
    """

    @property
    def family(self) -> str:
        """The benchmark without its accuracy target: llama2-70b, llama3.1-8b."""
        ...

    @property
    def names(self) -> tuple[str, ...]:
        """Its MLPerf names, one per accuracy target: llama2-70b-99, llama2-70b-99.9 (or just llama3.1-8b)."""
        ...

    @property
    def loadgen_models(self) -> Mapping[str, str]:
        """LoadGen's model name per scenario (mlperf.conf's keys): Offline -> llama2-70b,
        Interactive -> llama2-70b-interactive."""
        ...

    @property
    def generation(self) -> Generation: ...

    def load_dataset(self, path: Path) -> Dataset:
        """Read and check the dataset file the dataset recipe produced (DatasetError naming what is wrong)."""
        ...

    def load_dataset_for(self, path: Path, mode: str) -> Dataset:
        """The samples the `mode` test (performance, accuracy, a compliance test: test07) reads from the dataset at
        `path`: `load_dataset`'s for most; gpt-oss-120b's tests read different sets."""
        ...

    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1, scorer: ExternalScorer | None = None) -> Mapping[str, float | int]:
        """The reference evaluator's result dict for an accuracy run's log, in its key order: what accuracy.txt
        prints. `scorer`: the environment of an evaluator that runs apart from cmx's (VBench, for
        wan-2.2-t2v-a14b), as the harness config records it; the benchmarks scored in process ignore it."""
        ...

    def format_accuracy_txt(self, values: Mapping[str, float | int], log_sha256: str) -> str:
        """accuracy.txt for `score`'s values and the log's sha256, as the reference prints it (the text LLMs: a
        result dict; Whisper: one line) and truncate_accuracy_log.py completes it."""
        ...

    # --- the samples and the answers: what the harness's QSL and SUT read ------------------------------

    def prompt_source(self, dataset: Dataset, model_dir: Path) -> PromptSource | ChatSource | VideoSource:
        """What the QSL reads for `dataset` (cmx.mlperf.samples.PromptSource: token ids per sample, and media
        for a MediaSource; a ChatSource's conversations for a chat benchmark; a VideoSource's text-to-video prompts
        for a benchmark that answers with videos), made with the tokenizer in
        `model_dir` where the dataset holds text or audio."""
        ...

    def response_encoder(self, model_dir: Path) -> ResponseEncoder | None:
        """How a sample's output token ids are answered to LoadGen (the array it logs); None: as int32 token ids."""
        ...

    @property
    def chat(self) -> bool:
        """Its samples are conversations (`prompt_source` gives a cmx.mlperf.samples.ChatSource) for an endpoint's
        chat route, answered with text: it runs through an endpoint only (Qwen3-VL)."""
        ...

    @property
    def server_flags(self) -> tuple[str, ...]:
        """Flags of the reference's `vllm serve` that every server cmx starts for this benchmark takes (Qwen3-VL's
        `--limit-mm-per-prompt.video 0`); () for none."""
        ...

    @property
    def response_dtype(self) -> str:
        """The element type of that array (int32 for token ids, int64 for Whisper's labels): how TEST01's
        verify_accuracy.py reads it (`--dtype`)."""
        ...

    @property
    def test01_sampling_target(self) -> int | None:
        """compliance/TEST01/<benchmark>/audit.config's accuracy_log_sampling_target: about how many outputs a TEST01
        run logs; None for a benchmark the round gives no TEST01 (cmx writes it no audit.config)."""
        ...

    def make_tiny_model(self, dest: Path, seed: int = 0, sizes: Mapping[str, int] | None = None) -> Path:
        """Write a random-weight model of the real architecture, with its tokenizer, into `dest` (`sizes`: the
        model recipe's tiny inputs, hidden_size, layers and so on; None: the smallest defaults)."""
        ...

    # --- the model side: what a get-ml-model recipe (kit.model_recipe) and Kubernetes use ---------------

    @property
    def model_size(self) -> int:
        """Bytes of the real checkpoint's weights (what a Kubernetes model cache is sized for)."""
        ...

    def make_tiny(self, dest: Path, precision: str | None, inputs: Mapping[str, object], *,
                  log: logging.Logger | None = None) -> ModelFolder:
        """The tiny model made in `dest`, sized by the model recipe's `inputs`, described as the recipe reports it
        (`precision`: the recipe's precision variation; None where it has none)."""
        ...

    def describe(self, folder: Path, name: str, revision: str, precision: str | None, *, is_tiny: bool,
                 log: logging.Logger | None = None) -> ModelFolder:
        """The model in `folder` (downloaded, or a user's own), checked and read as the recipe reports it; a folder
        of another model is accepted with a warning to `log` (the open division may run it)."""
        ...

    def require_model_files(self, paths: Collection[str], repo: str, revision: str) -> None:
        """Refuse a choice of files to download that lacks what a folder needs (ModelError): before the weights."""
        ...

    def refuse_tiny_inputs(self, inputs: Mapping[str, object]) -> None:
        """Refuse the tiny model's inputs (sizes, seed) given for the real model (ModelError)."""
        ...

    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
        """Write a dataset in the real file format, tokenized with the tiny tokenizer, to `dest`."""
        ...

    # the dataset side: what the get-dataset recipes' step (cmx.mlperf.benchmarks.kit.dataset_step) reads
    def dataset_facts(self) -> DatasetFacts:
        """The real dataset's size and file name, which the dataset step fetches and checks a download against."""
        ...

    def finish_dataset(self, step: StepContext, path: Path, *, is_tiny: bool) -> DatasetMade:
        """What the dataset step makes of a download or a tiny set at `path` before the loader reads it: the path the
        loader reads and the recipe's other outputs (deepseek-r1 adds LiveCodeBench's tests and the prompt ids its
        chat template makes; the kit's default: `path` as it is)."""
        ...

    # the packager's side: what a packaged accuracy folder holds besides the logs and accuracy.txt
    def accuracy_files(self, accuracy_dir: Path, dataset: Dataset) -> dict[str, Path]:
        """The files the round wants in the packaged accuracy/ folder (its accuracy_files: constants.py
        REQUIRED_ACC_BENCHMARK), as paths inside that folder ("videos/130.mp4"), each mapped to the file of the
        accuracy run in `accuracy_dir` it is copied from; `dataset` is the set that run read. The kit's default: {}."""
        ...
