"""The recipe bases get-ml-model and get-dataset (docs/recipes.md, "Extending a recipe"): every model and dataset recipe
extends one, runs its run.py with the benchmark its `params` names, and keeps the cache keys it had before the bases.

A model's or dataset's key is pinned (`cache: {key: [...]}`): it hashes the recipe's name and the listed fields,
not its files, so moving keys into a base changes no key, and a cache entry made before is found again. The keys
below were computed at b6930e7, before the bases, for a plan with no environment (no HF_ENDPOINT): each recipe with
its defaults, with each other variation choice, and with _tiny and every tiny size given (7).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cmx import api
from cmx.mlperf.benchmarks import benchmark_for
from cmx.mlperf.benchmarks.kit.model import ModelFolder
from cmx.recipe.load import load_recipe
from cmx.recipe.model import Recipe
from cmx.settings import Settings
from tests.conftest import REPO

BASES = {"get-ml-model": sorted(REPO.glob("recipes/get-ml-model-*")),
         "get-dataset": sorted(REPO.glob("recipes/get-dataset-*"))}
CHILDREN = [(base, folder) for base, folders in BASES.items() for folder in folders]

# (recipe, variation asked, every tiny size given) -> the first 16 hex digits of its key before the bases
KEYS = {
    ("get-dataset-cnndm", "", False): "070c3d6ac8547e21",
    ("get-dataset-cnndm", "_tiny", False): "b68df184ad172e55",
    ("get-dataset-cnndm", "_tiny", True): "61eeb8c4298bff50",
    ("get-dataset-deepseek-r1", "", False): "20a868750c686087",
    ("get-dataset-deepseek-r1", "_tiny", False): "993697b330de8ad2",
    ("get-dataset-deepseek-r1", "_tiny", True): "e7227f11ae98ee28",
    ("get-dataset-gpt-oss-120b", "", False): "0d489d61794f2dbd",
    ("get-dataset-gpt-oss-120b", "_tiny", False): "81b5541540210811",
    ("get-dataset-gpt-oss-120b", "_tiny", True): "975ec5bd3b1ed3e7",
    ("get-dataset-llama3-405b", "", False): "ab9cce771b7a6850",
    ("get-dataset-llama3-405b", "_tiny", False): "fd2ec0f61c94365f",
    ("get-dataset-llama3-405b", "_tiny", True): "631d27141596158c",
    ("get-dataset-mixtral-8x7b", "", False): "9aad0be5095153c7",
    ("get-dataset-mixtral-8x7b", "_tiny", False): "1bb2d8db91907bde",
    ("get-dataset-mixtral-8x7b", "_tiny", True): "13d97ff08854b750",
    ("get-dataset-openorca", "", False): "978ae512e94c7f0a",
    ("get-dataset-openorca", "_tiny", False): "3661177d2d2f5936",
    ("get-dataset-openorca", "_tiny", True): "2d3dc576f6e66312",
    ("get-dataset-qwen3-vl", "", False): "bb621cf64fe9ed1c",
    ("get-dataset-qwen3-vl", "_tiny", False): "7581bf1b3949ee9c",
    ("get-dataset-qwen3-vl", "_tiny", True): "4fab5a532973702a",
    ("get-dataset-whisper", "", False): "a9310641e2efdd6c",
    ("get-dataset-whisper", "_tiny", False): "119e9c6444428e10",
    ("get-dataset-whisper", "_tiny", True): "12537616bc201508",
    ("get-ml-model-deepseek-r1", "", False): "4a6772906cdd578a",
    ("get-ml-model-deepseek-r1", "_tiny", False): "cc5a6ddf7b3984f7",
    ("get-ml-model-deepseek-r1", "_tiny", True): "6a87ca50ad3429bc",
    ("get-ml-model-gpt-oss-120b", "", False): "37db20faa21d1660",
    ("get-ml-model-gpt-oss-120b", "_tiny", False): "1966e704c054d26e",
    ("get-ml-model-gpt-oss-120b", "_tiny", True): "a27841df8a68d234",
    ("get-ml-model-llama2", "", False): "5560e371793905e7",
    ("get-ml-model-llama2", "_fp16", False): "cb3da2981623cb21",
    ("get-ml-model-llama2", "_fp8", False): "c3c05a905af96dfd",
    ("get-ml-model-llama2", "_tiny", False): "78e065730c86450b",
    ("get-ml-model-llama2", "_tiny", True): "5bddcdb453e5997a",
    ("get-ml-model-llama3", "", False): "53f68e426f7987fa",
    ("get-ml-model-llama3", "_fp16", False): "560ff56a4c8b883e",
    ("get-ml-model-llama3", "_tiny", False): "91f7b3d029e9e758",
    ("get-ml-model-llama3", "_tiny", True): "f04dd14f82b99c2e",
    ("get-ml-model-llama3-405b", "", False): "8bbb92cb5e53b1d4",
    ("get-ml-model-llama3-405b", "_fp16", False): "b5c5b88811869378",
    ("get-ml-model-llama3-405b", "_tiny", False): "bc17d3433b377522",
    ("get-ml-model-llama3-405b", "_tiny", True): "7fda48e2112e3e2c",
    ("get-ml-model-mixtral-8x7b", "", False): "45a00c2de0b78958",
    ("get-ml-model-mixtral-8x7b", "_fp16", False): "c1ff322184b038d3",
    ("get-ml-model-mixtral-8x7b", "_tiny", False): "7e8d133a138317fb",
    ("get-ml-model-mixtral-8x7b", "_tiny", True): "d38c6ef307d7c83e",
    ("get-ml-model-qwen3-vl", "", False): "c03f0daec2e520f0",
    ("get-ml-model-qwen3-vl", "_tiny", False): "96c630715d011de1",
    ("get-ml-model-qwen3-vl", "_tiny", True): "3fbb93e1e0af38f9",
    ("get-ml-model-whisper", "", False): "0b84b6b930ff289b",
    ("get-ml-model-whisper", "_fp16", False): "d6dce515e7580d59",
    ("get-ml-model-whisper", "_tiny", False): "eb8c03f96ed92a52",
    ("get-ml-model-whisper", "_tiny", True): "80f7a4b45513224a",
}


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A cmx home with this checkout's recipes/ as its one source, its index built once for the module."""
    root = tmp_path_factory.mktemp("home")
    registry = root / "registry.yaml"
    registry.write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n", encoding="utf-8")
    return Settings(registry=registry, cache=root / "cache", runs=root / "runs")


def merged(folder: Path) -> Recipe:
    return load_recipe(folder)[0]


def test_the_sixteen_recipes_pinned_here_are_still_there() -> None:
    # a benchmark added later has no key from before the bases to keep: it is not pinned here
    assert [len(folders) >= 8 for folders in BASES.values()] == [True, True]
    assert {name for name, _, _ in KEYS} <= {folder.name for _, folder in CHILDREN}
    assert len({name for name, _, _ in KEYS}) == 16


@pytest.mark.parametrize(("base", "folder"), CHILDREN, ids=[f.name for _, f in CHILDREN])
def test_each_extends_its_base_and_runs_the_bases_run_py_for_its_benchmark(base: str, folder: Path) -> None:
    recipe = merged(folder)
    assert recipe.extends == base and not recipe.abstract and recipe.tags
    assert not (folder / "run.py").exists() and recipe.run_path == REPO / "recipes" / base / "run.py"
    bench = benchmark_for(recipe.params["benchmark"])
    if base == "get-ml-model":  # Kubernetes finds a benchmark's model recipe by its family among the tags
        assert bench.family in recipe.tags
    else:  # the tiny set is tokenized by the tiny model of the same benchmark
        [dep] = recipe.variation("tiny").deps  # type: ignore[union-attr]  # every dataset has _tiny
        model = next(merged(f) for f in BASES["get-ml-model"] if merged(f).matches(dep.query))
        assert dep.as_ == "model" and model.params == recipe.params


def test_the_outputs_every_model_reports_are_declared_once_in_the_base() -> None:
    common = ModelFolder(Path("m"), "m", "", "bfloat16", "bf16", 2, is_tiny=False).outputs()
    assert list(merged(REPO / "recipes" / "get-ml-model").outputs) == list(common)
    for folder in BASES["get-ml-model"]:
        assert set(merged(folder).outputs) - set(common) <= {"eos_token_ids", "architecture"}, folder.name


@pytest.mark.parametrize(("name", "variation", "sized"), list(KEYS), ids=[f"{n}{v}{'-sized' if s else ''}"
                                                                           for n, v, s in KEYS])
def test_the_cache_key_is_the_one_it_had_before_the_bases(settings: Settings, name: str, variation: str,
                                                          sized: bool) -> None:
    recipe = merged(REPO / "recipes" / name)
    inputs = {k: 7 for k, spec in recipe.inputs.items() if spec.type == "int" and spec.default is None} if sized else {}
    plan = api.plan(f"{name} {variation}".strip(), inputs=inputs, settings=settings, environ={}).plan
    assert plan.root_step.key[:16] == KEYS[(name, variation, sized)]
