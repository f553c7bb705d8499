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
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx.mlperf.benchmarks.model_folder import ModelError, check_own_folder, read_json

ARCHITECTURE = "DeepseekV3ForCausalLM"  # DeepSeek-R1's config.json architectures
TINY_DEFAULTS = {"seed": 0, "vocab_size": 4096, "hidden_size": 256, "layers": 2, "heads": 4}


@dataclass(frozen=True)
class DeepSeekModel:
    path: Path
    name: str  # the repository id, the folder's name, or tiny-DeepseekV3ForCausalLM-random-seedN
    revision: str  # the commit downloaded; "" for a folder of your own and the tiny model
    dtype: str  # the weights' format: fp8 (DeepSeek-R1's own), bf16, or a quantization method
    precision: str
    architecture: str
    eos_token_id: int
    is_tiny: bool

    def outputs(self) -> dict[str, object]:
        return {"path": self.path, "name": self.name, "revision": self.revision, "dtype": self.dtype,
                "precision": self.precision, "architecture": self.architecture, "tokenizer_path": self.path,
                "eos_token_id": self.eos_token_id, "eos_token_ids": [self.eos_token_id], "is_tiny": self.is_tiny}


def refuse_tiny_inputs(inputs: Mapping[str, object]) -> None:
    given = [k for k in TINY_DEFAULTS if inputs.get(k) is not None]
    if given:
        raise ModelError(f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to the tiny model only",
                         hint="add _tiny to the query, or drop those inputs")


def make_tiny(dest: Path, inputs: Mapping[str, object], *, log: logging.Logger | None = None) -> DeepSeekModel:
    """The tiny random DeepseekV3 made in `dest`, sized by `inputs` (TINY_DEFAULTS' keys; None: the default)."""
    from cmx.mlperf.benchmarks.deepseek_r1.tiny import make_tiny_deepseek

    if inputs.get("model_path") is not None:
        raise ModelError("model_path and _tiny exclude each other: the tiny model is made, not brought",
                         hint="drop _tiny to use your folder, or drop model_path")
    sizes = {k: (v if inputs.get(k) is None else inputs[k]) for k, v in TINY_DEFAULTS.items()}
    model = make_tiny_deepseek(dest, **sizes)  # type: ignore[arg-type]
    if log is not None:
        log.warning("made a tiny random %s (seed %d): its outputs are noise, so accuracy results with it mean "
                    "nothing", model.architecture, model.seed)
    return describe(model.path, f"tiny-{model.architecture}-random-seed{model.seed}", "", is_tiny=True)


def require_model_files(paths: Collection[str], repo: str, revision: str) -> None:
    """Refuse a choice of files to download that lacks config.json, tokenizer.json or tokenizer_config.json
    (its chat template makes the prompts): before 700 GB, not after."""
    chosen = set(paths)
    for needed in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        if needed not in chosen:
            raise ModelError(f"{repo} at {revision} has no {needed} among the files chosen",
                             hint="check repo and include")


def describe(folder: Path, name: str, revision: str, *, is_tiny: bool,
             log: logging.Logger | None = None) -> DeepSeekModel:
    """The model in `folder`, read from its config.json and generation_config.json."""
    folder = check_own_folder(folder)
    config = read_json(folder / "config.json")
    architectures = config.get("architectures") or []
    architecture = architectures[0] if architectures and isinstance(architectures[0], str) else "unknown"
    if log is not None and architecture != ARCHITECTURE:
        log.warning("%s is a %s, not a %s: deepseek-r1's closed division needs DeepSeek-R1", folder, architecture,
                    ARCHITECTURE)
    for needed in ("tokenizer.json", "tokenizer_config.json"):
        if not (folder / needed).is_file():
            raise ModelError(f"{folder} has no {needed}",
                             hint="copy tokenizer.json and tokenizer_config.json of deepseek-ai/DeepSeek-R1 into it")
    generation = read_json(folder / "generation_config.json") if (folder / "generation_config.json").is_file() else {}
    eos = generation.get("eos_token_id", config.get("eos_token_id"))
    eos = eos[0] if isinstance(eos, list) and eos else eos
    if type(eos) is not int:
        raise ModelError(f"{folder} names no eos_token_id in generation_config.json or config.json",
                         hint="DeepSeek-R1's is 1 (<｜end▁of▁sentence｜>); copy the original files")
    quantization = config.get("quantization_config")
    if isinstance(quantization, dict):
        dtype = str(quantization.get("quant_method") or "quantized")
    else:
        dtype = {"bfloat16": "bf16", "float16": "fp16"}.get(str(config.get("torch_dtype")), "bf16")
    return DeepSeekModel(folder, name, revision, dtype, dtype, architecture, eos, is_tiny)


__all__ = ["ARCHITECTURE", "TINY_DEFAULTS", "DeepSeekModel", "describe", "make_tiny", "refuse_tiny_inputs",
           "require_model_files"]
