"""The Qwen3-VL-235B-A22B-Instruct folder qwen3-vl runs: what it must hold, and what get-ml-model-qwen3-vl reports.

The reference's model (multimodal/qwen3-vl in mlcommons/inference): Qwen/Qwen3-VL-235B-A22B-Instruct in
bfloat16, served by `vllm serve`. vLLM reads more than the weights: the tokenizer, the chat template that
turns the benchmark's messages into a prompt (with a <|vision_start|><|image_pad|><|vision_end|>
placeholder per image), and the image processor's settings (patch 16, merge 2, the pixel bounds);
without them it would serve with another processor's defaults (patch 14), which do not fit the model.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from cmx.mlperf.benchmarks.kit import model as kit

MODEL_REPO = "Qwen/Qwen3-VL-235B-A22B-Instruct"
# beside config.json: the tokenizer, its settings (the special tokens; the chat template, which vLLM takes from
# the processor's chat_template.json or else from here), and the image processor's settings
FILES = kit.ModelFiles(tokenizer=(("tokenizer.json",), ("tokenizer_config.json",), ("preprocessor_config.json",)),
                       hint=f"copy tokenizer.json, tokenizer_config.json, chat_template.json, preprocessor_config.json "
                            f"and video_preprocessor_config.json of {MODEL_REPO} into the folder")
# 235 billion parameters (the model's name) at 2 bytes each in bfloat16: about 470 GB of safetensors
SIZE = 235 * 2 * kit.GB
# the end ids of Qwen3-VL-235B-A22B-Instruct's generation_config.json, <|im_end|> then <|endoftext|> (the Qwen3
# instruct models' list; its config.json's text_config names 151645 alone)
END_HINT = ("Qwen3-VL-235B-A22B-Instruct ends at <|im_end|> (151645) and <|endoftext|> (151643); copy its "
            "generation_config.json")


def describe(folder: Path, name: str, revision: str, precision: str | None, *, is_tiny: bool,
             log: logging.Logger | None = None) -> kit.ModelFolder:
    """The model in `folder`, read from its config.json and generation_config.json; it must hold FILES.

    The dtype is the precision's (bf16, the reference's, or fp16), or for another precision the checkpoint's
    own. A config whose `model_type` is not `qwen3_vl_moe` is accepted, with a warning to `log`. The end ids
    are generation_config.json's, else the text config's (Qwen3-VL's config.json has them there).
    """
    folder = Path(folder)
    config, generation = kit.read_configs_of(folder, FILES, "qwen3_vl_moe", "Qwen3-VL MoE",
                                             f"qwen3-vl's closed division needs {MODEL_REPO}", log)
    text = config.get("text_config")
    text = text if isinstance(text, dict) else config
    precision = precision or "bf16"
    dtype = kit.DTYPES.get(precision) or str(text.get("dtype") or config.get("torch_dtype") or "bfloat16")
    ends = kit.required_end_ids(folder, text, generation, hint=END_HINT)
    return kit.ModelFolder(folder, name, revision, dtype, precision, ends[0], is_tiny, eos_token_ids=ends,
                           architecture=kit.architecture(config), reports=("eos_token_ids", "architecture"))


def make_tiny_model(dest: Path, seed: int = 0, sizes: Mapping[str, int] | None = None) -> Path:
    from cmx.mlperf.benchmarks.qwen3_vl.tiny_model import make_tiny_qwen3_vl

    return make_tiny_qwen3_vl(dest, seed, **(sizes or {})).path


# the text model's sizes are inputs (each token routed to 2 of `experts`); the vision tower's are fixed and small
TINY = kit.TinyModel("Qwen3-VL MoE (2 experts per token)", "tiny-qwen3-vl-random-seed{seed}", make_tiny_model,
                     sizes={"seed": 0, "vocab_size": 4096, "hidden_size": 128, "layers": 2, "heads": 4,
                            "experts": 8})
MODEL = kit.ModelSpec(SIZE, TINY, FILES, describe)
