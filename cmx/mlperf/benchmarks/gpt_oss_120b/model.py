"""The gpt-oss-120b model folder: what it must hold, and what get-ml-model-gpt-oss-120b reports about it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from cmx.mlperf.benchmarks.kit import model as kit

FILES = kit.ModelFiles(tokenizer=(("tokenizer.json",),),
                       hint="copy tokenizer.json and tokenizer_config.json of openai/gpt-oss-120b into the folder")
# MXFP4 MoE experts, bfloat16 elsewhere: about 65 GB of safetensors (get-ml-model-gpt-oss-120b's include help)
SIZE = 65 * kit.GB


def describe(folder: Path, name: str, revision: str, precision: str | None = None, *, is_tiny: bool,
             log: logging.Logger | None = None) -> kit.ModelFolder:
    """The model in `folder`, from its config.json, generation_config.json and tokenizer files. `precision` is
    not chosen: the checkpoint's quantization (mxfp4), or bf16, is reported; the rest runs in bfloat16."""
    folder = kit.check_own_folder(folder)
    config, generation = kit.read_configs(folder, FILES)
    if config.get("model_type") != "gpt_oss":
        kit.warn_other_model(log, folder, f"{config.get('model_type')!r} model", "gpt_oss",
                             "the closed division needs openai/gpt-oss-120b")
    ends = kit.required_end_ids(folder, config, generation,
                                "gpt-oss-120b lists [200002, 199999, 200012]; copy the original files")
    quant = config.get("quantization_config") or {}
    precision = str(quant.get("quant_method", "bf16")) if isinstance(quant, dict) else "bf16"
    return kit.ModelFolder(folder, name, revision, "bfloat16", precision, ends[0], is_tiny, eos_token_ids=ends,
                           architecture=kit.architecture(config), reports=("eos_token_ids", "architecture"))


def make_tiny_model(dest: Path, seed: int = 0, sizes: Mapping[str, int] | None = None) -> Path:
    from cmx.mlperf.benchmarks.gpt_oss_120b.tiny import make_tiny_gpt_oss

    return make_tiny_gpt_oss(dest, seed, **(sizes or {})).path


# the checkpoint's quantization is reported: no precision to choose; experts is an input of its own
TINY = kit.TinyModel("GptOssForCausalLM", "tiny-gpt-oss-random-seed{seed}", make_tiny_model,
                     sizes={**kit.TINY_DEFAULTS, "experts": 4}, precisions=())
MODEL = kit.ModelSpec(SIZE, TINY, FILES, describe)
