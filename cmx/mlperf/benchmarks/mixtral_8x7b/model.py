"""The Mixtral-8x7B-Instruct folder mixtral-8x7b runs: what it must hold, and what get-ml-model-mixtral-8x7b reports.

The reference's model (language/mixtral-8x7b/README.md, "Model"): mistralai/Mixtral-8x7B-Instruct-v0.1
at commit a60832cb6c88d5cb6e507680d0e9996fbad77050 ("use a version of the model that exactly
matches the one in this commit"), run in fp16 (the table's precision column). The reference names
no FP8 checkpoint: submitters who run FP8 quantize it themselves (see docs/benchmarks/mixtral-8x7b.md).
"""

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

MODEL_REPO = "mistralai/Mixtral-8x7B-Instruct-v0.1"  # README.md, Model
MODEL_REVISION = "a60832cb6c88d5cb6e507680d0e9996fbad77050"  # README.md: "exactly matches ... this commit"
_TOKENIZER_HINT = "copy tokenizer.json (or tokenizer.model) and tokenizer_config.json of " + MODEL_REPO + " into it"


@dataclass(frozen=True)
class MixtralModel:
    """A model folder and what the harness needs to know to run it."""

    path: Path
    name: str  # the repository id, the folder's name, or tiny-mixtral-random-seedN
    revision: str  # the commit downloaded; "" for a folder of your own and the tiny model
    dtype: str  # bfloat16 or float16
    precision: str  # bf16 or fp16
    eos_token_id: int  # </s>, 2
    architecture: str  # config.json architectures[0]: what vLLM runs
    is_tiny: bool

    def outputs(self) -> dict[str, object]:
        """The outputs of get-ml-model-mixtral-8x7b (the tokenizer is in the model folder)."""
        return {"path": self.path, "name": self.name, "revision": self.revision, "dtype": self.dtype,
                "precision": self.precision, "tokenizer_path": self.path, "eos_token_id": self.eos_token_id,
                "architecture": self.architecture, "is_tiny": self.is_tiny}


def make_tiny(dest: Path, precision: str, inputs: Mapping[str, object], *,
              log: logging.Logger | None = None) -> MixtralModel:
    """The tiny random-weight Mixtral made in `dest`, sized by `inputs` (None: the default; vocab_size is the
    tiny tokenizer's and cannot be chosen)."""
    from cmx.mlperf.benchmarks.mixtral_8x7b.tiny_model import make_tiny_mixtral

    seed, sizes = tiny_sizes(inputs)
    if inputs.get("vocab_size") is not None:
        raise ModelError("the tiny Mixtral's vocabulary is its tokenizer's (4096 pieces, Mixtral's layout)",
                         hint="drop --input vocab_size")
    sizes.pop("vocab_size")
    model = make_tiny_mixtral(dest, seed, **sizes)
    warn_noise(log, "Mixtral (8 experts, 2 per token)", model, seed)
    return describe(model.path, f"tiny-mixtral-random-seed{seed}", "", precision, is_tiny=True)


def require_model_files(paths: Collection[str], repo: str, revision: str) -> None:
    """Refuse a choice of files to download that lacks config.json or a tokenizer: before 93 GB, not after."""
    chosen = set(paths)
    if "config.json" not in chosen:
        raise ModelError(f"{repo} at {revision} has no config.json among the files chosen: it is not a Hugging Face "
                         "model repository, or include leaves it out", hint="check repo and include")
    if not chosen & {"tokenizer.json", "tokenizer.model"}:
        raise ModelError(f"{repo} at {revision} has no tokenizer (tokenizer.json or tokenizer.model) among the files "
                         "chosen", hint="add them to include")


def describe(folder: Path, name: str, revision: str, precision: str, *, is_tiny: bool,
             log: logging.Logger | None = None) -> MixtralModel:
    """The model in `folder`, read from its config.json and generation_config.json; it must have a tokenizer.

    A config whose architecture is not MixtralForCausalLM is accepted, with a warning to `log`
    (the closed division needs Mixtral 8x7B; the open division may run another model)."""
    folder = Path(folder)
    config = read_json(folder / "config.json")
    architecture = str((config.get("architectures") or ["unknown"])[0])
    if log is not None and architecture != "MixtralForCausalLM":
        log.warning("%s is a %s, not a MixtralForCausalLM: mixtral-8x7b's closed division needs Mixtral 8x7B",
                    folder, architecture)
    if not any((folder / f).is_file() for f in ("tokenizer.json", "tokenizer.model")):
        raise ModelError(f"{folder} has no tokenizer (tokenizer.json or tokenizer.model)", hint=_TOKENIZER_HINT)
    generation = read_json(folder / "generation_config.json") if (folder / "generation_config.json").is_file() else {}
    eos = generation.get("eos_token_id", config.get("eos_token_id", 2))
    eos = eos[0] if isinstance(eos, list) else eos
    dtype = DTYPES.get(precision) or str(config.get("torch_dtype") or "bfloat16")
    return MixtralModel(folder, name, revision, dtype, precision, int(eos), architecture, is_tiny)


__all__ = ["MODEL_REPO", "MODEL_REVISION", "MixtralModel", "describe", "make_tiny", "require_model_files"]
