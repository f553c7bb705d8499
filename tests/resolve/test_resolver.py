"""Resolution (cmx/resolve/resolver.py): query -> Plan, over an in-memory recipe provider.

Recipes are real: written to tmp and loaded with cmx.recipe.load.load_recipe (so each has a
real digest); only the registry index is replaced by a dict.
"""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

from cmx.errors import InputError, PlanError, QueryError, RecipeError
from cmx.recipe.load import load_recipe
from cmx.recipe.model import Recipe
from cmx.recipe.query import Query
from cmx.resolve.plan import Plan, Step
from cmx.resolve.resolver import resolve
from cmx.secrets import Secret


class MemoryProvider:
    """resolve's RecipeProvider over a dict of Recipe objects."""

    def __init__(self, recipes: list[Recipe]) -> None:
        self.recipes = {r.name: r for r in recipes}

    def find(self, query: Query) -> list[Recipe]:
        return sorted((r for r in self.recipes.values() if r.matches(query)), key=lambda r: r.name)

    def get(self, name: str) -> Recipe:
        return self.recipes[name]

    def all_tags(self) -> set[str]:
        return {t for r in self.recipes.values() for t in r.all_tags}


class Lab:
    """Recipes written to a tmp folder, (re)loaded on demand into a MemoryProvider."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.names: list[str] = []

    def add(self, yaml_text: str, run_py: str | None = None, **files: str) -> Path:
        text = textwrap.dedent(yaml_text).lstrip()
        name = re.search(r"^name:\s*(\S+)", text, re.M).group(1)  # type: ignore[union-attr]  # each has a name
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "recipe.yaml").write_text(text)
        if run_py is not None:
            (folder / "run.py").write_text(run_py)
        for rel, content in files.items():
            (folder / rel).write_text(content)
        if name not in self.names:
            self.names.append(name)
        return folder

    def provider(self) -> MemoryProvider:
        return MemoryProvider([load_recipe(self.root / n)[0] for n in self.names])

    def plan(self, query: str, **kw) -> Plan:
        kw.setdefault("environ", {})
        return resolve(self.provider(), query, **kw)

    def step(self, query: str, name: str | None = None, **kw) -> Step:
        plan = self.plan(query, **kw)
        if name is None:
            return plan.root_step
        found = [s for s in plan if s.name == name]
        assert len(found) == 1, f"{len(found)} steps of {name}: {[s.id for s in plan]}"
        return found[0]

    def key(self, query: str, name: str | None = None, **kw) -> str:
        return self.step(query, name, **kw).key


@pytest.fixture
def lab(tmp_path: Path) -> Lab:
    return Lab(tmp_path / "recipes")


# --- query grammar -----------------------------------------------------------------------------

def add_pythons(lab: Lab) -> None:
    lab.add("""
        name: get-python
        tags: [get, python, tool]
        variations:
          version:
            v3: {default: true}
            v2: {}
        """)
    lab.add("""
        name: get-python-package
        tags: [get, python-package]
        """)
    lab.add("""
        name: get-python-venv
        tags: [get, python, venv]
        """)


@pytest.mark.parametrize("query, name, variations", [
    pytest.param("get python-package", "get-python-package", (), id="every-query-tag-carried"),
    pytest.param("python venv", "get-python-venv", (), id="a-subset-of-the-recipes-tags"),
    pytest.param("get-python", "get-python", ("v3",), id="a-recipe-by-its-name"),
    pytest.param("get python -venv", "get-python", ("v3",), id="minus-tag-excludes-and-group-default-applies"),
    pytest.param("get python -venv _v2", "get-python", ("v2",), id="underscore-word-selects-a-variation"),
    pytest.param("get,python,-venv,_v2", "get-python", ("v2",), id="commas-separate-words-like-cm"),
])
def test_a_query_picks_one_recipe_and_its_variations(lab: Lab, query: str, name: str,
                                                     variations: tuple[str, ...]) -> None:
    add_pythons(lab)
    step = lab.plan(query).root_step
    assert (step.name, step.variations) == (name, variations)


@pytest.mark.parametrize("query, says, hint", [
    pytest.param("get pyton", ["no recipe matches 'get pyton'"], ["'pyton': did you mean python?"],
                 id="zero-matches-suggest-the-closest-tag-not-python-venv-far-behind"),
    pytest.param("venv python-package", [], ["no recipe carries them all", "get-python-package", "get-python-venv"],
                 id="zero-matches-of-known-tags-name-the-closest-recipes"),
    pytest.param("get python", ["matches 2 recipes", "get-python (tags: tool)", "get-python-venv (tags: venv)"],
                 ["-tag"], id="several-matches-list-each-with-its-extra-tags"),
    pytest.param("get python -venv _v4", ["has no variation '_v4'"], ["version: _v3 _v2"],
                 id="unknown-variation-lists-the-groups"),
    pytest.param("get python -venv _v3 _v2", ["_v3 and _v2 both belong to group 'version'"], [],
                 id="two-variations-of-one-group"),
])
def test_a_query_that_picks_no_single_recipe_says_why(lab: Lab, query: str, says: list[str], hint: list[str]) -> None:
    add_pythons(lab)
    with pytest.raises(QueryError) as info:
        lab.plan(query)
    for part in says:
        assert part in info.value.message
    for part in hint:
        assert part in (info.value.hint or "")


@pytest.mark.parametrize("query", ["Get Python", "_v2", "get python!"],
                         ids=["capital-letters", "only-a-variation", "punctuation"])
def test_malformed_query_is_a_query_error(lab: Lab, query: str) -> None:
    add_pythons(lab)
    with pytest.raises(QueryError) as info:
        lab.plan(query)
    assert info.value.hint


def test_group_without_default_and_without_choice_picks_nothing(lab: Lab) -> None:
    lab.add("""
        name: nodefault
        tags: [nd]
        variations:
          size: {small: {}, big: {}}
        """)
    assert lab.plan("nd").root_step.variations == ()


def test_flags_are_off_unless_chosen(lab: Lab) -> None:
    lab.add("""
        name: flagged
        tags: [fl]
        flags:
          debug: {}
        """)
    assert lab.plan("fl").root_step.variations == ()
    assert lab.plan("fl _debug").root_step.variations == ("debug",)


# --- context and variations --------------------------------------------------------------------

def add_device_recipes(lab: Lab, dep_tags: str = "get driver") -> None:
    lab.add(f"""
        name: app
        tags: [app]
        variations:
          device:
            cpu: {{default: true, context: {{device: cpu}}}}
            rocm: {{context: {{device: rocm}}}}
            cuda: {{context: {{device: cuda}}}}
        deps:
          - tags: {dep_tags}
        """)
    lab.add("""
        name: get-driver
        tags: [get, driver]
        context: [device]
        variations:
          device:
            cpu: {default: true, context: {device: cpu}}
            rocm: {context: {device: rocm}}
            cuda: {context: {device: cuda}}
        """)


def test_dep_variation_is_chosen_by_the_inherited_context(lab: Lab) -> None:
    add_device_recipes(lab)
    assert lab.step("app _rocm", "get-driver").variations == ("rocm",)
    assert lab.step("app _cuda", "get-driver").variations == ("cuda",)
    assert lab.step("app", "get-driver").variations == ("cpu",)
    assert lab.step("app _rocm", "get-driver").context == {"device": "rocm"}


def test_context_given_by_the_caller_picks_variations_too(lab: Lab) -> None:
    add_device_recipes(lab)
    # --context device=rocm with no variation: app's group has a matching option
    assert lab.step("app", "get-driver", context={"device": "rocm"}).variations == ("rocm",)
    assert lab.step("app", context={"device": "rocm"}).variations == ("rocm",)


def test_variation_chosen_explicitly_against_the_context_is_a_conflict(lab: Lab) -> None:
    add_device_recipes(lab, dep_tags="get driver _cuda")
    with pytest.raises(PlanError) as info:
        lab.plan("app _rocm")
    err = info.value
    assert "variation _cuda of 'get-driver' sets context device='cuda', but the run has device='rocm'" in err.message
    assert err.where and err.where.endswith("app/recipe.yaml:9")  # the dep's line in app's recipe
    assert "drop _cuda" in err.hint


def test_root_variation_against_user_context_is_a_conflict(lab: Lab) -> None:
    add_device_recipes(lab)
    with pytest.raises(PlanError, match="sets context device='cuda', but the run has device='rocm'"):
        lab.plan("app _cuda", context={"device": "rocm"})


def test_default_variation_contradicting_the_context_is_an_error(lab: Lab) -> None:
    lab.add("""
        name: cpu-only
        tags: [cpu-only]
        variations:
          device:
            cpu: {default: true, context: {device: cpu}}
        """)
    with pytest.raises(PlanError, match="no variation of group 'device' in 'cpu-only' matches context device='rocm'"):
        lab.plan("cpu-only", context={"device": "rocm"})


# --- inputs ------------------------------------------------------------------------------------

def add_precedence(lab: Lab, with_x: bool = True, variation_x: bool = True) -> None:
    lab.add(f"""
        name: parent
        tags: [parent]
        deps:
          - tags: child
            {"with: {x: 20}" if with_x else ""}
        """)
    lab.add(f"""
        name: child
        tags: [child]
        inputs:
          x: {{type: int, default: 1, env: CHILD_X}}
        variations:
          size:
            big: {{default: true{", inputs: {x: 30}" if variation_x else ""}}}
        """)


@pytest.mark.parametrize("with_x, variation_x, inputs, environ, value, origin", [
    pytest.param(True, False, {"child.x": "10"}, {"CHILD_X": "40"}, 10, "user", id="command-line-beats-with"),
    pytest.param(True, True, {}, {"CHILD_X": "40"}, 20, "with", id="with-beats-variation"),
    pytest.param(False, True, {}, {"CHILD_X": "40"}, 30, "variation", id="variation-beats-env"),
    pytest.param(False, False, {}, {"CHILD_X": "40"}, 40, "env", id="env-beats-default"),
    pytest.param(False, False, {}, {}, 1, "default", id="default-applies-last"),
])
def test_input_precedence(lab: Lab, with_x: bool, variation_x: bool, inputs: dict[str, str],
                          environ: dict[str, str], value: int, origin: str) -> None:
    add_precedence(lab, with_x=with_x, variation_x=variation_x)
    step = lab.step("parent", "child", inputs=inputs, environ=environ)
    assert (step.inputs["x"], step.origins["x"]) == (value, origin)


def test_environment_is_read_from_os_environ_by_default(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    add_precedence(lab, with_x=False, variation_x=False)
    monkeypatch.setenv("CHILD_X", "41")
    step = next(s for s in resolve(lab.provider(), "parent") if s.name == "child")
    assert (step.inputs["x"], step.origins["x"]) == (41, "env")


def add_sized(lab: Lab) -> None:
    lab.add("""
        name: dataset
        tags: [dataset]
        inputs:
          samples: {type: int, default: 100}
          url: {type: url, default: "https://example.org/data"}
          name: {type: str}
        variations:
          size:
            full: {default: true}
            tiny: {inputs: {samples: 16}}
        """)


@pytest.mark.parametrize("query, inputs, says, hint", [
    pytest.param("dataset", {"sample": "8", "name": "x"}, "recipe 'dataset' has no input 'sample'",
                 ["did you mean 'samples'?", "valid inputs: samples (int), url (url), name (str)"],
                 id="unknown-input-lists-the-valid-ones"),
    pytest.param("dataset", {"samples": "lots", "name": "x"},
                 "input 'samples' of 'dataset' (from command line): expected an integer, got 'lots'", [],
                 id="int-of-the-wrong-type"),
    pytest.param("dataset", {"url": "example.org", "name": "x"}, "expected a URL", [], id="url-of-the-wrong-type"),
    pytest.param("dataset", {}, "input 'name' of 'dataset' is required and has no value", ["--input name=..."],
                 id="required-input-missing-says-how-to-give-it"),
    pytest.param("dataset", {"HF_TOKEN": "hf_x", "name": "x"}, "recipe 'dataset' has no input 'HF_TOKEN'",
                 ["looks like an environment variable", "export HF_TOKEN=...", "`token` reads HF_TOKEN"],
                 id="an-environment-variable-given-as-an-input-says-how-to-give-it"),
])
def test_a_bad_user_input_is_an_input_error_that_says_why(lab: Lab, query: str, inputs: dict[str, str], says: str,
                                                          hint: list[str]) -> None:
    add_sized(lab)
    with pytest.raises(InputError) as info:
        lab.plan(query, inputs=inputs)
    assert says in info.value.message
    for part in hint:
        assert part in (info.value.hint or "")


def test_user_value_equal_to_the_variation_is_accepted(lab: Lab) -> None:
    add_sized(lab)
    step = lab.step("dataset _tiny", inputs={"samples": "16", "name": "x"})
    assert (step.inputs["samples"], step.origins["samples"]) == (16, "user")


def test_required_input_of_a_dep_hints_the_qualified_form_and_env(lab: Lab) -> None:
    lab.add("name: top\ntags: [top]\ndeps:\n  - tags: needy\n")
    lab.add("name: needy\ntags: [needy]\ninputs:\n  token: {type: secret, env: NEEDY_TOKEN, help: the API token}\n")
    with pytest.raises(InputError) as info:
        lab.plan("top")
    assert "--input needy.token=..." in info.value.hint and "$NEEDY_TOKEN" in info.value.hint
    assert "the API token" in info.value.hint
    assert info.value.where and info.value.where.endswith("top/recipe.yaml:4")


def test_qualified_input_reaches_a_dep(lab: Lab) -> None:
    add_precedence(lab, with_x=False, variation_x=False)
    assert lab.step("parent", "child", inputs={"child.x": "7"}).inputs["x"] == 7


def test_qualified_input_for_a_recipe_not_in_the_plan_is_an_error(lab: Lab) -> None:
    add_precedence(lab)
    lab.add("name: elsewhere\ntags: [elsewhere]\ninputs:\n  x: {type: int, default: 1}\n")
    with pytest.raises(InputError) as info:
        lab.plan("parent", inputs={"elsewhere.x": "7"})
    assert "no step of recipe 'elsewhere' is in this plan" in info.value.message
    assert "child" in info.value.hint and "parent" in info.value.hint


def test_unqualified_input_applies_to_the_root_only(lab: Lab) -> None:
    add_precedence(lab, with_x=False, variation_x=False)
    with pytest.raises(InputError, match="recipe 'parent' has no input 'x'"):
        lab.plan("parent", inputs={"x": "7"})


def test_with_passing_an_undeclared_input_names_the_dep_line(lab: Lab) -> None:
    lab.add("name: giver\ntags: [giver]\ndeps:\n  - tags: taker\n    with: {nope: 1}\n")
    lab.add("name: taker\ntags: [taker]\ninputs:\n  x: {type: int, default: 1}\n")
    with pytest.raises(PlanError) as info:
        lab.plan("giver")
    assert "`with` passes input 'nope', which 'taker' does not declare" in info.value.message
    assert info.value.where.endswith("giver/recipe.yaml:4")


def test_with_value_of_wrong_type_is_an_input_error(lab: Lab) -> None:
    lab.add("name: giver\ntags: [giver]\ndeps:\n  - tags: taker\n    with: {x: many}\n")
    lab.add("name: taker\ntags: [taker]\ninputs:\n  x: {type: int, default: 1}\n")
    with pytest.raises(InputError, match=r"\(from `with` at .*giver/recipe.yaml:4\): expected an integer"):
        lab.plan("giver")


# --- `with` templates --------------------------------------------------------------------------

def add_templates(lab: Lab, with_block: str, child_inputs: str) -> None:
    lab.add(f"""
        name: tparent
        tags: [tparent]
        inputs:
          n: {{type: int, default: 5}}
          token: {{type: secret, env: TP_TOKEN}}
        context: [device]
        deps:
          - tags: tchild
            with: {with_block}
        """)
    lab.add(f"""
        name: tchild
        tags: [tchild]
        inputs: {child_inputs}
        """)


@pytest.mark.parametrize("with_block, child_inputs, kw, name, value", [
    pytest.param('{count: "{{ inputs.n }}"}', "{count: {type: int}}", {}, "count", 5,
                 id="reference-passes-the-typed-value-through"),
    pytest.param('{dev: "{{ context.device }}"}', "{dev: {type: str}}", {"context": {"device": "rocm"}}, "dev", "rocm",
                 id="reference-to-the-context"),
    pytest.param('{label: "v{{ inputs.n }}-{{ context.device }}"}', "{label: {type: str}}",
                 {"context": {"device": "cpu"}, "inputs": {"n": "7"}}, "label", "v7-cpu",
                 id="general-template-rendered-to-text"),
    pytest.param('{count: "{{ inputs.n * 10 }}"}', "{count: {type: int}}", {}, "count", 50,
                 id="general-template-coerced-to-the-dep-input-type"),
])
def test_a_with_template_gives_the_dep_its_value(lab: Lab, with_block: str, child_inputs: str, kw: dict,
                                                 name: str, value: object) -> None:
    add_templates(lab, with_block, child_inputs)
    step = lab.step("tparent", "tchild", environ={"TP_TOKEN": "s3cret"}, **kw)
    assert (step.inputs[name], step.origins[name]) == (value, "with")


def test_with_reference_keeps_a_secret_a_secret(lab: Lab) -> None:
    add_templates(lab, '{key: "{{ inputs.token }}"}', "{key: {type: secret}}")
    step = lab.step("tparent", "tchild", environ={"TP_TOKEN": "s3cret"})
    assert isinstance(step.inputs["key"], Secret) and step.inputs["key"].reveal() == "s3cret"
    assert "s3cret" not in repr(step.public_inputs())


def test_with_template_reading_an_unset_value_is_a_plan_error(lab: Lab) -> None:
    add_templates(lab, '{label: "v{{ inputs.nope }}"}', "{label: {type: str}}")
    with pytest.raises(PlanError, match=r"template 'v\{\{ inputs.nope \}\}' failed"):
        lab.plan("tparent", environ={"TP_TOKEN": "t"})


def test_with_template_cannot_reach_python_internals(lab: Lab, tmp_path: Path) -> None:
    """Resolution runs nothing: a template is sandboxed, so it cannot call into os through globals."""
    marker = tmp_path / "pwned"
    add_templates(lab, '{label: "{{ cycler.__init__.__globals__.os.system(\'touch ' + str(marker) + '\') }}"}',
                  "{label: {type: str}}")
    with pytest.raises(PlanError, match="unsafe"):
        lab.plan("tparent", environ={"TP_TOKEN": "t"})
    assert not marker.exists()


def test_secret_in_a_general_template_is_refused_with_how_to_pass_it(lab: Lab) -> None:
    add_templates(lab, '{header: "Bearer {{ inputs.token }}"}', "{header: {type: str}}")
    with pytest.raises(PlanError) as err:
        lab.plan("tparent", environ={"TP_TOKEN": "s3cret"})
    assert "s3cret" not in err.value.render()
    assert "pass it whole" in (err.value.hint or "")


# --- `when` ------------------------------------------------------------------------------------

def add_conditional(lab: Lab) -> None:
    lab.add("""
        name: cond
        tags: [cond]
        inputs:
          full: {type: bool, default: false}
        context: [device]
        variations:
          device:
            cpu: {default: true, context: {device: cpu}}
            rocm: {context: {device: rocm}}
        flags:
          debug: {}
        deps:
          - tags: get rocm
            when: device == "rocm"
          - tags: get full
            when: inputs.full
          - tags: get debugger
            when: '"debug" in variations'
          - tags: get always
        """)
    for name in ("get-rocm", "get-full", "get-debugger", "get-always"):
        lab.add(f"name: {name}\ntags: [get, {name[4:]}]\n")


def names(plan: Plan) -> set[str]:
    return {s.name for s in plan}


def test_when_includes_deps_whose_condition_holds(lab: Lab) -> None:
    add_conditional(lab)
    assert names(lab.plan("cond _rocm")) == {"cond", "get-rocm", "get-always"}
    assert names(lab.plan("cond", inputs={"full": "yes"})) == {"cond", "get-full", "get-always"}
    assert names(lab.plan("cond _debug")) == {"cond", "get-debugger", "get-always"}


def test_when_excludes_deps_whose_condition_fails(lab: Lab) -> None:
    add_conditional(lab)
    assert names(lab.plan("cond")) == {"cond", "get-always"}


def test_when_that_cannot_be_evaluated_is_a_plan_error_at_its_line(lab: Lab) -> None:
    lab.add("""
        name: cmp
        tags: [cmp]
        inputs:
          n: {type: int, default: null}
        deps:
          - tags: cmp
            when: n < 3
        """)
    with pytest.raises(PlanError) as info:
        lab.plan("cmp")
    assert "cannot compare None with 3" in info.value.message
    assert info.value.where.endswith("cmp/recipe.yaml:6")


def test_variation_deps_are_added_when_the_variation_is_chosen(lab: Lab) -> None:
    lab.add("""
        name: vdeps
        tags: [vdeps]
        variations:
          device:
            cpu: {default: true}
            rocm:
              deps:
                - tags: get rocm
        """)
    lab.add("name: get-rocm\ntags: [get, rocm]\n")
    assert names(lab.plan("vdeps")) == {"vdeps"}
    assert names(lab.plan("vdeps _rocm")) == {"vdeps", "get-rocm"}


# --- DAG shape ---------------------------------------------------------------------------------

def test_identical_steps_are_merged_in_a_diamond(lab: Lab) -> None:
    lab.add("name: top\ntags: [top]\ndeps:\n  - tags: left\n  - tags: right\n")
    lab.add("name: left\ntags: [left]\ndeps:\n  - tags: bottom\n")
    lab.add("name: right\ntags: [right]\ndeps:\n  - tags: bottom\n")
    lab.add("name: bottom\ntags: [bottom]\n")
    plan = lab.plan("top")
    assert sorted(s.id for s in plan) == ["bottom", "left", "right", "top"]
    assert plan.steps["left"].deps[0].step == plan.steps["right"].deps[0].step == "bottom"
    order = list(plan.steps)
    assert order.index("bottom") < order.index("left") and order.index("right") < order.index("top")
    assert sorted(plan.parents["bottom"]) == ["left", "right"]


def test_same_recipe_with_different_inputs_gives_two_steps(lab: Lab) -> None:
    lab.add("name: top\ntags: [top]\ndeps:\n  - tags: pkg\n    with: {name: numpy}\n"
            "  - tags: pkg\n    with: {name: pandas}\n")
    lab.add("name: pkg\ntags: [pkg]\ninputs:\n  name: {type: str}\n")
    plan = lab.plan("top")
    pkgs = [s for s in plan if s.name == "pkg"]
    assert sorted(s.inputs["name"] for s in pkgs) == ["numpy", "pandas"]
    assert all(re.fullmatch(r"pkg:[0-9a-f]{8}", s.id) for s in pkgs)


def test_dep_on_a_shared_step_is_shared_across_context_values(lab: Lab) -> None:
    """get-dataset reads no context, so `_rocm` and `_cuda` runs share its step and key."""
    add_device_recipes(lab, dep_tags="get dataset")
    lab.add("name: get-dataset\ntags: [get, dataset]\n")
    rocm, cuda = lab.plan("app _rocm"), lab.plan("app _cuda")
    assert rocm.root_step.key != cuda.root_step.key
    assert rocm.steps["get-dataset"].key == cuda.steps["get-dataset"].key


@pytest.mark.parametrize("recipes, query, message", [
    pytest.param(["name: a\ntags: [a]\ndeps:\n  - tags: b\n", "name: b\ntags: [b]\ndeps:\n  - tags: a\n"], "a",
                 "dependency cycle: a → b → a", id="two-recipes"),
    pytest.param(["name: root\ntags: [root]\ndeps:\n  - tags: a\n", "name: a\ntags: [a]\ndeps:\n  - tags: b\n",
                  "name: b\ntags: [b]\ndeps:\n  - tags: c\n", "name: c\ntags: [c]\ndeps:\n  - tags: a\n"], "root",
                 "dependency cycle: a → b → c → a", id="only-the-cycle-below-the-root"),
    pytest.param(["name: selfish\ntags: [selfish]\ndeps:\n  - tags: selfish\n"], "selfish",
                 "dependency cycle: selfish → selfish", id="a-recipe-on-itself"),
])
def test_a_cycle_is_an_error_that_prints_the_chain(lab: Lab, recipes: list[str], query: str, message: str) -> None:
    for yaml_text in recipes:
        lab.add(yaml_text)
    with pytest.raises(PlanError) as info:
        lab.plan(query)
    assert info.value.message == message
    assert info.value.hint


def test_unbounded_recursion_through_changing_inputs_stops_at_the_depth_limit(lab: Lab) -> None:
    lab.add("""
        name: deeper
        tags: [deeper]
        inputs:
          n: {type: int, default: 0}
        deps:
          - tags: deeper
            with: {n: "{{ inputs.n + 1 }}"}
        """)
    with pytest.raises(PlanError, match="nested more than 64 deep below 'deeper'"):
        lab.plan("deeper")


def test_dep_matching_nothing_names_the_dep_line(lab: Lab) -> None:
    lab.add("name: lonely\ntags: [lonely]\ndeps:\n  - tags: get nothing\n")
    with pytest.raises(QueryError) as info:
        lab.plan("lonely")
    assert info.value.where.endswith("lonely/recipe.yaml:4")


# --- cache keys --------------------------------------------------------------------------------

KEYED = """
    name: keyed
    tags: [keyed]
    inputs:
      n: {type: int, default: 1}
      token: {type: secret, default: null}
      data: {type: path, default: null}
    context: [device]
    variations:
      size:
        full: {default: true}
        tiny: {}
    """


def test_key_is_stable_for_the_same_resolution(lab: Lab) -> None:
    lab.add(KEYED)
    assert lab.key("keyed") == lab.key("keyed")
    assert re.fullmatch(r"[0-9a-f]{64}", lab.key("keyed"))


def test_key_does_not_depend_on_how_an_equal_input_was_given(lab: Lab) -> None:
    lab.add(KEYED)
    assert lab.key("keyed") == lab.key("keyed", inputs={"n": "1"})


@pytest.mark.parametrize("one, two", [
    pytest.param(("keyed", {"inputs": {"n": "1"}}), ("keyed", {"inputs": {"n": "2"}}), id="an-input"),
    pytest.param(("keyed _full", {}), ("keyed _tiny", {}), id="a-variation"),
    pytest.param(("keyed", {"context": {"device": "cpu"}}), ("keyed", {"context": {"device": "rocm"}}),
                 id="a-context-key-the-recipe-reads"),
])
def test_key_changes_when_what_it_covers_changes(lab: Lab, one: tuple[str, dict], two: tuple[str, dict]) -> None:
    lab.add(KEYED)
    assert lab.key(one[0], **one[1]) != lab.key(two[0], **two[1])


def test_key_ignores_context_keys_the_recipe_does_not_read(lab: Lab) -> None:
    lab.add(KEYED)
    assert lab.key("keyed", context={"precision": "fp16"}) == lab.key("keyed", context={"precision": "fp8"})
    step = lab.step("keyed", context={"device": "cpu", "precision": "fp16"})
    assert step.context == {"device": "cpu"}


def test_key_changes_when_a_recipe_file_changes(lab: Lab) -> None:
    folder = lab.add(KEYED, "def run(ctx):\n    return {}\n")
    before = lab.key("keyed")
    (folder / "run.py").write_text("def run(ctx):\n    return {}  # changed\n")
    assert lab.key("keyed") != before


def test_key_changes_when_a_dep_key_changes(lab: Lab) -> None:
    lab.add("name: parent\ntags: [parent]\ndeps:\n  - tags: keyed\n")
    lab.add(KEYED)
    one, two = lab.plan("parent", inputs={"keyed.n": "1"}), lab.plan("parent", inputs={"keyed.n": "2"})
    assert one.steps["keyed"].key != two.steps["keyed"].key
    assert one.root_step.key != two.root_step.key
    assert one.root_step.inputs == two.root_step.inputs == {}


def test_key_changes_when_a_dep_recipe_file_changes(lab: Lab) -> None:
    lab.add("name: parent\ntags: [parent]\ndeps:\n  - tags: keyed\n")
    folder = lab.add(KEYED)
    before = lab.key("parent")
    (folder / "recipe.yaml").write_text(textwrap.dedent(KEYED).replace("default: 1", "default: 2").lstrip())
    assert lab.key("parent") != before


def test_secrets_are_excluded_from_keys(lab: Lab) -> None:
    lab.add(KEYED)
    a = lab.step("keyed", inputs={"token": "alpha-secret"})
    b = lab.step("keyed", inputs={"token": "beta-secret"})
    assert a.key == b.key == lab.key("keyed")
    assert isinstance(a.inputs["token"], Secret)
    assert "token" not in a.public_inputs()


def test_secrets_do_not_appear_in_the_plan_json(lab: Lab) -> None:
    lab.add(KEYED)
    plan = lab.plan("keyed", inputs={"token": "alpha-secret"})
    assert "alpha-secret" not in repr(plan.to_json())


def add_pinned(lab: Lab) -> Path:
    return lab.add("""
        name: pinned
        tags: [pinned]
        inputs:
          url: {type: url, default: "https://example.org/a.tar"}
          retries: {type: int, default: 3}
        cache: {key: [inputs.url]}
        """, "def run(ctx):\n    return {}\n")


def test_cache_key_fields_ignore_run_py_edits(lab: Lab) -> None:
    folder = add_pinned(lab)
    before = lab.key("pinned")
    (folder / "run.py").write_text("def run(ctx):\n    return {}  # a refactor\n")
    assert lab.key("pinned") == before


def test_cache_key_fields_ignore_inputs_not_listed(lab: Lab) -> None:
    add_pinned(lab)
    assert lab.key("pinned", inputs={"retries": "9"}) == lab.key("pinned")


def test_cache_key_fields_follow_the_listed_input(lab: Lab) -> None:
    add_pinned(lab)
    assert lab.key("pinned", inputs={"url": "https://example.org/b.tar"}) != lab.key("pinned")


def test_path_input_is_keyed_by_path_size_and_mtime(lab: Lab, tmp_path: Path) -> None:
    lab.add(KEYED)
    data = tmp_path / "weights.bin"
    data.write_bytes(b"1234")
    os.utime(data, ns=(1_000_000_000, 1_000_000_000))
    first = lab.key("keyed", inputs={"data": str(data)})
    assert lab.key("keyed", inputs={"data": str(data)}) == first  # unchanged file: same key

    data.write_bytes(b"12345")  # size changes
    os.utime(data, ns=(1_000_000_000, 1_000_000_000))
    sized = lab.key("keyed", inputs={"data": str(data)})
    assert sized != first

    os.utime(data, ns=(2_000_000_000, 2_000_000_000))  # only the mtime changes
    assert lab.key("keyed", inputs={"data": str(data)}) != sized

    other = tmp_path / "other.bin"  # same size and mtime, another path
    other.write_bytes(b"12345")
    os.utime(other, ns=(2_000_000_000, 2_000_000_000))
    assert lab.key("keyed", inputs={"data": str(other)}) != lab.key("keyed", inputs={"data": str(data)})


def test_path_input_is_made_absolute(lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab.add(KEYED)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.bin").write_bytes(b"x")
    assert lab.step("keyed", inputs={"data": "w.bin"}).inputs["data"] == tmp_path / "w.bin"
    assert lab.key("keyed", inputs={"data": "w.bin"}) == lab.key("keyed", inputs={"data": str(tmp_path / "w.bin")})


# --- identity versus cache key; variation precedence; paths ---------------------------------

def test_steps_sharing_a_pinned_cache_key_but_not_their_inputs_stay_two_steps(lab: Lab) -> None:
    lab.add("""
        name: fetch
        tags: [fetch]
        inputs:
          url: {type: url, default: "https://example.com/a"}
          retries: {type: int, default: 3}
        cache: {key: [inputs.url]}
        """, "def run(ctx):\n    return {}\n")
    lab.add("""
        name: both
        tags: [both]
        deps:
          - {tags: fetch, with: {retries: 1}, as: one}
          - {tags: fetch, with: {retries: 2}, as: two}
        """)
    plan = lab.plan("both")
    fetches = [s for s in plan if s.name == "fetch"]
    assert sorted(s.inputs["retries"] for s in fetches) == [1, 2]
    assert fetches[0].key == fetches[1].key, "the pinned key ignores `retries`: one cache entry serves both"
    assert fetches[0].id != fetches[1].id


def test_a_chosen_variation_outranks_the_groups_default_for_an_input(lab: Lab) -> None:
    lab.add("""
        name: sized
        tags: [sized]
        inputs:
          samples: {type: int, default: 100}
        variations:
          size:
            full: {default: true, inputs: {samples: 24576}}
            tiny: {inputs: {samples: 16}}
        flags:
          short: {inputs: {samples: 4}}
        """)
    assert lab.step("sized").inputs["samples"] == 24576
    assert lab.step("sized _short").inputs["samples"] == 4
    with pytest.raises(InputError, match=r"_tiny and _short|_short and _tiny"):
        lab.plan("sized _tiny _short")


def test_a_query_matching_several_recipes_picks_the_one_with_the_asked_variation(lab: Lab) -> None:
    lab.add("""
        name: get-a
        tags: [get, thing]
        variations:
          device:
            cuda: {default: true}
            rocm: {}
        """)
    lab.add("""
        name: get-b
        tags: [get, thing]
        variations:
          device:
            cuda: {default: true}
        """)
    assert lab.step("get thing _rocm").name == "get-a"
    with pytest.raises(QueryError, match="matches 2 recipes"):
        lab.plan("get thing _cuda")


def test_a_relative_path_default_is_relative_to_the_recipe_folder(lab: Lab) -> None:
    folder = lab.add("""
        name: with-data
        tags: [with-data]
        inputs:
          data: {type: path, default: data/table.csv}
        """)
    assert lab.step("with-data").inputs["data"] == folder / "data" / "table.csv"


def test_user_paths_are_made_absolute_and_normalised(lab: Lab, tmp_path: Path, monkeypatch) -> None:
    lab.add("""
        name: takes-path
        tags: [takes-path]
        inputs:
          where: {type: path}
        """)
    monkeypatch.chdir(tmp_path)
    assert lab.step("takes-path", inputs={"where": "a/../b"}).inputs["where"] == tmp_path / "b"


def test_a_file_changed_inside_a_folder_input_changes_the_key(lab: Lab, tmp_path: Path) -> None:
    lab.add("""
        name: takes-dir
        tags: [takes-dir]
        inputs:
          model: {type: path}
        """)
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"1234")
    before = lab.key("takes-dir", inputs={"model": str(model)})
    (model / "weights.bin").write_bytes(b"123456")
    assert lab.key("takes-dir", inputs={"model": str(model)}) != before


def test_an_unset_optional_input_passed_on_leaves_the_deps_default(lab: Lab) -> None:
    lab.add("""
        name: leaf
        tags: [leaf]
        inputs:
          level: {type: int, default: 7}
        """)
    lab.add("""
        name: passer
        tags: [passer]
        inputs:
          level: {type: int, default: null}
        deps:
          - {tags: leaf, with: {level: "{{ inputs.level }}"}}
        """)
    assert lab.step("passer", "leaf").inputs["level"] == 7
    assert lab.step("passer", "leaf", inputs={"level": "3"}).inputs["level"] == 3


def add_precedence_levels(lab: Lab) -> None:
    """A leaf whose input `n` can come from each level: default, variation, a parent's `with`, the command line."""
    lab.add("""
        name: leveled
        tags: [leveled]
        inputs:
          n: {type: int, default: 1}
          m: {type: int, default: 1}
        variations:
          size:
            full: {default: true, inputs: {n: 2}}
            tiny: {inputs: {n: 3, m: 30}}
        """)
    lab.add("""
        name: parent
        tags: [parent]
        inputs:
          n: {type: int, default: null}
        deps:
          - tags: leveled _tiny
            with: {n: "{{ inputs.n }}"}
        """)


@pytest.mark.parametrize("query, inputs, value, origin", [
    pytest.param("leveled", {}, 2, "variation", id="a-default-variation-beats-the-default"),
    pytest.param("leveled _tiny", {}, 3, "variation", id="a-chosen-variation-beats-the-default-variation"),
    pytest.param("leveled", {"n": "8"}, 8, "user", id="the-command-line-beats-a-default-variation"),
    pytest.param("leveled _tiny", {"n": "8"}, 8, "user", id="the-command-line-beats-a-chosen-variation"),
    pytest.param("parent", {"n": "5"}, 5, "with", id="a-parents-with-beats-a-chosen-variation"),
    pytest.param("parent", {"leveled.n": "9", "n": "5"}, 9, "user", id="the-command-line-beats-a-parents-with"),
])
def test_input_precedence_is_command_line_then_with_then_variation_then_default(
        lab: Lab, query: str, inputs: dict[str, str], value: int, origin: str) -> None:
    add_precedence_levels(lab)
    step = lab.step(query, "leveled", inputs=inputs)
    assert (step.inputs["n"], step.origins["n"]) == (value, origin)


def test_a_user_value_replaces_only_its_input_of_a_chosen_variation(lab: Lab) -> None:
    add_precedence_levels(lab)
    step = lab.step("leveled _tiny", inputs={"n": "8"})
    assert (step.inputs["n"], step.inputs["m"]) == (8, 30)


# --- fingerprints: detection steps keyed on cheap machine facts --------------------------------

def add_fingerprinted(lab: Lab, tmp_path: Path) -> Path:
    marker = tmp_path / "os-release"
    marker.write_text("ID=debian\n")
    lab.add(f"""
        name: detect-thing
        tags: [detect-thing]
        cache:
          fingerprint:
            files: [{marker}, {tmp_path / "absent"}]
            programs: [fake-smi]
            env: [FAKE_VISIBLE_DEVICES]
            machine: true
        """, "def run(ctx):\n    return {}\n")
    return marker


def test_a_fingerprinted_key_changes_when_a_listed_file_changes(lab: Lab, tmp_path: Path) -> None:
    marker = add_fingerprinted(lab, tmp_path)
    before = lab.key("detect-thing", environ={"PATH": str(tmp_path)})
    assert lab.key("detect-thing", environ={"PATH": str(tmp_path)}) == before
    marker.write_text("ID=ubuntu-longer\n")
    assert lab.key("detect-thing", environ={"PATH": str(tmp_path)}) != before


def test_a_fingerprinted_key_changes_when_a_program_appears_on_path(lab: Lab, tmp_path: Path) -> None:
    add_fingerprinted(lab, tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    before = lab.key("detect-thing", environ={"PATH": str(bin_dir)})
    tool = bin_dir / "fake-smi"
    tool.write_text("#!/bin/sh\necho gpu\n")
    tool.chmod(0o755)
    assert lab.key("detect-thing", environ={"PATH": str(bin_dir)}) != before


def test_a_fingerprinted_key_changes_with_a_listed_environment_variable(lab: Lab, tmp_path: Path) -> None:
    add_fingerprinted(lab, tmp_path)
    a = lab.key("detect-thing", environ={"PATH": "", "FAKE_VISIBLE_DEVICES": "0"})
    b = lab.key("detect-thing", environ={"PATH": "", "FAKE_VISIBLE_DEVICES": "0,1"})
    assert a != b


@pytest.mark.parametrize("fingerprint, says", [
    pytest.param("files: [etc/os-release]", "must be an absolute path", id="a-relative-file"),
    pytest.param("programs: [/usr/bin/nvcc]", "looked up on PATH", id="a-program-with-a-folder"),
])
def test_fingerprint_paths_must_be_absolute_and_programs_bare_names(tmp_path: Path, fingerprint: str,
                                                                    says: str) -> None:
    folder = tmp_path / "bad-fp"
    folder.mkdir()
    (folder / "recipe.yaml").write_text(f"name: bad-fp\ntags: [x]\ncache:\n  fingerprint:\n    {fingerprint}\n")
    with pytest.raises(RecipeError, match=says):
        load_recipe(folder)


def test_two_default_variations_disagreeing_on_an_input_is_an_error_until_one_is_chosen(lab: Lab) -> None:
    lab.add("""
        name: two-defaults
        tags: [two-defaults]
        inputs:
          batch: {type: int, default: 1}
        variations:
          device:
            cpu: {default: true, inputs: {batch: 2}}
            gpu: {}
          size:
            full: {default: true, inputs: {batch: 64}}
            tiny: {}
        """)
    with pytest.raises(InputError, match="choose _cpu or _full explicitly"):
        lab.plan("two-defaults")
    assert lab.step("two-defaults _full").inputs["batch"] == 64


def test_a_relative_path_in_a_parents_with_is_relative_to_the_parent_recipe(lab: Lab) -> None:
    lab.add("""
        name: wants-path
        tags: [wants-path]
        inputs:
          where: {type: path}
        """)
    parent = lab.add("""
        name: gives-path
        tags: [gives-path]
        deps:
          - {tags: wants-path, with: {where: data/model}}
        """)
    assert lab.step("gives-path", "wants-path").inputs["where"] == parent / "data" / "model"


def test_a_dep_a_recipe_inherits_is_resolved_and_blamed_in_the_bases_file(lab: Lab) -> None:
    """The base's deps, and the relative paths its `with` writes, belong to the base's folder."""
    base = lab.add("""
        name: app-base
        abstract: true
        inputs:
          missing: {type: bool, default: false}
        deps:
          - tags: get weights
            with: {folder: models}
            as: weights
          - tags: get nothing-at-all
            when: inputs.missing
        """)
    lab.add("""
        name: get-weights
        tags: [get, weights]
        inputs:
          folder: {type: path}
        """)
    lab.add("""
        name: app-alpha
        tags: [app, alpha]
        extends: app-base
        """)
    assert lab.step("app alpha", "get-weights").inputs["folder"] == base / "models"
    with pytest.raises(QueryError) as info:
        lab.plan("app alpha", inputs={"missing": "true"})
    assert info.value.where == f"{base / 'recipe.yaml'}:9"


# --- an input for one variation (`needs`) ----------------------------------------------------------------

def add_served(lab: Lab) -> None:
    lab.add("""
        name: app-served
        tags: [app, served]
        inputs:
          url: {type: str, default: null, needs: remote}
          timeout: {type: float, default: 60.0, needs: remote}
        variations:
          backend:
            local: {default: true}
            remote: {}
        """)
    lab.add("""
        name: app-caller
        tags: [app, caller]
        deps:
          - tags: app served
            with: {url: "http://gw/v1"}
        """)


def test_an_input_given_without_the_variation_it_needs_is_refused_at_resolution(lab: Lab) -> None:
    add_served(lab)
    with pytest.raises(InputError) as caught:
        lab.plan("app served", inputs={"url": "http://gw/v1"})
    assert caught.value.message == "--input url is for _remote, which the query does not choose (it runs _local)"
    assert caught.value.hint == "add _remote to the query, or drop --input url"
    assert lab.step("app served _remote", inputs={"url": "http://gw/v1"}).inputs["url"] == "http://gw/v1"
    assert lab.step("app served").inputs["timeout"] == 60.0  # a default is not "given"
    with pytest.raises(PlanError, match="`with` passes input 'url' to 'app-served', which is for _remote"):
        lab.plan("app caller")


def test_a_plan_lists_a_url_as_fetched_only_under_the_variation_it_is_for(lab: Lab) -> None:
    lab.add("""
        name: get-data
        tags: [get, data]
        inputs:
          url: {type: url, default: "https://example.org/data.uri", needs: full}
          mirror: {type: url, default: "https://mirror.example.org"}
        variations:
          size:
            full: {default: true}
            tiny: {}
        """)
    assert lab.step("get data").fetches() == ["https://example.org/data.uri", "https://mirror.example.org"]
    assert lab.step("get data _tiny").fetches() == ["https://mirror.example.org"], "_tiny generates its data"


def test_a_plan_lists_no_fetch_from_a_url_an_input_given_makes_unused(lab: Lab) -> None:
    lab.add("""
        name: get-model
        tags: [get, model]
        inputs:
          endpoint: {type: url, default: "https://hub.example.org", unless: model_path}
          model_path: {type: path, default: null}
        """)
    assert lab.step("get model").fetches() == ["https://hub.example.org"]
    assert lab.step("get model", inputs={"model_path": "/data/model"}).fetches() == []
