"""The Llama 3.1 8B Instruct folder llama3.1-8b runs: what it must hold, and what get-ml-model-llama3 reports about it."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx.mlperf.benchmarks.model_folder import (
    DTYPES,
    ModelError,
    check_own_folder,
    read_json,
    refuse_tiny_inputs,
    tiny_sizes,
    warn_noise,
)

_TOKENIZER_HINT = "copy tokenizer.json and tokenizer_config.json of meta-llama/Llama-3.1-8B-Instruct into the folder"


@dataclass(frozen=True)
class Llama3Model:
    """A model folder and what the harness needs to know to run it."""

    path: Path
    name: str  # the repository id, the folder's name, or tiny-llama3-random-seedN
    revision: str  # the commit downloaded; "" for a folder of your own and the tiny model
    dtype: str  # bfloat16 or float16
    precision: str  # bf16 or fp16
    eos_token_id: int  # the tokenizer's eos_token (<|eot_id|> for the Instruct model)
    eos_token_ids: tuple[int, ...]  # every id generation stops at (generation_config.json)
    is_tiny: bool

    def outputs(self) -> dict[str, object]:
        """The outputs of get-ml-model-llama3 (the tokenizer is in the model folder)."""
        return {"path": self.path, "name": self.name, "revision": self.revision, "dtype": self.dtype,
                "precision": self.precision, "tokenizer_path": self.path, "eos_token_id": self.eos_token_id,
                "eos_token_ids": list(self.eos_token_ids), "is_tiny": self.is_tiny}


def make_tiny(dest: Path, precision: str, inputs: Mapping[str, object], *,
              log: logging.Logger | None = None) -> Llama3Model:
    """The tiny random-weight Llama 3 made in `dest`, sized by `inputs` (TINY_DEFAULTS' keys; None: the default).

    `inputs["model_path"]` must be None: the tiny model is made, not brought. A warning that its
    outputs are noise goes to `log`.
    """
    from cmx.mlperf.benchmarks.llama3_1_8b.tiny import make_tiny_llama3

    seed, sizes = tiny_sizes(inputs)
    model = make_tiny_llama3(dest, seed, **sizes)
    warn_noise(log, "Llama 3", model, seed)
    return describe(model.path, f"tiny-llama3-random-seed{seed}", "", precision, is_tiny=True)


def require_model_files(paths: Collection[str], repo: str, revision: str) -> None:
    """Refuse a choice of files to download that lacks config.json or tokenizer.json: before 16 GB, not after."""
    chosen = set(paths)
    for needed in ("config.json", "tokenizer.json"):
        if needed not in chosen:
            raise ModelError(f"{repo} at {revision} has no {needed} among the files chosen: it is not a Hugging Face "
                             "Llama 3 repository, or include leaves it out", hint="check repo and include")


def describe(folder: Path, name: str, revision: str, precision: str, *, is_tiny: bool,
             log: logging.Logger | None = None) -> Llama3Model:
    """The model in `folder`, read from its config.json, generation_config.json and tokenizer files.

    A config whose `model_type` is not `llama` is accepted, with a warning to `log`.
    """
    folder = check_own_folder(folder)
    if precision not in DTYPES:
        raise ModelError(f"precision {precision!r} is not one of {', '.join(DTYPES)}")
    config = read_json(folder / "config.json")
    if log is not None and config.get("model_type") not in (None, "llama"):
        log.warning("%s is a %r model, not a Llama: llama3.1-8b's closed division needs Llama 3.1 8B Instruct",
                    folder, config.get("model_type"))
    if not (folder / "tokenizer.json").is_file():
        raise ModelError(f"{folder} has no tokenizer.json", hint=_TOKENIZER_HINT)
    generation = read_json(folder / "generation_config.json") if (folder / "generation_config.json").is_file() else {}
    ends = _ids(generation.get("eos_token_id", config.get("eos_token_id")))
    if not ends:
        raise ModelError(f"{folder} names no eos_token_id in generation_config.json or config.json",
                         hint="a Llama 3.1 folder lists [128001, 128008, 128009]; copy the original files")
    eos = _tokenizer_eos(folder) if (folder / "tokenizer_config.json").is_file() else None
    return Llama3Model(folder, name, revision, DTYPES[precision], precision, ends[0] if eos is None else eos, ends,
                       is_tiny)


def _ids(value: object) -> tuple[int, ...]:
    values = value if isinstance(value, list) else [value]
    return tuple(v for v in values if type(v) is int)


def _tokenizer_eos(folder: Path) -> int | None:
    """The id of tokenizer_config.json's eos_token, looked up among tokenizer.json's added tokens."""
    eos = read_json(folder / "tokenizer_config.json").get("eos_token")
    content = eos.get("content") if isinstance(eos, dict) else eos
    if not isinstance(content, str):
        return None
    added = read_json(folder / "tokenizer.json").get("added_tokens") or []
    found = [t.get("id") for t in added if isinstance(t, dict) and t.get("content") == content]
    return found[0] if found and type(found[0]) is int else None


__all__ = ["DTYPES", "Llama3Model", "ModelError", "describe", "make_tiny", "refuse_tiny_inputs",
           "require_model_files"]
