"""llama2-70b: OpenOrca prompts, Llama-2-70b-chat, ROUGE and tokens per sample (language/llama2-70b in
mlcommons/inference).

The modules: generation (the reference's sampling and output length, with their sources), dataset
(the processed OpenOrca pickle), model (what a checkpoint folder must hold), accuracy (the
reference's evaluate-accuracy.py), tiny (a random Llama 2 and a generated OpenOrca). `BENCHMARK` is what
the generic parts see; it imports those modules when called.
"""

from __future__ import annotations

from dataclasses import dataclass

from cmx.mlperf.benchmarks.base import Generation
from cmx.mlperf.benchmarks.kit.benchmark import BenchmarkDefaults
from cmx.mlperf.benchmarks.kit.model import ModelSpec
from cmx.mlperf.benchmarks.llama2_70b.generation import MAX_NEW_TOKENS, REFERENCE_SAMPLING
from cmx.mlperf.benchmarks.llama2_70b.model import MODEL


@dataclass(frozen=True)
class Llama2_70b(BenchmarkDefaults):
    family: str = "llama2-70b"
    names: tuple[str, ...] = ("llama2-70b-99", "llama2-70b-99.9")
    loadgen_model: str = "llama2-70b"  # loadgen/mlperf.conf: llama2-70b.* and llama2-70b-interactive.*
    # language/llama2-70b/SUT.py gen_kwargs: greedy (do_sample False, num_beams 1), max_new_tokens 1024,
    # min_new_tokens 1 (2 here: LoadGen needs two tokens for TPOT); EOS is the tokenizer's </s>
    generation: Generation = Generation(max_tokens=MAX_NEW_TOKENS, sampling=REFERENCE_SAMPLING)
    model: ModelSpec = MODEL  # model.py: the checkpoint's size, its folder's files, describe, the tiny model
    loader: str = "dataset:load_openorca"
    tiny_dataset: str = "tiny:make_tiny_openorca"


BENCHMARK = Llama2_70b()
