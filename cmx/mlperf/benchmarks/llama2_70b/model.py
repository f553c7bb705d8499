"""The Llama 2 model folder llama2-70b runs: what it must hold, and what get-ml-model-llama2 reports about it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from cmx.mlperf.benchmarks.kit import model as kit

FILES = kit.ModelFiles(tokenizer=(("tokenizer.json", "tokenizer.model"),),
                       hint="copy the tokenizer files of meta-llama/Llama-2-70b-chat-hf into the folder")
# Llama-2-70b-chat-hf at the pinned commit: about 130 GB of float16 safetensors
# (docs/benchmarks/llama2-70b-assets.md: "about 129 GB"; get-ml-model-llama2's recipe.yaml: 130 GB)
SIZE = 130 * kit.GB


def describe(folder: Path, name: str, revision: str, precision: str | None, *, is_tiny: bool,
             log: logging.Logger | None = None) -> kit.ModelFolder:
    """The model in `folder`, read from its config.json and generation_config.json; it must have a tokenizer.

    The dtype is the precision's (bf16, fp16) or, for fp8, the checkpoint's `torch_dtype`. A
    config whose `model_type` is not `llama` is accepted, with a warning to `log`.
    """
    folder = Path(folder)
    config, generation = kit.read_configs_of(folder, FILES, "llama", "Llama",
                                             "llama2-70b's closed division needs Llama 2 70B", log)
    precision = precision or "bf16"
    dtype = kit.DTYPES.get(precision) or str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    eos = (kit.end_ids(config, generation) or (2,))[0]
    return kit.ModelFolder(folder, name, revision, dtype, precision, eos, is_tiny)


def make_tiny_model(dest: Path, seed: int = 0, sizes: Mapping[str, int] | None = None) -> Path:
    from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_llama

    return make_tiny_llama(dest, seed, **(sizes or {})).path


MODEL = kit.ModelSpec(SIZE, kit.TinyModel("Llama 2", "tiny-llama2-random-seed{seed}", make_tiny_model), FILES,
                      describe)
