"""The DeepSeek-R1 folder deepseek-r1 runs: what it must hold, and what get-ml-model-deepseek-r1 reports about it.

DeepSeek-R1 at the reference's commit is natively FP8 (config.json `quantization_config`:
`fp8`, e4m3, 128x128 weight blocks) and the reference runs it with `dtype: auto`, so the weights'
own format is reported (`fp8` for it, `bf16` for the tiny model). Other checkpoints that
submitters use (NVIDIA's v6.1 closed submissions run nvidia/DeepSeek-R1-FP4-v2, with no commit
named) are brought with `model_path`: their config.json's quantization method is reported the same
way; the closed division takes them with the calibration documented.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from cmx.mlperf.benchmarks.kit import model as kit

ARCHITECTURE = "DeepseekV3ForCausalLM"  # DeepSeek-R1's config.json architectures
# its chat template (tokenizer_config.json) makes the prompts
FILES = kit.ModelFiles(tokenizer=(("tokenizer.json",), ("tokenizer_config.json",)),
                       hint="copy tokenizer.json and tokenizer_config.json of deepseek-ai/DeepSeek-R1 into it")
# 671 B parameters in FP8 (with bf16 norms and scales): about 690 GB of safetensors
# (get-ml-model-deepseek-r1's include help; docs/benchmarks/deepseek-r1.md: "about 700 GB for the weights alone")
SIZE = 690 * kit.GB


def describe(folder: Path, name: str, revision: str, precision: str | None = None, *, is_tiny: bool,
             log: logging.Logger | None = None) -> kit.ModelFolder:
    """The model in `folder`, read from its config.json and generation_config.json. `precision` is not chosen:
    the weights' own format is reported."""
    folder = kit.check_own_folder(folder)
    config, generation = kit.read_configs(folder, FILES)
    arch = kit.architecture(config)
    if arch != ARCHITECTURE:
        kit.warn_other_model(log, folder, arch, ARCHITECTURE, "deepseek-r1's closed division needs DeepSeek-R1")
    ends = kit.required_end_ids(folder, config, generation,
                                "DeepSeek-R1's is 1 (<｜end▁of▁sentence｜>); copy the original files")
    quantization = config.get("quantization_config")
    if isinstance(quantization, dict):
        dtype = str(quantization.get("quant_method") or "quantized")
    else:
        dtype = {"bfloat16": "bf16", "float16": "fp16"}.get(str(config.get("torch_dtype")), "bf16")
    return kit.ModelFolder(folder, name, revision, dtype, dtype, ends[0], is_tiny, eos_token_ids=ends[:1],
                           architecture=arch, reports=("architecture", "eos_token_ids"))


def make_tiny_model(dest: Path, seed: int = 0, sizes: Mapping[str, int] | None = None) -> Path:
    from cmx.mlperf.benchmarks.deepseek_r1.tiny import make_tiny_deepseek

    return make_tiny_deepseek(dest, seed, **(sizes or {})).path


# the weights' own format is reported: no precision to choose
TINY = kit.TinyModel(ARCHITECTURE, "tiny-" + ARCHITECTURE + "-random-seed{seed}", make_tiny_model, precisions=())
MODEL = kit.ModelSpec(SIZE, TINY, FILES, describe)
