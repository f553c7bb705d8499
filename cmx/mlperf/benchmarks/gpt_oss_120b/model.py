"""The gpt-oss-120b model folder: what it must hold, and what get-ml-model-gpt-oss-120b reports about it."""

from __future__ import annotations

import logging
from pathlib import Path

from cmx.mlperf.benchmarks.kit.model import (
    GB,
    TINY_DEFAULTS,
    ModelError,
    ModelFiles,
    ModelFolder,
    ModelSpec,
    TinyModel,
    architecture,
    check_own_folder,
    end_ids,
    read_configs,
    warn_other_model,
)

MODEL_FILES = ModelFiles(tokenizer=(("tokenizer.json",),),
                         hint="copy tokenizer.json and tokenizer_config.json of openai/gpt-oss-120b into the folder")
TINY = TinyModel("GptOssForCausalLM", "tiny-gpt-oss-random-seed{seed}", sizes={**TINY_DEFAULTS, "experts": 4},
                 precisions=())
# MXFP4 MoE experts, bfloat16 elsewhere: about 65 GB of safetensors (get-ml-model-gpt-oss-120b's include help)
MODEL_SIZE = 65 * GB
_OUTPUTS = ("eos_token_ids", "architecture")


def describe(folder: Path, name: str, revision: str, precision: str | None = None, *, is_tiny: bool,
             log: logging.Logger | None = None) -> ModelFolder:
    """The model in `folder`, from its config.json, generation_config.json and tokenizer files. `precision` is
    not chosen: the checkpoint's quantization (mxfp4), or bf16, is reported; the rest runs in bfloat16."""
    folder = check_own_folder(folder)
    config, generation = read_configs(folder, MODEL_FILES)
    if config.get("model_type") != "gpt_oss":
        warn_other_model(log, folder, f"{config.get('model_type')!r} model", "gpt_oss",
                         "the closed division needs openai/gpt-oss-120b")
    ends = end_ids(config, generation)
    if not ends:
        raise ModelError(f"{folder} names no eos_token_id in generation_config.json or config.json",
                         hint="gpt-oss-120b lists [200002, 199999, 200012]; copy the original files")
    quant = config.get("quantization_config") or {}
    precision = str(quant.get("quant_method", "bf16")) if isinstance(quant, dict) else "bf16"
    return ModelFolder(folder, name, revision, "bfloat16", precision, ends[0], is_tiny, eos_token_ids=ends,
                       architecture=architecture(config), reports=_OUTPUTS)


MODEL = ModelSpec(MODEL_SIZE, TINY, MODEL_FILES, describe)
