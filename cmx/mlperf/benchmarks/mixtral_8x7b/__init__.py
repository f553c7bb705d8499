"""mixtral-8x7b: OpenOrca, GSM8K and MBXP prompts by Mixtral-8x7B-Instruct-v0.1 (language/mixtral-8x7b).

The modules: generation (the reference's sampling and output length, with their sources), dataset
(the processed pickle), accuracy (evaluate-accuracy.py: ROUGE, tokens_per_sample), gsm8k (its answer
extraction), mbxp (evaluate_mbxp.py and mxeval's harnesses, run in cmx's sandbox), model (the
checkpoint folder), tiny_model and tiny_dataset (a random Mixtral and a generated set in the real
format). `BENCHMARK` imports them when called.
"""

from __future__ import annotations

from dataclasses import dataclass

from cmx.mlperf.benchmarks.base import Generation
from cmx.mlperf.benchmarks.kit.benchmark import BenchmarkDefaults
from cmx.mlperf.benchmarks.kit.model import ModelSpec
from cmx.mlperf.benchmarks.mixtral_8x7b.generation import MAX_NEW_TOKENS, REFERENCE_SAMPLING
from cmx.mlperf.benchmarks.mixtral_8x7b.model import MODEL


@dataclass(frozen=True)
class Mixtral8x7b(BenchmarkDefaults):
    family: str = "mixtral-8x7b"
    # constants.py (b66003e) MODEL_CONFIG['v5.1'/'v6.0']['models']: one name, one target (99%)
    names: tuple[str, ...] = ("mixtral-8x7b",)
    loadgen_model: str = "mixtral-8x7b"  # loadgen/mlperf.conf: mixtral-8x7b.*
    interactive: bool = False  # mlperf.conf has no mixtral-8x7b-interactive
    # SUT.py gen_kwargs: greedy (do_sample False), max_new_tokens 1024, min_new_tokens 2; EOS </s>
    generation: Generation = Generation(max_tokens=MAX_NEW_TOKENS, sampling=REFERENCE_SAMPLING)
    model: ModelSpec = MODEL  # model.py: the checkpoint's size, its folder's files, describe, the tiny model
    loader: str = "dataset:load_mixtral"
    tiny_dataset: str = "tiny_dataset:make_tiny_dataset"


BENCHMARK = Mixtral8x7b()
