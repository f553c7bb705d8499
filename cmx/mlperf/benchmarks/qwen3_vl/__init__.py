"""qwen3-vl-235b-a22b: Shopify's product catalogue (a product's title, description and image) answered by
Qwen3-VL-235B-A22B-Instruct as a JSON object, scored by the category's hierarchical F1 (multimodal/qwen3-vl in
mlcommons/inference).

Its samples are conversations, not token ids: each goes to an endpoint's chat route (`vllm serve` started by
cmx, or the user's), and the reply's UTF-8 bytes are the answer LoadGen logs, with the server's token count.
It is judged on whole answers: no token latencies, the Server p99 end to end under 12 s.

The modules: accuracy (the evaluator's hierarchical F1 and its accuracy.txt), prompts (the reference's messages,
the image re-encoded as it does, and the QSL's ProductPrompts), dataset (the catalogue's Parquet files), model
(the checkpoint folder), tiny (a generated catalogue), tiny_model (a random Qwen3-VL MoE). `BENCHMARK`'s methods
import them when called.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.backends.base import Sampling
from cmx.mlperf.benchmarks.base import Benchmark, Dataset, Generation
from cmx.mlperf.benchmarks.kit.benchmark import BenchmarkDefaults, dataset_as
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts
from cmx.mlperf.benchmarks.kit.model import ModelSpec
from cmx.mlperf.benchmarks.qwen3_vl.model import MODEL
from cmx.mlperf.scoring.external import ExternalScorer

if TYPE_CHECKING:
    from cmx.mlperf.samples import ChatSource, ResponseEncoder

# The reference sends no max_tokens: a reply is bounded by the server's context, --max-model-len 32768
# (scripts/slurm/benchmark.sh); the harness's max_tokens is that bound, for the record
MAX_MODEL_LEN = 32768
# No sampling in the request: the model's generation_config.json (README: temperature 0.7, top_p 0.8, top_k 20)
SAMPLING = Sampling(temperature=0.7, top_p=0.8, top_k=20)


@dataclass(frozen=True)
class Qwen3VL(BenchmarkDefaults):
    family: str = "qwen3-vl-235b-a22b"
    names: tuple[str, ...] = ("qwen3-vl-235b-a22b",)  # constants.py MODEL_CONFIG['v6.0'/'v6.1']['models']
    loadgen_model: str = "qwen3-vl-235b-a22b"  # loadgen/mlperf.conf: qwen3-vl-235b-a22b.*
    interactive: bool = False  # v6.1's Interactive is the endpoint client's: mlperf.conf has no -interactive model
    chat: bool = True
    response_dtype: str = "uint8"  # the reply's UTF-8 bytes
    # the reference's `vllm serve` flags besides TP and max-model-len (README, scripts/slurm/benchmark.sh): no video
    # (prefix caching is off in every server cmx starts)
    server_flags: tuple[str, ...] = ("--limit-mm-per-prompt.video=0",)
    generation: Generation = Generation(max_tokens=MAX_MODEL_LEN, sampling=SAMPLING)
    model: ModelSpec = MODEL

    def load_dataset(self, path: Path) -> Dataset:
        from cmx.mlperf.benchmarks.qwen3_vl.dataset import load_catalogue

        return load_catalogue(path)

    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1, scorer: ExternalScorer | None = None) -> Mapping[str, float | int]:
        from cmx.mlperf.benchmarks.qwen3_vl.accuracy import score_log

        return score_log(accuracy_log, dataset, tokenizer_dir, jobs=jobs).as_dict()

    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
        from cmx.mlperf.benchmarks.qwen3_vl.tiny import tiny_dataset

        return tiny_dataset(dest, tokenizer_dir, rows, seed).path

    def dataset_facts(self) -> DatasetFacts:
        from cmx.mlperf.benchmarks.qwen3_vl.dataset import FACTS

        return FACTS

    def format_accuracy_txt(self, values: Mapping[str, float | int], log_sha256: str) -> str:
        from cmx.mlperf.benchmarks.qwen3_vl.accuracy import format_accuracy_txt

        return format_accuracy_txt(values, log_sha256)

    def prompt_source(self, dataset: Dataset, model_dir: Path) -> ChatSource:
        from cmx.mlperf.benchmarks.qwen3_vl.dataset import ProductCatalogue
        from cmx.mlperf.benchmarks.qwen3_vl.prompts import ProductPrompts

        return ProductPrompts(dataset_as(ProductCatalogue, dataset))

    def response_encoder(self, model_dir: Path) -> ResponseEncoder | None:
        from cmx.mlperf.loadgen.sut import text_answer

        return text_answer


BENCHMARK: Benchmark = Qwen3VL()
