"""The model and dataset recipes' declared outputs against the TypedDicts Python reads them through (kit/outputs.py)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args, get_origin

import pytest
from typing_extensions import NotRequired, get_type_hints

from cmx.mlperf.benchmarks.kit.outputs import DatasetOutputs, ModelOutputs
from cmx.recipe.load import load_recipe
from tests.conftest import REPO

# an output's declared type -> the Python type a dep reads (the runner publishes a path as a string)
READ_AS = {"path": str, "str": str, "int": int, "bool": bool, "list": list}
MODEL_RECIPES = sorted(p.parent for p in (REPO / "recipes").glob("get-ml-model-*/recipe.yaml"))
DATASET_RECIPES = sorted(p.parent for p in (REPO / "recipes").glob("get-dataset-*/recipe.yaml"))


def typed_keys(typed: type) -> tuple[dict[str, type], set[str]]:
    """Each key's Python type (a generic's origin: list for list[int]) and the keys every recipe must declare."""
    hints = get_type_hints(typed, include_extras=True)
    optional = {k for k, h in hints.items() if get_origin(h) is NotRequired}
    bare = {k: get_args(h)[0] if k in optional else h for k, h in hints.items()}
    return {k: get_origin(t) or t for k, t in bare.items()}, set(hints) - optional


def declared(folder: Path) -> dict[str, type]:
    recipe, _ = load_recipe(folder)
    return {name: READ_AS[spec.type] for name, spec in recipe.outputs.items()}


def test_the_recipes_are_found() -> None:
    assert len(MODEL_RECIPES) >= 8 and len(DATASET_RECIPES) >= 8


@pytest.mark.parametrize("folder", MODEL_RECIPES, ids=[p.name for p in MODEL_RECIPES])
def test_a_model_recipe_declares_the_outputs_model_outputs_reads(folder: Path) -> None:
    types, required = typed_keys(ModelOutputs)
    outputs = declared(folder)
    assert required <= outputs.keys()
    assert {k: types.get(k) for k in outputs} == outputs  # nothing undeclared in Python, each of its type


@pytest.mark.parametrize("folder", DATASET_RECIPES, ids=[p.name for p in DATASET_RECIPES])
def test_a_dataset_recipe_declares_the_outputs_dataset_outputs_reads(folder: Path) -> None:
    types, required = typed_keys(DatasetOutputs)
    outputs = declared(folder)
    assert required <= outputs.keys()
    assert {k: types.get(k) for k in outputs} == outputs


def test_model_outputs_requires_what_every_model_recipe_declares() -> None:
    types, required = typed_keys(ModelOutputs)
    assert required == {"path", "name", "revision", "dtype", "precision", "tokenizer_path", "eos_token_id", "is_tiny"}
    assert types["eos_token_ids"] is list and types["path"] is str and "quantization" not in types
