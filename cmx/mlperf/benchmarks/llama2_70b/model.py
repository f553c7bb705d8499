"""The Llama 2 model folder the benchmark runs: what it must hold, and what get-ml-model-llama2 reports about it."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx.mlperf.benchmarks.model_folder import (
    DTYPES,
    ModelError,
    read_json,
    tiny_sizes,
    warn_noise,
)


@dataclass(frozen=True)
class LlamaModel:
    """A model folder and what the harness needs to know to run it."""

    path: Path
    name: str  # the repository id, the folder's name, or tiny-llama2-random-seedN
    revision: str  # the commit downloaded; "" for a folder of your own and the tiny model
    dtype: str  # bfloat16 or float16, or with fp8 the checkpoint's torch_dtype
    precision: str  # bf16, fp16 or fp8
    eos_token_id: int
    is_tiny: bool

    def outputs(self) -> dict[str, object]:
        """The outputs of get-ml-model-llama2 (the tokenizer is in the model folder)."""
        return {"path": self.path, "name": self.name, "revision": self.revision, "dtype": self.dtype,
                "precision": self.precision, "tokenizer_path": self.path, "eos_token_id": self.eos_token_id,
                "is_tiny": self.is_tiny}


def make_tiny(dest: Path, precision: str, inputs: Mapping[str, object], *,
              log: logging.Logger | None = None) -> LlamaModel:
    """The tiny random-weight Llama 2 (cmx.mlperf.benchmarks.llama2_70b.tiny) made in `dest`, sized by `inputs` (None: the default).

    `inputs` holds TINY_DEFAULTS' keys and `model_path`, which must be None: the tiny model is
    made, not brought. A warning that its outputs are noise goes to `log`.
    """
    from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_llama

    if precision == "fp8":
        raise ModelError("the tiny model has no FP8 checkpoint", hint="use _tiny with _bf16 (the default) or _fp16")
    seed, sizes = tiny_sizes(inputs)
    model = make_tiny_llama(dest, seed, **sizes)
    warn_noise(log, "Llama 2", model, seed)
    return describe(model.path, f"tiny-llama2-random-seed{seed}", "", precision, is_tiny=True)


def require_model_files(paths: Collection[str], repo: str, revision: str) -> None:
    """Refuse a choice of files to download that lacks config.json or a tokenizer: before 130 GB, not after."""
    paths = set(paths)
    if "config.json" not in paths:
        raise ModelError(f"{repo} at {revision} has no config.json among the files chosen: it is not a Hugging Face "
                         "model repository, or include leaves it out", hint="check repo and include")
    if not paths & {"tokenizer.json", "tokenizer.model"}:
        raise ModelError(f"{repo} at {revision} has no tokenizer (tokenizer.json or tokenizer.model) among the files "
                         "chosen", hint="add them to include; a repository without them can be used with "
                                        "--input model_path=DIR after copying Llama 2's tokenizer files into DIR")


def describe(folder: Path, name: str, revision: str, precision: str, *, is_tiny: bool,
             log: logging.Logger | None = None) -> LlamaModel:
    """The model in `folder`, read from its config.json and generation_config.json; it must have a tokenizer.

    The dtype is the precision's (bf16, fp16) or, for fp8, the checkpoint's `torch_dtype`. A
    config whose `model_type` is not `llama` is accepted, with a warning to `log`.
    """
    folder = Path(folder)
    config = read_json(folder / "config.json")
    if log is not None and config.get("model_type") not in (None, "llama"):
        log.warning("%s is a %r model, not a Llama: llama2-70b's closed division needs Llama 2 70B",
                    folder, config.get("model_type"))
    if not any((folder / f).is_file() for f in ("tokenizer.json", "tokenizer.model")):
        raise ModelError(f"{folder} has no tokenizer (tokenizer.json or tokenizer.model)",
                         hint="copy the tokenizer files of meta-llama/Llama-2-70b-chat-hf into the folder")
    generation = read_json(folder / "generation_config.json") if (folder / "generation_config.json").is_file() else {}
    eos = generation.get("eos_token_id", config.get("eos_token_id", 2))
    eos = eos[0] if isinstance(eos, list) else eos
    dtype = DTYPES.get(precision) or str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    return LlamaModel(folder, name, revision, dtype, precision, int(eos), is_tiny)
