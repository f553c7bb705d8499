"""`extends:` (cmx/recipe/load.py, schema.py): a recipe merged onto the base beside it, by the rules of
docs/recipes.md; the index, keys, stamps and the runner see the base's files; every error names file:line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cmx import api
from cmx.errors import RecipeError
from cmx.recipe.load import load_recipe
from cmx.recipe.model import Recipe
from cmx.recipe.query import Query
from cmx.registry.index import open_index
from tests.conftest import Home

BASE = """
    name: app-base
    summary: what the apps share
    abstract: true
    inputs:
      round: {type: choice, choices: [v5.1, v6.0], default: v6.0, help: the round}
      engine_seqs: {type: int, default: null, help: the engine's sequences}
      model_path: {type: path, default: null}
    context: [device]
    variations:
      device:
        cuda: {default: true, context: {device: cuda}}
        cpu: {context: {device: cpu}}
      scenario:
        offline: {default: true, summary: Offline only}
        server: {summary: Server only}
        interactive: {summary: Interactive only}
      size:
        full: {default: true, summary: the real model}
        tiny: {summary: a tiny model, inputs: {engine_seqs: 4}}
    flags:
      short: {summary: a smoke run}
    deps:
      - tags: detect system
        as: system
      - tags: get engine
        as: engine
    cache: false
    outputs:
      benchmark: {type: str, help: the benchmark}
    docker:
      apt: [git]
    """
BASE_RUN = """
def run(ctx):
    return {"benchmark": f"{ctx.params['benchmark']} {ctx.variation('scenario')} {ctx.inputs['engine_seqs']}"}
"""
ALPHA = """
    name: app-alpha
    summary: the alpha benchmark
    tags: [app, alpha]
    extends: app-base
    params: {benchmark: alpha-1}
    inputs:
      round: {choices: [v6.0]}
      engine_seqs: {help: "alpha's engine: 8 sequences at most"}
    variations:
      target:
        "99": {default: true}
        "99.9": {}
      scenario:
        interactive: {remove: true}
        server: {summary: "Server, alpha's way"}
      size:
        full:
          deps:
            - tags: get model alpha
              as: model
        tiny:
          deps:
            - tags: get model alpha _tiny
              as: model
    outputs:
      benchmark: {help: alpha-1-99 or alpha-1-99.9}
    """


def write(root: Path, name: str, yaml_text: str, run_py: str | None = None) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "recipe.yaml").write_text(textwrap.dedent(yaml_text).lstrip(), encoding="utf-8")
    if run_py is not None:
        (folder / "run.py").write_text(textwrap.dedent(run_py).lstrip(), encoding="utf-8")
    return folder


def load(folder: Path) -> Recipe:
    return load_recipe(folder)[0]


def line_of(folder: Path, needle: str) -> int:
    for number, line in enumerate((folder / "recipe.yaml").read_text().splitlines(), 1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {folder}/recipe.yaml")


def error_at(folder: Path, at: Path, needle: str, *says: str) -> RecipeError:
    """Loading `folder` fails with an error at the line of `needle` in `at`/recipe.yaml."""
    with pytest.raises(RecipeError) as info:
        load(folder)
    err = info.value
    assert err.where == f"{at / 'recipe.yaml'}:{line_of(at, needle)}", err.render()
    for part in says:
        assert part in err.render(), f"{part!r} not in {err.render()!r}"
    return err


@pytest.fixture
def apps(tmp_path: Path) -> Path:
    write(tmp_path, "app-base", BASE, BASE_RUN)
    write(tmp_path, "app-alpha", ALPHA)
    return tmp_path


def test_a_child_holds_the_base_merged_with_its_own_keys(apps: Path) -> None:
    base, alpha = load(apps / "app-base"), load(apps / "app-alpha")
    assert base.abstract and base.tags == () and not alpha.abstract
    assert (alpha.extends, alpha.bases, alpha.tags, alpha.summary) == ("app-base", (apps / "app-base",),
                                                                      ("app", "alpha"), "the alpha benchmark")
    assert alpha.params == {"benchmark": "alpha-1"} and alpha.context == ("device",)
    # inputs by name, key by key: a choice narrowed, a help changed, the rest the base's
    assert list(alpha.inputs) == ["round", "engine_seqs", "model_path"]
    assert (alpha.inputs["round"].choices, alpha.inputs["round"].default, alpha.inputs["round"].help) == \
        (("v6.0",), "v6.0", "the round")
    assert (alpha.inputs["engine_seqs"].type, alpha.inputs["engine_seqs"].help) == \
        ("int", "alpha's engine: 8 sequences at most")
    # groups by name, then choices by name: what the child adds comes first, a removed choice is gone
    assert {g: [v.name for v in opts] for g, opts in alpha.groups.items()} == {
        "target": ["99", "99.9"], "device": ["cuda", "cpu"], "scenario": ["offline", "server"],
        "size": ["full", "tiny"]}
    assert list(alpha.groups) == ["target", "device", "scenario", "size"]
    server = alpha.variation("server")
    assert server is not None and server.summary == "Server, alpha's way"
    tiny, full = alpha.variation("tiny"), alpha.variation("full")
    assert tiny is not None and full is not None
    assert tiny.inputs == (("engine_seqs", 4),) and tiny.summary == "a tiny model"  # keys it did not give: kept
    assert full.default and [str(d.query) for d in full.deps] == ["get model alpha"]
    assert list(alpha.flags) == ["short"]
    assert [(d.as_, d.origin) for d in alpha.deps] == [("system", apps / "app-base"), ("engine", apps / "app-base")]
    assert alpha.where(alpha.deps[0].line, alpha.deps[0].origin).startswith(str(apps / "app-base" / "recipe.yaml"))
    assert (alpha.outputs["benchmark"].type, alpha.outputs["benchmark"].help) == ("str", "alpha-1-99 or alpha-1-99.9")
    assert alpha.docker.apt == ("git",) and alpha.cache == base.cache
    assert alpha.has_run and alpha.run_path == apps / "app-base" / "run.py"


def test_a_child_default_replaces_the_base_default_and_deps_replace_by_as_name(apps: Path) -> None:
    folder = write(apps, "app-beta", """
        name: app-beta
        tags: [beta]
        extends: app-base
        variations:
          scenario:
            server: {default: true}
        deps:
          - tags: get other-engine
            as: engine
          - tags: get tokenizer
        docker:
          apt: [git, curl]
        """)
    beta = load(folder)
    assert [v.name for v in beta.groups["scenario"] if v.default] == ["server"]
    assert [(str(d.query), d.as_, d.origin) for d in beta.deps] == [
        ("detect system", "system", apps / "app-base"), ("get other-engine", "engine", None),
        ("get tokenizer", None, None)]
    assert beta.docker.apt == ("git", "curl") and beta.summary == "what the apps share"


def test_a_relative_path_default_of_a_base_stays_relative_to_the_base(apps: Path) -> None:
    write(apps, "app-base", BASE.replace("model_path: {type: path, default: null}",
                                         "model_path: {type: path, default: weights}"), BASE_RUN)
    assert load(apps / "app-alpha").inputs["model_path"].default == str(apps / "app-base" / "weights")


def test_an_extends_chain_merges_in_order_and_stamps_every_file(apps: Path) -> None:
    write(apps, "app-alpha-long", """
        name: app-alpha-long
        tags: [alpha, long]
        extends: app-alpha
        inputs:
          engine_seqs: {default: 2}
        """)
    recipe, stamps = load_recipe(apps / "app-alpha-long")
    assert recipe.bases == (apps / "app-alpha", apps / "app-base")
    assert recipe.inputs["engine_seqs"].default == 2 and recipe.params == {"benchmark": "alpha-1"}
    assert [s[0] for s in stamps] == ["recipe.yaml", "run.py", "../app-alpha/recipe.yaml", "../app-alpha/run.py",
                                      "../app-base/recipe.yaml", "../app-base/run.py"]


@pytest.mark.parametrize("edit", ["recipe.yaml", "run.py"])
def test_editing_the_base_changes_the_childs_digest(apps: Path, edit: str) -> None:
    before = load(apps / "app-alpha").digest
    path = apps / "app-base" / edit
    path.write_text(path.read_text() + "\n# edited\n")
    assert load(apps / "app-alpha").digest != before


def test_the_index_never_selects_an_abstract_recipe_but_shows_it_by_name(home: Home) -> None:
    write(home.recipes, "app-base", BASE, BASE_RUN)
    write(home.recipes, "app-alpha", ALPHA)
    index = open_index(home.settings)
    assert index.find(Query(("app-base",))) == [] and "app-base" not in index.all_tags()
    assert [i.name for i in index.find(Query(("app",)))] == ["app-alpha"]
    assert api.show("app-base", settings=home.settings).abstract


def test_an_input_added_to_the_base_is_one_edit_for_every_child(home: Home) -> None:
    write(home.recipes, "app-base", BASE, BASE_RUN)
    write(home.recipes, "app-alpha", ALPHA)
    write(home.recipes, "app-gamma", """
        name: app-gamma
        tags: [app, gamma]
        extends: app-base
        params: {benchmark: gamma}
        """)
    write(home.recipes, "detect-system", "name: detect-system\ntags: [detect, system]\n")
    write(home.recipes, "get-engine", "name: get-engine\ntags: [get, engine]\n")
    assert all("kv_cache_dtype" not in open_index(home.settings).get(n).inputs for n in ("app-alpha", "app-gamma"))
    base = home.recipes / "app-base" / "recipe.yaml"
    base.write_text(base.read_text().replace(
        "inputs:\n", "inputs:\n  kv_cache_dtype: {type: str, default: auto, help: the KV cache's dtype}\n", 1))
    index = open_index(home.settings)  # the children are re-parsed: their stamps hold the base's files
    for name in ("app-alpha", "app-gamma"):
        spec = index.get(name).inputs["kv_cache_dtype"]
        assert (spec.type, spec.default, spec.help) == ("str", "auto", "the KV cache's dtype")
    plan = api.plan("app gamma _cpu", inputs={"kv_cache_dtype": "fp8"}, settings=home.settings, environ={})
    assert plan.plan.root_step.inputs["kv_cache_dtype"] == "fp8"


def test_the_child_runs_the_bases_run_py_with_its_params(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    write(home.recipes, "app-base", BASE.replace("    deps:\n      - tags: detect system\n        as: system\n"
                                                 "      - tags: get engine\n        as: engine\n", ""), BASE_RUN)
    write(home.recipes, "app-alpha", ALPHA.replace("        full:\n          deps:\n"
                                                   "            - tags: get model alpha\n"
                                                   "              as: model\n", "        full: {}\n")
          .replace("        tiny:\n          deps:\n            - tags: get model alpha _tiny\n"
                   "              as: model\n", ""))
    monkeypatch.chdir(home.root)
    result = api.run("app alpha _server", settings=home.settings, environ={})
    assert result.outputs["benchmark"] == "alpha-1 server None"


@pytest.mark.parametrize("child, where, needle, says", [
    ("name: app-x\ntags: [x]\nextends: app-nothing\n", "child", "extends:",
     ["extends 'app-nothing', but there is no recipe 'app-nothing' beside this one"]),
    ("name: app-x\ntags: [x]\nextends: app-x\n", "child", "extends:", ["`extends` makes a cycle: app-x → app-x"]),
    ("name: app-x\ntags: [x]\nextends: app-base\ninputs:\n  engine_seqs: {type: str}\n", "child", "engine_seqs",
     ["input 'engine_seqs' is int in the base", "str here"]),
    ("name: app-x\ntags: [x]\nextends: app-base\noutputs:\n  benchmark: {type: int}\n", "child", "benchmark",
     ["output 'benchmark' is str in the base, int here"]),
    ("name: app-x\ntags: [x]\nextends: app-base\nvariations:\n  scenario:\n    batch: {remove: true}\n", "child",
     "batch", ["variation 'batch' is not one of the base's group 'scenario': there is nothing to remove"]),
    ("name: app-x\ntags: [x]\nextends: app-base\nvariations:\n  size:\n    short: {}\n", "child", "short: {}",
     ["variation 'short' is in the base's flags, not its group 'size'"]),
    ("name: app-x\ntags: [x]\nextends: app-base\nvariations:\n  size:\n    full: {remove: true}\n"
     "    tiny: {remove: true}\n",
     "child", "size:", ["variation group 'size' is left with no choice"]),
    ("name: app-x\ntags: [x]\nextends: app-base\nvariations:\n  scenario:\n    server: {remove: yes please}\n",
     "child", "remove", ["`remove` must be `true` and alone"]),
    ("name: app-x\ntags: [x]\nvariations:\n  scenario:\n    server: {remove: true}\n", "child", "remove",
     ["removes a base's variation, but this recipe extends nothing"]),
    ("name: app-x\ntags: [x]\nextends: app-base\ninputs:\n  round: {choices: [v5.1]}\n", "child", "round",
     ["default of 'round'"]),
    ("name: app-x\ntags: [x]\nabstract: true\n", "child", "tags:", ["an abstract recipe carries no tags"]),
    ("name: app-x\nextends: app-base\n", "child", "name:", ["missing required key 'tags'"]),
    ("name: app-x\ntags: [x]\nextends: [app-base]\n", "child", "extends:", ["extends must be a string"]),
])
def test_a_refused_extension_names_the_file_and_line_at_fault(apps: Path, child: str, where: str, needle: str,
                                                              says: list[str]) -> None:
    folder = write(apps, "app-x", child)
    error_at(folder, folder, needle, *says)


def test_a_narrowed_choice_that_a_base_variation_still_sets_is_refused(apps: Path) -> None:
    write(apps, "app-base", BASE.replace("tiny: {summary: a tiny model, inputs: {engine_seqs: 4}}",
                                         "tiny: {summary: a tiny model, inputs: {round: v5.1}}"), BASE_RUN)
    folder = write(apps, "app-x", "name: app-x\ntags: [x]\nextends: app-base\ninputs:\n  round: {choices: [v6.0]}\n")
    error_at(folder, folder, "round", "input 'round' allows v6.0 here, but variation 'tiny' sets it to 'v5.1'")


def test_a_cycle_through_two_recipes_is_named_at_the_line_that_closes_it(apps: Path) -> None:
    write(apps, "app-y", "name: app-y\nabstract: true\nextends: app-z\n")
    z = write(apps, "app-z", "name: app-z\nabstract: true\nextends: app-y\n")
    error_at(apps / "app-y", z, "extends:", "`extends` makes a cycle: app-y → app-z → app-y")


def test_a_base_whose_own_base_is_missing_is_named_in_the_bases_file(apps: Path) -> None:
    middle = write(apps, "app-middle", "name: app-middle\nabstract: true\nextends: app-gone\n")
    child = write(apps, "app-x", "name: app-x\ntags: [x]\nextends: app-middle\n")
    error_at(child, middle, "extends:", "extends 'app-gone', but there is no recipe 'app-gone'")


def test_a_dep_name_clash_with_the_base_is_named_at_the_childs_dep(apps: Path) -> None:
    folder = write(apps, "app-x", """
        name: app-x
        tags: [x]
        extends: app-base
        flags:
          short:
            deps:
              - tags: detect other-system
                as: system
        """)
    error_at(folder, folder, "- tags: detect other-system", "dep name 'system' is also used by the recipe",
             str(apps / "app-base" / "recipe.yaml"))
