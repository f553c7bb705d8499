"""What every benchmark's model side shares: the folder a model recipe reports, its checks, and the tiny model's inputs.

A benchmark's model.py says only what is its own (which files its folder needs, how its config
names the end ids and the dtype, what the closed division runs, the real checkpoint's size) in a
`ModelSpec` built from these parts; `ModelDefaults` gives its BENCHMARK the Protocol's model side
(model_size, describe, make_tiny, refuse_tiny_inputs, require_model_files) from that spec.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cmx.errors import CmxError

GB = 10**9  # model sizes are given as Hugging Face and the references give them: decimal gigabytes
DTYPES = {"bf16": "bfloat16", "fp16": "float16"}  # fp8: the checkpoint's own dtype, from its config.json
# the tiny model's seed and sizes, as a model recipe's inputs name them
TINY_DEFAULTS: Mapping[str, int] = {"seed": 0, "vocab_size": 4096, "hidden_size": 256, "layers": 2, "heads": 4}
_FOLDER_HINT = "give the folder that holds config.json"
PIPELINE_INDEX = "model_index.json"  # what makes a folder a diffusers pipeline (its parts in subfolders)
_OUTPUTS = ("path", "name", "revision", "dtype", "precision", "tokenizer_path", "eos_token_id", "is_tiny")


class ModelError(CmxError):
    """A model folder (or the files chosen to make one) lacks what the benchmark needs."""


@dataclass(frozen=True)
class ModelFolder:
    """A model folder and what the harness needs to know to run it: a model recipe's outputs.

    `reports` names the outputs a recipe declares besides the common ones (_OUTPUTS):
    eos_token_ids, architecture.
    """

    path: Path
    name: str  # the repository id, the folder's name, or tiny-<model>-random-seedN
    revision: str  # the commit downloaded; "" for a folder of your own and the tiny model
    dtype: str  # what it runs in (bfloat16, float16), or the weights' own format where the benchmark says so
    precision: str  # bf16, fp16, fp8, or the checkpoint's quantization method
    eos_token_id: int
    is_tiny: bool
    eos_token_ids: tuple[int, ...] = ()  # every id generation stops at (generation_config.json)
    architecture: str = ""  # config.json architectures[0]: what vLLM runs
    reports: tuple[str, ...] = field(default=(), compare=False)

    def outputs(self) -> dict[str, object]:
        """The model recipe's outputs (the tokenizer is in the model folder)."""
        values: dict[str, object] = {"path": self.path, "name": self.name, "revision": self.revision,
                                     "dtype": self.dtype, "precision": self.precision, "tokenizer_path": self.path,
                                     "eos_token_id": self.eos_token_id, "is_tiny": self.is_tiny,
                                     "eos_token_ids": list(self.eos_token_ids), "architecture": self.architecture}
        return {k: values[k] for k in (*_OUTPUTS, *self.reports)}


@dataclass(frozen=True)
class ModelFiles:
    """The tokenizer files a model folder must hold beside its `index` file (config.json): one of each group
    (`tokenizer.json` or `tokenizer.model`), and `hint`, how to give a folder of your own what it lacks."""

    tokenizer: tuple[tuple[str, ...], ...]
    hint: str
    # the file that makes a folder this benchmark's model: a transformers checkpoint's config.json, or a diffusers
    # pipeline's model_index.json (wan-2.2-t2v-a14b, whose `tokenizer` groups then name the pipeline's parts)
    index: str = "config.json"

    def missing(self, present: Collection[str]) -> str | None:
        """The first group none of whose files is `present`, named as a message says it; None when none is."""
        for group in self.tokenizer:
            if not set(group) & set(present):
                return group[0] if len(group) == 1 else f"tokenizer ({' or '.join(group)})"
        return None


class MakeTiny(Protocol):
    def __call__(self, dest: Path, seed: int = 0, sizes: Mapping[str, int] | None = None) -> Path: ...


@dataclass(frozen=True)
class TinyModel:
    """How a model recipe's `_tiny` makes its model: its generator (`make`), the inputs it takes with their
    defaults (`sizes`, the seed among them), those it cannot take and why (`fixed`), the precisions it
    has, its name and its label in the warning that it writes noise."""

    label: str  # Llama 2, Mixtral (8 experts, 2 per token)
    name: str  # tiny-llama2-random-seed{seed}
    make: MakeTiny  # the generator: the benchmark's tiny module, imported when called
    sizes: Mapping[str, int] = field(default_factory=lambda: dict(TINY_DEFAULTS))
    fixed: Mapping[str, str] = field(default_factory=dict)
    precisions: tuple[str, ...] = ("bf16", "fp16")

    @property
    def inputs(self) -> tuple[str, ...]:
        return (*self.sizes, *self.fixed)


def refuse_tiny_inputs(inputs: Mapping[str, object], names: Collection[str] = tuple(TINY_DEFAULTS)) -> None:
    """The tiny model's sizes and seed (`names`) given for another model are a mistake."""
    given = [k for k in names if inputs.get(k) is not None]
    if given:
        raise ModelError(f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to the tiny model only",
                         hint="add _tiny to the query, or drop those inputs")


def check_own_folder(folder: Path) -> Path:
    """`folder` (a user's model_path) when it is a Hugging Face model folder (config.json) or a diffusers pipeline
    folder (model_index.json); refused otherwise. The benchmark's `describe` then refuses the kind it does not run."""
    folder = Path(folder)
    if not folder.exists():
        raise ModelError(f"model_path {folder} does not exist", hint=_FOLDER_HINT)
    if not folder.is_dir():
        raise ModelError(f"model_path {folder} is not a folder", hint=_FOLDER_HINT)
    if not (folder / "config.json").is_file() and not (folder / PIPELINE_INDEX).is_file():
        raise ModelError(f"{folder} has no config.json: it is not a Hugging Face model folder",
                         hint="give the folder that holds config.json, the *.safetensors and the tokenizer files (a "
                              f"diffusers pipeline's: the folder that holds {PIPELINE_INDEX})")
    return folder


def read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {path}: {exc}") from None
    if not isinstance(value, dict):
        raise ModelError(f"{path} is not a JSON object")
    return value


def read_configs(folder: Path, files: ModelFiles) -> tuple[dict[str, Any], dict[str, Any]]:
    """`folder`'s config.json and generation_config.json ({} when it has none), once its tokenizer files are there."""
    if not (folder / "config.json").is_file():  # a diffusers pipeline's folder passes check_own_folder
        raise ModelError(f"{folder} has no config.json: it is not a Hugging Face model folder",
                         hint="give the folder that holds config.json, the *.safetensors and the tokenizer files")
    config = read_json(folder / "config.json")
    lacking = files.missing([n for group in files.tokenizer for n in group if (folder / n).is_file()])
    if lacking is not None:
        raise ModelError(f"{folder} has no {lacking}", hint=files.hint)
    generation = read_json(folder / "generation_config.json") if (folder / "generation_config.json").is_file() else {}
    return config, generation


def end_ids(config: Mapping[str, Any], generation: Mapping[str, Any]) -> tuple[int, ...]:
    """The ids generation stops at: generation_config.json's eos_token_id (an id or a list), else config.json's."""
    raw = generation.get("eos_token_id", config.get("eos_token_id"))
    return tuple(v for v in (raw if isinstance(raw, list) else [raw]) if type(v) is int)


def required_end_ids(folder: Path, config: Mapping[str, Any], generation: Mapping[str, Any],
                     hint: str) -> tuple[int, ...]:
    """`end_ids`, refused when there are none (`hint`: the ids the real checkpoint lists)."""
    ends = end_ids(config, generation)
    if not ends:
        raise ModelError(f"{folder} names no eos_token_id in generation_config.json or config.json", hint=hint)
    return ends


def architecture(config: Mapping[str, Any]) -> str:
    found = config.get("architectures") or []
    return found[0] if isinstance(found, list) and found and isinstance(found[0], str) else "unknown"


def read_configs_of(folder: Path, files: ModelFiles, model_type: str, wanted: str, closed: str,
                    log: logging.Logger | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """read_configs, saying to `log` (warn_other_model) when config.json names a model_type other than
    `model_type` (one that names none is taken for it)."""
    config, generation = read_configs(folder, files)
    if config.get("model_type") not in (None, model_type):
        warn_other_model(log, folder, f"{config.get('model_type')!r} model", wanted, closed)
    return config, generation


def warn_other_model(log: logging.Logger | None, folder: Path, found: str, wanted: str, closed: str) -> None:
    """Say that `folder` holds another model than the benchmark's: the open division may run it, `closed` may not."""
    if log is not None:
        log.warning("%s is a %s, not a %s: %s", folder, found, wanted, closed)


def tiny_sizes(inputs: Mapping[str, Any], tiny: TinyModel) -> tuple[int, dict[str, int]]:
    """The tiny model's seed and sizes from `inputs` (None: the default); `model_path` must be None: the tiny
    model is made, not brought; an input in `tiny.fixed` is refused with its reason."""
    if inputs.get("model_path") is not None:
        raise ModelError("model_path and _tiny exclude each other: _tiny makes its own model",
                         hint="drop --input model_path to make the tiny model, or drop _tiny to use your folder")
    for name, why in tiny.fixed.items():
        if inputs.get(name) is not None:
            raise ModelError(why, hint=f"drop --input {name}")
    sizes = {k: int(v if inputs.get(k) is None else inputs[k]) for k, v in tiny.sizes.items()}
    return sizes.pop("seed"), sizes


def warn_noise(log: logging.Logger | None, tiny: TinyModel, seed: int, sizes: Mapping[str, int]) -> None:
    """Say that a tiny model writes noise, with the sizes it was made with."""
    if log is not None:
        named = {"layers": "{} layers", "hidden_size": "hidden {}", "heads": "{} heads", "experts": "{} experts",
                 "vocab_size": "vocabulary {}"}
        shown = ", ".join(named.get(k, k + " {}").format(v) for k, v in sizes.items())
        log.warning("made a tiny %s with RANDOM weights (%s, seed %d): it writes noise; accuracy results with it "
                    "mean nothing", tiny.label, shown, seed)


class Describe(Protocol):
    def __call__(self, folder: Path, name: str, revision: str, precision: str | None, *, is_tiny: bool,
                 log: logging.Logger | None = None) -> ModelFolder: ...


@dataclass(frozen=True)
class ModelSpec:
    """A benchmark's model side, as its model.py states it: the real checkpoint's `size` in bytes (what a
    Kubernetes cache is sized for), its `tiny` model, the tokenizer `files` a folder needs, and
    `describe`, which reads a folder into the ModelFolder its recipe reports."""

    size: int
    tiny: TinyModel
    files: ModelFiles
    describe: Describe


class ModelDefaults:
    """The Benchmark Protocol's model side for a BENCHMARK that sets `model` (its model.py's ModelSpec)."""

    @property
    def model(self) -> ModelSpec:
        """The benchmark's ModelSpec: a BENCHMARK sets it as a field (`model: ModelSpec = MODEL`), or a property
        where it shares another benchmark's model side (llama3.1-405b, llama3.1-8b's at its own size)."""
        raise NotImplementedError(f"{type(self).__name__} sets no ModelSpec (`model: ModelSpec = MODEL`)")

    @property
    def model_size(self) -> int:
        return self.model.size

    def make_tiny_model(self, dest: Path, seed: int = 0, sizes: Mapping[str, int] | None = None) -> Path:
        return self.model.tiny.make(dest, seed, sizes)

    def describe(self, folder: Path, name: str, revision: str, precision: str | None, *, is_tiny: bool,
                 log: logging.Logger | None = None) -> ModelFolder:
        return self.model.describe(folder, name, revision, precision, is_tiny=is_tiny, log=log)

    def make_tiny(self, dest: Path, precision: str | None, inputs: Mapping[str, object], *,
                  log: logging.Logger | None = None) -> ModelFolder:
        """The tiny random-weight model made in `dest`, sized by a model recipe's `inputs` (None: the default),
        described as the recipe reports it. A warning that its outputs are noise goes to `log`."""
        tiny = self.model.tiny
        if precision is not None and precision not in tiny.precisions:
            raise ModelError(f"the tiny model has no {precision.upper()} checkpoint",
                             hint="use _tiny with " + " or ".join(f"_{p}" for p in tiny.precisions)
                                  + f" (_{tiny.precisions[0]} is the default)")
        seed, sizes = tiny_sizes(inputs, tiny)
        path = self.make_tiny_model(dest, seed, sizes)
        warn_noise(log, tiny, seed, sizes)
        return self.describe(path, tiny.name.format(seed=seed), "", precision, is_tiny=True)

    def refuse_tiny_inputs(self, inputs: Mapping[str, object]) -> None:
        refuse_tiny_inputs(inputs, self.model.tiny.inputs)

    def require_model_files(self, paths: Collection[str], repo: str, revision: str) -> None:
        """Refuse a choice of files to download that lacks the index file (config.json, a pipeline's
        model_index.json) or the tokenizer (a pipeline's parts): before the weights, not after."""
        index = self.model.files.index
        if index not in paths:
            kind = "diffusers pipeline" if index == PIPELINE_INDEX else "Hugging Face model"
            raise ModelError(f"{repo} at {revision} has no {index} among the files chosen: it is not a {kind} "
                             "repository, or include leaves it out", hint="check repo and include")
        lacking = self.model.files.missing(paths)
        if lacking is not None:
            raise ModelError(f"{repo} at {revision} has no {lacking} among the files chosen",
                             hint="check repo and include (add the tokenizer files to include)")
