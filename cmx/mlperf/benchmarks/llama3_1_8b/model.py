"""The Llama 3.1 8B Instruct folder llama3.1-8b runs: what it must hold, and what get-ml-model-llama3 reports about it.

A Llama 3.1 folder holds the same files at 8B and 405B, so llama3.1-405b describes its folder here too
(through the registry).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from cmx.mlperf.benchmarks.kit import model as kit

FILES = kit.ModelFiles(tokenizer=(("tokenizer.json",),),
                       hint="copy tokenizer.json and tokenizer_config.json of meta-llama/Llama-3.1-8B-Instruct into "
                            "the folder")
# 8.03 B parameters in bfloat16: about 16 GB of safetensors (get-ml-model-llama3's recipe.yaml)
SIZE = 16 * kit.GB


def describe(folder: Path, name: str, revision: str, precision: str | None, *, is_tiny: bool,
             log: logging.Logger | None = None) -> kit.ModelFolder:
    """The model in `folder`, read from its config.json, generation_config.json and tokenizer files.

    A config whose `model_type` is not `llama` is accepted, with a warning to `log`.
    """
    folder = kit.check_own_folder(folder)
    precision = precision or "bf16"
    if precision not in kit.DTYPES:
        raise kit.ModelError(f"precision {precision!r} is not one of {', '.join(kit.DTYPES)}")
    config, generation = kit.read_configs_of(folder, FILES, "llama", "Llama",
                                             "llama3.1-8b's closed division needs Llama 3.1 8B Instruct", log)
    ends = kit.required_end_ids(folder, config, generation,
                                "a Llama 3.1 folder lists [128001, 128008, 128009]; copy the original files")
    eos = _tokenizer_eos(folder) if (folder / "tokenizer_config.json").is_file() else None
    return kit.ModelFolder(folder, name, revision, kit.DTYPES[precision], precision, ends[0] if eos is None else eos,
                           is_tiny, eos_token_ids=ends, reports=("eos_token_ids",))


def _tokenizer_eos(folder: Path) -> int | None:
    """The id of tokenizer_config.json's eos_token, looked up among tokenizer.json's added tokens."""
    eos = kit.read_json(folder / "tokenizer_config.json").get("eos_token")
    content = eos.get("content") if isinstance(eos, dict) else eos
    if not isinstance(content, str):
        return None
    added = kit.read_json(folder / "tokenizer.json").get("added_tokens") or []
    found = [t.get("id") for t in added if isinstance(t, dict) and t.get("content") == content]
    return found[0] if found and type(found[0]) is int else None


def make_tiny_model(dest: Path, seed: int = 0, sizes: Mapping[str, int] | None = None) -> Path:
    from cmx.mlperf.benchmarks.llama3_1_8b.tiny import make_tiny_llama3

    return make_tiny_llama3(dest, seed, **(sizes or {})).path


MODEL = kit.ModelSpec(SIZE, kit.TinyModel("Llama 3", "tiny-llama3-random-seed{seed}", make_tiny_model), FILES,
                      describe)
