"""The Mixtral-8x7B-Instruct folder mixtral-8x7b runs: what it must hold, and what get-ml-model-mixtral-8x7b reports.

The reference's model (language/mixtral-8x7b/README.md, "Model"): mistralai/Mixtral-8x7B-Instruct-v0.1
at commit a60832cb6c88d5cb6e507680d0e9996fbad77050 ("use a version of the model that exactly
matches the one in this commit"), run in fp16 (the table's precision column). The reference names
no FP8 checkpoint: submitters who run FP8 quantize it themselves (see docs/benchmarks/mixtral-8x7b.md).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from cmx.mlperf.benchmarks.kit import model as kit

MODEL_REPO = "mistralai/Mixtral-8x7B-Instruct-v0.1"  # README.md, Model
MODEL_REVISION = "a60832cb6c88d5cb6e507680d0e9996fbad77050"  # README.md: "exactly matches ... this commit"
FILES = kit.ModelFiles(tokenizer=(("tokenizer.json", "tokenizer.model"),),
                       hint=f"copy tokenizer.json (or tokenizer.model) and tokenizer_config.json of {MODEL_REPO} "
                            "into it")
# 46.7 B parameters in bfloat16: about 93 GB of safetensors (get-ml-model-mixtral-8x7b's include help;
# docs/benchmarks/mixtral-8x7b.md: "Mixtral's 93 GB of bf16 weights")
SIZE = 93 * kit.GB


def describe(folder: Path, name: str, revision: str, precision: str | None, *, is_tiny: bool,
             log: logging.Logger | None = None) -> kit.ModelFolder:
    """The model in `folder`, read from its config.json and generation_config.json; it must have a tokenizer.

    A config whose architecture is not MixtralForCausalLM is accepted, with a warning to `log`
    (the closed division needs Mixtral 8x7B; the open division may run another model)."""
    folder = Path(folder)
    config, generation = kit.read_configs(folder, FILES)
    arch = kit.architecture(config)
    if arch != "MixtralForCausalLM":
        kit.warn_other_model(log, folder, arch, "MixtralForCausalLM",
                             "mixtral-8x7b's closed division needs Mixtral 8x7B")
    precision = precision or "bf16"
    dtype = kit.DTYPES.get(precision) or str(config.get("torch_dtype") or "bfloat16")
    return kit.ModelFolder(folder, name, revision, dtype, precision, (kit.end_ids(config, generation) or (2,))[0],
                           is_tiny, architecture=arch, reports=("architecture",))


def make_tiny_model(dest: Path, seed: int = 0, sizes: Mapping[str, int] | None = None) -> Path:
    from cmx.mlperf.benchmarks.mixtral_8x7b.tiny_model import make_tiny_mixtral

    return make_tiny_mixtral(dest, seed, **(sizes or {})).path


# the tiny Mixtral's vocabulary is the tiny Llama 2 tokenizer's: not an input
TINY = kit.TinyModel("Mixtral (8 experts, 2 per token)", "tiny-mixtral-random-seed{seed}", make_tiny_model,
                     sizes={"seed": 0, "hidden_size": 256, "layers": 2, "heads": 4},
                     fixed={"vocab_size": "the tiny Mixtral's vocabulary is its tokenizer's (4096 pieces, Mixtral's "
                                          "layout)"})
MODEL = kit.ModelSpec(SIZE, TINY, FILES, describe)
