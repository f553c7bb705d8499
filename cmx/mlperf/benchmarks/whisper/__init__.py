"""whisper: LibriSpeech dev-clean and dev-other repacked into clips of up to 30 s, transcribed by
openai/whisper-large-v3, scored by word error rate (speech2text in mlcommons/inference). Offline only.

The modules: transcript (the 42 labels the answer to LoadGen is made of), wer (the evaluator's word errors,
concatenations counted as matches), normalizer (openai-whisper's English text normaliser), accuracy (the
evaluator, and the accuracy.txt it prints), dataset (the manifest and its WAVs), prompts (the decoder prompt with
the clip, and the label answer), model (the checkpoint folder), tiny (a random Whisper and generated clips).
`BENCHMARK`'s methods import them when called.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.base import Benchmark, Dataset, Generation
from cmx.mlperf.benchmarks.kit.benchmark import BenchmarkDefaults, dataset_as
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts, DatasetMade
from cmx.mlperf.benchmarks.kit.model import ModelSpec
from cmx.mlperf.benchmarks.whisper.model import MODEL
from cmx.mlperf.scoring.external import ExternalScorer

if TYPE_CHECKING:
    from cmx.execute.context import StepContext
    from cmx.mlperf.samples import MediaSource, ResponseEncoder

# reference_SUT.py: SamplingParams(temperature=0, top_p=1.0, max_tokens=200), greedy; EOS <|endoftext|>
MAX_TOKENS = 200


@dataclass(frozen=True)
class Whisper(BenchmarkDefaults):
    family: str = "whisper"
    names: tuple[str, ...] = ("whisper",)  # constants.py MODEL_CONFIG['v6.0'/'v6.1']['models']
    loadgen_model: str = "whisper"  # loadgen/mlperf.conf: whisper.*
    interactive: bool = False
    response_dtype: str = "int64"  # the 42-label answer (transcript.response_array); TEST01 reads it so
    # compliance/TEST01/whisper/audit.config (mlcommons/inference b66003e): accuracy_log_sampling_target
    test01_sampling_target: int | None = 4096
    generation: Generation = Generation(max_tokens=MAX_TOKENS)
    model: ModelSpec = MODEL

    def load_dataset(self, path: Path) -> Dataset:
        from cmx.mlperf.benchmarks.whisper.dataset import load_librispeech

        return load_librispeech(path)

    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1, scorer: ExternalScorer | None = None) -> Mapping[str, float | int]:
        from cmx.mlperf.benchmarks.whisper.accuracy import score_log

        return score_log(accuracy_log, dataset, tokenizer_dir, jobs=jobs).as_dict()

    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
        from cmx.mlperf.benchmarks.whisper.tiny import make_tiny_librispeech

        return make_tiny_librispeech(dest, tokenizer_dir, rows, seed).path

    def dataset_facts(self) -> DatasetFacts:
        from cmx.mlperf.benchmarks.whisper.dataset import FACTS

        return FACTS

    @property
    def loadgen_models(self) -> Mapping[str, str]:
        return {"Offline": self.loadgen_model}  # required-scenarios-datacenter: Offline; mlperf.conf has no Server

    def format_accuracy_txt(self, values: Mapping[str, float | int], log_sha256: str) -> str:
        from cmx.mlperf.benchmarks.whisper.accuracy import format_accuracy_txt

        return format_accuracy_txt(values, log_sha256)

    def prompt_source(self, dataset: Dataset, model_dir: Path) -> MediaSource:
        """The decoder prompt's ids, and the clip as `media(i)`."""
        from cmx.mlperf.benchmarks.whisper.dataset import LibriSpeech
        from cmx.mlperf.benchmarks.whisper.prompts import WhisperPrompts, decoder_prompt_ids

        return WhisperPrompts(dataset_as(LibriSpeech, dataset), decoder_prompt_ids(model_dir))

    def response_encoder(self, model_dir: Path) -> ResponseEncoder | None:
        from cmx.mlperf.benchmarks.whisper.prompts import LabelAnswer

        return LabelAnswer(model_dir)

    def finish_dataset(self, step: StepContext, path: Path, *, is_tiny: bool) -> DatasetMade:
        """The folder of the download that holds dev-all-repack.json (the listing may nest it)."""
        from cmx.mlperf.benchmarks.whisper.dataset import manifest_folder

        return DatasetMade(manifest_folder(path))


BENCHMARK: Benchmark = Whisper()
