"""llama2-70b: OpenOrca prompts, Llama-2-70b-chat, ROUGE and tokens per sample (language/llama2-70b in mlcommons/inference).

The modules: generation (the reference's sampling and output length, with their sources), dataset
(the processed OpenOrca pickle), model (what a checkpoint folder must hold), accuracy (the
reference's evaluate-accuracy.py), tiny (a random Llama 2 and a generated OpenOrca). `BENCHMARK` is what the generic parts see; it imports those modules when called.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.base import Dataset, Generation
from cmx.mlperf.benchmarks.kit.model import ModelDefaults, ModelSpec
from cmx.mlperf.benchmarks.llama2_70b.generation import MAX_NEW_TOKENS, REFERENCE_SAMPLING
from cmx.mlperf.benchmarks.llama2_70b.model import MODEL

if TYPE_CHECKING:
    from cmx.mlperf.benchmarks.kit.dataset_step import DatasetFacts


@dataclass(frozen=True)
class Llama2_70b(ModelDefaults):
    family: str = "llama2-70b"
    names: tuple[str, ...] = ("llama2-70b-99", "llama2-70b-99.9")
    # loadgen/mlperf.conf: llama2-70b.* and llama2-70b-interactive.*
    loadgen_models: Mapping[str, str] = field(default_factory=lambda: {
        "Offline": "llama2-70b", "Server": "llama2-70b", "Interactive": "llama2-70b-interactive"})
    # language/llama2-70b/SUT.py gen_kwargs: greedy (do_sample False, num_beams 1), max_new_tokens 1024,
    # min_new_tokens 1 (2 here: LoadGen needs two tokens for TPOT); EOS is the tokenizer's </s>
    generation: Generation = Generation(max_tokens=MAX_NEW_TOKENS, sampling=REFERENCE_SAMPLING)
    model: ModelSpec = MODEL  # model.py: the checkpoint's size, its folder's files, describe, the tiny model

    def load_dataset(self, path: Path) -> Dataset:
        from cmx.mlperf.benchmarks.llama2_70b.dataset import load_openorca

        return load_openorca(path)

    def score(self, accuracy_log: Path, dataset: Dataset, tokenizer_dir: Path, *,
              jobs: int = 1) -> Mapping[str, float | int]:
        from transformers import AutoTokenizer

        from cmx.mlperf.benchmarks.llama2_70b.accuracy import evaluate
        from cmx.mlperf.loadgen.accuracy_log import read_accuracy_log

        references = [dataset.reference(i) for i in range(len(dataset))]
        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        result = evaluate(read_accuracy_log(accuracy_log), references,
                          lambda ids: tokenizer.decode(ids, skip_special_tokens=True), jobs=jobs)
        return result.as_dict()

    def make_tiny_dataset(self, dest: Path, tokenizer_dir: Path, rows: int, seed: int = 0) -> Path:
        from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_openorca

        return make_tiny_openorca(dest, tokenizer_dir, rows, seed).path

    def dataset_facts(self) -> DatasetFacts:
        from cmx.mlperf.benchmarks.kit.dataset_step import DatasetFacts
        from cmx.mlperf.benchmarks.llama2_70b.dataset import SAMPLES

        return DatasetFacts(SAMPLES, what="OpenOrca-format")


BENCHMARK = Llama2_70b()
