"""What every benchmark's model recipe shares: a user's own model folder checked, tiny-only inputs refused, the dtypes.

A benchmark's model module (llama2_70b/model.py, llama3_1_8b/model.py) describes its own
checkpoint (EOS ids, tokenizer, what the recipe reports) on top of these.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cmx.errors import CmxError

DTYPES = {"bf16": "bfloat16", "fp16": "float16"}  # fp8: the checkpoint's own dtype, from its config.json
TINY_DEFAULTS = {"seed": 0, "vocab_size": 4096, "hidden_size": 256, "layers": 2, "heads": 4}
_FOLDER_HINT = "give the folder that holds config.json"


class ModelError(CmxError):
    """A model folder (or the files chosen to make one) lacks what the benchmark needs."""


def refuse_tiny_inputs(inputs: Mapping[str, object]) -> None:
    """The tiny model's sizes and seed (TINY_DEFAULTS' keys) given for another model are a mistake."""
    given = [k for k in TINY_DEFAULTS if inputs.get(k) is not None]
    if given:
        raise ModelError(f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to the tiny model only",
                         hint="add _tiny to the query, or drop those inputs")


def check_own_folder(folder: Path) -> Path:
    """`folder` (a user's model_path) when it is a Hugging Face model folder; refused otherwise."""
    folder = Path(folder)
    if not folder.exists():
        raise ModelError(f"model_path {folder} does not exist", hint=_FOLDER_HINT)
    if not folder.is_dir():
        raise ModelError(f"model_path {folder} is not a folder", hint=_FOLDER_HINT)
    if not (folder / "config.json").is_file():
        raise ModelError(f"{folder} has no config.json: it is not a Hugging Face model folder",
                         hint="give the folder that holds config.json, the *.safetensors and the tokenizer files")
    return folder


def read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {path}: {exc}") from None
    if not isinstance(value, dict):
        raise ModelError(f"{path} is not a JSON object")
    return value


def tiny_sizes(inputs: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
    """The tiny model's seed and sizes from `inputs` (TINY_DEFAULTS' keys; None: the default); `model_path`
    must be None: the tiny model is made, not brought."""
    if inputs.get("model_path") is not None:
        raise ModelError("model_path and _tiny exclude each other: _tiny makes its own model",
                         hint="drop --input model_path to make the tiny model, or drop _tiny to use your folder")
    sizes = {k: v if inputs.get(k) is None else inputs[k] for k, v in TINY_DEFAULTS.items()}
    return sizes.pop("seed"), sizes


def warn_noise(log: logging.Logger | None, what: str, model: Any, seed: int) -> None:
    """Say that a tiny model writes noise (`model` has layers, hidden_size, heads, vocab_size)."""
    if log is not None:
        log.warning("made a tiny %s with RANDOM weights (%d layers, hidden %d, %d heads, vocabulary %d, seed %d): "
                    "it writes noise; accuracy results with it mean nothing", what, model.layers,
                    model.hidden_size, model.heads, model.vocab_size, seed)
