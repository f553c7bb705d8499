"""The gpt-oss-120b model folder: what it must hold, and what get-ml-model-gpt-oss-120b reports about it."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx.mlperf.benchmarks.model_folder import ModelError, check_own_folder, read_json

_TOKENIZER_HINT = "copy tokenizer.json and tokenizer_config.json of openai/gpt-oss-120b into the folder"
TINY_DEFAULTS = {"seed": 0, "vocab_size": 4096, "hidden_size": 256, "layers": 2, "heads": 4, "experts": 4}


@dataclass(frozen=True)
class GptOssModel:
    """A model folder and what the harness needs to know to run it."""

    path: Path
    name: str        # the repository id, the folder's name, or tiny-gpt-oss-random-seedN
    revision: str    # the commit downloaded; "" for a folder of your own and the tiny model
    dtype: str       # what the non-expert weights run in: bfloat16
    precision: str   # mxfp4 (the checkpoint's experts) or bf16 (the tiny model, unquantized)
    eos_token_id: int
    eos_token_ids: tuple[int, ...]
    is_tiny: bool
    architecture: str = "GptOssForCausalLM"  # config.json architectures[0]: what vLLM runs (cmx_run.json records it)

    def outputs(self) -> dict[str, object]:
        return {"path": self.path, "name": self.name, "revision": self.revision, "dtype": self.dtype,
                "precision": self.precision, "tokenizer_path": self.path, "eos_token_id": self.eos_token_id,
                "eos_token_ids": list(self.eos_token_ids), "is_tiny": self.is_tiny, "architecture": self.architecture}


def make_tiny(dest: Path, inputs: Mapping[str, object], *, log: logging.Logger | None = None) -> GptOssModel:
    """The tiny random GptOss made in `dest`, sized by `inputs` (TINY_DEFAULTS' keys; None: the default)."""
    from cmx.mlperf.benchmarks.gpt_oss_120b.tiny import make_tiny_gpt_oss

    if inputs.get("model_path") is not None:
        raise ModelError("model_path and _tiny exclude each other: _tiny makes its own model",
                         hint="drop --input model_path to make the tiny model, or drop _tiny to use your folder")
    sizes = {k: v if inputs.get(k) is None else inputs[k] for k, v in TINY_DEFAULTS.items()}
    seed = int(sizes.pop("seed"))  # type: ignore[arg-type]
    made = make_tiny_gpt_oss(dest, seed, **sizes)  # type: ignore[arg-type]
    if log is not None:
        log.warning("made a tiny GptOssForCausalLM with RANDOM weights (%d layers, hidden %d, %d heads, %d experts, "
                    "vocabulary %d, seed %d): it writes noise; accuracy results with it mean nothing", made.layers,
                    made.hidden_size, made.heads, made.experts, made.vocab_size, seed)
    return describe(made.path, f"tiny-gpt-oss-random-seed{seed}", "", is_tiny=True)


def refuse_tiny_inputs(inputs: Mapping[str, object]) -> None:
    given = [k for k in TINY_DEFAULTS if inputs.get(k) is not None]
    if given:
        raise ModelError(f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to the tiny model only",
                         hint="add _tiny to the query, or drop those inputs")


def require_model_files(paths: Collection[str], repo: str, revision: str) -> None:
    """Refuse a choice of files that lacks config.json or tokenizer.json: before 65 GB, not after."""
    chosen = set(paths)
    for needed in ("config.json", "tokenizer.json"):
        if needed not in chosen:
            raise ModelError(f"{repo} at {revision} has no {needed} among the files chosen",
                             hint="check repo and include")


def describe(folder: Path, name: str, revision: str, *, is_tiny: bool,
             log: logging.Logger | None = None) -> GptOssModel:
    """The model in `folder`, from its config.json, generation_config.json and tokenizer files."""
    folder = check_own_folder(folder)
    config = read_json(folder / "config.json")
    if log is not None and config.get("model_type") != "gpt_oss":
        log.warning("%s is a %r model, not gpt_oss: the closed division needs openai/gpt-oss-120b", folder,
                    config.get("model_type"))
    if not (folder / "tokenizer.json").is_file():
        raise ModelError(f"{folder} has no tokenizer.json", hint=_TOKENIZER_HINT)
    generation = read_json(folder / "generation_config.json") if (folder / "generation_config.json").is_file() else {}
    raw = generation.get("eos_token_id", config.get("eos_token_id"))
    ends = tuple(v for v in (raw if isinstance(raw, list) else [raw]) if type(v) is int)
    if not ends:
        raise ModelError(f"{folder} names no eos_token_id in generation_config.json or config.json",
                         hint="gpt-oss-120b lists [200002, 199999, 200012]; copy the original files")
    quant = config.get("quantization_config") or {}
    precision = str(quant.get("quant_method", "bf16")) if isinstance(quant, dict) else "bf16"
    architecture = str((config.get("architectures") or ["unknown"])[0])
    return GptOssModel(folder, name, revision, "bfloat16", precision, ends[0], ends, is_tiny, architecture)


__all__ = ["GptOssModel", "TINY_DEFAULTS", "describe", "make_tiny", "refuse_tiny_inputs", "require_model_files"]
