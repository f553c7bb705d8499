"""The round a user gets without naming one is the newest cmx has a file for (v6.1 today), everywhere one is
chosen for them: the recipes must name it as a literal, so these tests fail when a new round file lands and a
recipe still defaults to the old one."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmx import api
from cmx.mlperf.benchmarks import benchmark_for
from cmx.mlperf.rounds import known_rounds, latest_round, load_round
from cmx.recipe.load import load_recipe
from tests.conftest import REPO

RECIPES = sorted(p.parent for p in (REPO / "recipes").glob("*/recipe.yaml"))
WITH_ROUND = [f for f in RECIPES if "round" in load_recipe(f)[0].inputs]


def test_the_latest_round_is_the_newest_file() -> None:
    assert "v6.1" in known_rounds() and latest_round() == known_rounds()[-1]
    def release(name: str) -> tuple[int, ...]:  # the newest round pins the newest LoadGen
        return tuple(int(p) for p in load_round(name).loadgen_version.split("."))

    assert all(release(r) <= release(latest_round()) for r in known_rounds())


def test_the_shared_app_and_get_loadgen_default_to_the_newest_round() -> None:
    for name in ("app-mlperf-inference", "get-loadgen"):
        spec = load_recipe(REPO / "recipes" / name)[0].inputs["round"]
        assert spec.default == latest_round(), name
        assert spec.choices == tuple(known_rounds()), name


@pytest.mark.parametrize("folder", WITH_ROUND, ids=lambda f: f.name)
def test_every_recipe_s_round_is_its_newest_choice_of_the_known_rounds(folder: Path) -> None:
    """An app whose benchmark left the rounds (mixtral-8x7b, llama3.1-405b: not in v6.1) defaults to the newest
    round that has it; generate-mlperf-submission has none (the round its results were run for)."""
    recipe = load_recipe(folder)[0]
    spec = recipe.inputs["round"]
    assert set(spec.choices) <= set(known_rounds())
    if recipe.name == "generate-mlperf-submission":
        assert spec.default is None
        return
    assert spec.default == max(spec.choices, key=known_rounds().index)
    family = recipe.params.get("benchmark")
    if family is not None:  # an app: its choices are the rounds that have its benchmark
        names = set(benchmark_for(family).names)
        assert list(spec.choices) == [r for r in known_rounds() if names & set(load_round(r).benchmark_names)]


def test_check_defaults_to_the_newest_round(tmp_path: Path) -> None:
    (tmp_path / "closed").mkdir()
    assert api.check(tmp_path).round == latest_round()
    assert api.check(tmp_path, round_name="v6.0").round == "v6.0"
