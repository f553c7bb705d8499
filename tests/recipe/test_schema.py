"""recipe.yaml validation (cmx/recipe/schema.py, yamlload.py, load.py): every error names file:line."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

from cmx.errors import RecipeError
from cmx.recipe.load import load_recipe
from cmx.recipe.model import Recipe


def write(root: Path, name: str, yaml_text: str, run_py: str | None = None, **files: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "recipe.yaml").write_text(textwrap.dedent(yaml_text).lstrip(), encoding="utf-8")
    if run_py is not None:
        (folder / "run.py").write_text(textwrap.dedent(run_py).lstrip(), encoding="utf-8")
    for rel, text in files.items():
        (folder / rel).write_text(text, encoding="utf-8")
    return folder


def write_named(root: Path, yaml_text: str) -> Path:
    """Write recipe.yaml into the folder its `name:` asks for (the loader wants the two equal)."""
    name = re.search(r"^\s*name:\s*(\S+)", yaml_text, re.MULTILINE)
    assert name, yaml_text
    return write(root, name.group(1), yaml_text)


def line_of(folder: Path, needle: str) -> int:
    """The 1-based line of recipe.yaml holding `needle` (the first one)."""
    for number, line in enumerate((folder / "recipe.yaml").read_text().splitlines(), 1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in recipe.yaml")


def load(folder: Path) -> Recipe:
    return load_recipe(folder)[0]


def error(folder: Path) -> RecipeError:
    with pytest.raises(RecipeError) as info:
        load(folder)
    return info.value


def assert_error_at(folder: Path, needle: str, *message_parts: str) -> RecipeError:
    """Loading fails with an error whose `where` is recipe.yaml:<line of needle>."""
    err = error(folder)
    assert err.where == f"{folder / 'recipe.yaml'}:{line_of(folder, needle)}", err.render()
    for part in message_parts:
        assert part in err.render(), f"{part!r} not in {err.render()!r}"
    assert str(err).startswith(f"{folder / 'recipe.yaml'}:{line_of(folder, needle)}: ")
    return err


GOOD = """
    name: good
    summary: a valid recipe
    tags: [get, thing]
    inputs:
      samples: {type: int, default: 8, help: how many}
      mode: {type: choice, choices: [fast, slow], default: fast}
      token: {type: secret, env: THING_TOKEN}
    variations:
      size:
        full: {default: true}
        tiny: {inputs: {samples: 2}, summary: small}
    context: [device]
    deps:
      - tags: get python
        when: device == "rocm"
        as: py
        with: {version: "3.11"}
    cache: {key: [inputs.samples, variations]}
    outputs:
      path: {type: path}
    """


# --- the valid baseline ------------------------------------------------------------------------

def test_valid_recipe_loads_into_a_typed_model(tmp_path: Path) -> None:
    recipe = load(write(tmp_path, "good", GOOD, "def run(ctx):\n    return {}\n"))
    assert recipe.name == "good"
    assert recipe.tags == ("get", "thing")
    assert recipe.inputs["samples"].default == 8 and not recipe.inputs["samples"].required
    assert recipe.inputs["token"].required and recipe.inputs["token"].env == "THING_TOKEN"
    assert [v.name for v in recipe.groups["size"]] == ["full", "tiny"]
    assert recipe.variation("tiny").inputs == (("samples", 2),)
    assert recipe.deps[0].as_ == "py" and recipe.deps[0].when is not None
    assert recipe.cache.key == ("inputs.samples", "variations")
    assert recipe.has_run and len(recipe.digest) == 64


# --- YAML level --------------------------------------------------------------------------------

def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    folder = write(tmp_path, "broken", """
        name: broken
        tags: [a, b
        summary: never closed
        """)
    err = error(folder)
    assert err.message.startswith("malformed YAML")
    path, _, line = err.where.rpartition(":")
    assert path == str(folder / "recipe.yaml")
    assert int(line) in (2, 3, 4)  # the parser notices at the next token; never line 1 or beyond the file
    assert err.hint


def test_tab_indentation_is_malformed_yaml_at_its_line(tmp_path: Path) -> None:
    folder = write(tmp_path, "tabs", "name: tabs\ntags: [x]\ninputs:\n\tn: {type: int}\n")
    err = error(folder)
    assert "malformed YAML" in err.message
    assert err.where == f"{folder / 'recipe.yaml'}:4"


def test_empty_file_is_an_error_not_a_crash(tmp_path: Path) -> None:
    folder = write(tmp_path, "empty", "")
    err = error(folder)
    assert err.where == f"{folder / 'recipe.yaml'}:1"
    assert "must be a mapping" in err.message


def test_missing_recipe_yaml_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "nothing").mkdir()
    with pytest.raises(RecipeError, match=r"recipe.yaml is missing"):
        load(tmp_path / "nothing")


# --- unknown keys, with did-you-mean -----------------------------------------------------------

@pytest.mark.parametrize("yaml_text, at, says, hint", [
    pytest.param("name: typo\ntags: [a]\nsumary: misspelt\n", "sumary", "unknown key 'sumary' in a recipe",
                 "did you mean 'summary'?", id="in-the-recipe"),
    pytest.param("""
        name: in-typo
        tags: [a]
        inputs:
          samples:
            type: int
            defualt: 3
        """, "defualt", "unknown key 'defualt' in input 'samples'", "did you mean 'default'?", id="in-an-input"),
    pytest.param("""
        name: var-typo
        tags: [a]
        variations:
          size:
            tiny:
              sumary: small
        """, "sumary", "unknown key 'sumary' in variation 'tiny'", "did you mean 'summary'?", id="in-a-variation"),
    pytest.param("""
        name: dep-typo
        tags: [a]
        deps:
          - tags: get python
            wiht: {version: "3"}
        """, "wiht", "unknown key 'wiht' in a dep in deps", "did you mean 'with'?", id="in-a-dep"),
    pytest.param("""
        name: vdep-typo
        tags: [a]
        variations:
          device:
            rocm:
              deps:
                - tags: get rocm
                  whne: true
        """, "whne", "unknown key 'whne'", "did you mean 'when'?", id="in-a-dep-of-a-variation"),
])
def test_an_unknown_key_names_its_line_and_the_key_meant(tmp_path: Path, yaml_text: str, at: str, says: str,
                                                         hint: str) -> None:
    err = assert_error_at(write_named(tmp_path, yaml_text), at, says)
    assert err.hint == hint


def test_unknown_key_without_close_match_lists_allowed_keys(tmp_path: Path) -> None:
    folder = write(tmp_path, "weird", """
        name: weird
        tags: [a]
        zzzzzz: 1
        """)
    err = assert_error_at(folder, "zzzzzz", "unknown key 'zzzzzz'")
    assert "allowed keys:" in err.hint and "variations" in err.hint


# --- wrong types -------------------------------------------------------------------------------

@pytest.mark.parametrize("yaml_text, needle, message", [
    ("name: wt\ntags: {get: 1}\n", "tags:", "tags must be a list of strings, got a mapping"),
    ("name: wt\ntags: [get, 3]\n", "tags:", "an item of tags must be a string, got int 3"),
    ("name: wt\ntags: [a]\nsummary: [x]\n", "summary", "summary must be a string, got a list"),
    ("name: wt\ntags: [a]\ninputs: [n]\n", "inputs", "inputs must be a mapping, got a list"),
    ("name: wt\ntags: [a]\ninputs:\n  n: 3\n", "n: 3", "input 'n' must be a mapping, got int 3"),
    ("name: wt\ntags: [a]\ninputs:\n  n: {type: integer}\n", "n:", "unknown type 'integer'"),
    ("name: wt\ntags: [a]\ninputs:\n  n: {default: 1}\n", "n:", "input 'n' has no type"),
    ("name: wt\ntags: [a]\ndeps: {tags: x}\n", "deps", "deps must be a list of mappings, got a mapping"),
    ("name: wt\ntags: [a]\ndeps:\n  - get python\n", "- get", "a dep in deps must be a mapping"),
    ("name: wt\ntags: [a]\ncache: yes please\n", "cache",
     "cache (true, false or a mapping of key / fingerprint) must be a mapping"),
    ("name: wt\ntags: [a]\ncontext: {device: rocm}\n", "context", "context must be a list of strings"),
    ("name: wt\ntags: [a]\nvariations:\n  size:\n    tiny: {default: maybe}\n", "tiny",
     "default of variation 'tiny' must be true or false"),
    ("name: 3\ntags: [a]\n", "name", "name must be a string, got int 3"),
], ids=["tags-as-a-mapping", "a-tag-as-an-int", "summary-as-a-list", "inputs-as-a-list", "an-input-as-an-int",
        "unknown-input-type", "input-without-a-type", "deps-as-a-mapping", "a-dep-as-a-string", "cache-as-a-string",
        "context-as-a-mapping", "variation-default-not-a-bool", "name-as-an-int"])
def test_wrong_type_names_file_and_line(tmp_path: Path, yaml_text: str, needle: str, message: str) -> None:
    folder = tmp_path / "wt"
    folder.mkdir()
    (folder / "recipe.yaml").write_text(yaml_text)
    assert_error_at(folder, needle, message)


@pytest.mark.parametrize("spec, message", [
    ("{type: int, default: many}", "default of 'n': expected an integer, got 'many'"),
    ("{type: int, default: true}", "expected an integer, got bool True"),
    ("{type: bool, default: 3}", "expected true or false"),
    ("{type: float, default: fast}", "expected a number"),
    ("{type: str, default: [a]}", "expected a string"),
    ("{type: url, default: not-a-url}", "expected a URL"),
    ("{type: choice, choices: [a, b], default: c}", "expected one of a, b, got 'c'"),
], ids=["int-given-a-word", "int-given-a-bool", "bool-given-an-int", "float-given-a-word", "str-given-a-list",
        "url-given-a-word", "choice-given-another-value"])
def test_input_default_of_wrong_type_names_its_line(tmp_path: Path, spec: str, message: str) -> None:
    folder = write(tmp_path, "defaults", f"""
        name: defaults
        tags: [a]
        inputs:
          n: {spec}
        """)
    assert_error_at(folder, "n: {", message)


def test_missing_required_key_is_reported(tmp_path: Path) -> None:
    folder = write(tmp_path, "no-tags", "name: no-tags\nsummary: x\n")
    err = error(folder)
    assert err.where == f"{folder / 'recipe.yaml'}:1"
    assert "missing required key 'tags'" in err.message


# --- refused recipes: each error names the line at fault, says why, and hints how to fix it -----

@pytest.mark.parametrize("yaml_text, at, says, hint", [
    # YAML that would hide where a value came from
    pytest.param("name: dup\ntags: [a]\nsummary: one\nsummary: two\n", "summary: two",
                 "duplicate key 'summary' (first at line 3)", "remove one of the two", id="duplicate-key"),
    pytest.param("""
        name: dup-input
        tags: [a]
        inputs:
          n:
            type: int
            default: 1
            default: 2
        """, "default: 2", "duplicate key 'default'", None, id="duplicate-key-in-an-input"),
    pytest.param("""
        name: merge
        tags: [a]
        inputs:
          base: &base {type: int, default: 1}
          other:
            <<: *base
        """, "<<", "merge keys", None, id="merge-key"),
    # names
    pytest.param("name: untagged\ntags: []\n", "tags:", "tags must not be empty", None, id="empty-tags"),
    pytest.param("""
        name: varname
        tags: [a]
        variations:
          size:
            full: {default: true}
            Tiny_Set: {}
        """, "Tiny_Set", "variation name 'Tiny_Set' must be kebab-case", None, id="variation-name-not-kebab-case"),
    # inputs
    pytest.param("name: nochoice\ntags: [a]\ninputs:\n  mode: {type: choice, default: fast}\n", "mode:",
                 "input 'mode' is a choice but lists no `choices`", None, id="choice-without-choices"),
    pytest.param("""
        name: strchoice
        tags: [a]
        inputs:
          mode:
            type: str
            choices: [a, b]
        """, "choices:", "`choices` only applies to type choice", None, id="choices-of-a-str"),
    pytest.param("""
        name: leaky
        tags: [a]
        inputs:
          token:
            type: secret
            env: HF_TOKEN
            default: hf_abcdef
        """, "default: hf_", "secret input 'token' cannot have a default", "env", id="secret-with-a-default"),
    pytest.param("""
        name: badenv
        tags: [a]
        inputs:
          token:
            type: secret
            env: HF-TOKEN
        """, "env:", "must be an environment variable name", None, id="env-not-a-variable-name"),
    # variations
    pytest.param("""
        name: varin
        tags: [a]
        inputs:
          samples: {type: int, default: 10}
        variations:
          size:
            tiny:
              inputs:
                sample: 2
        """, "sample: 2", "variation 'tiny' sets unknown input 'sample'", "samples",
                 id="variation-setting-an-unknown-input"),
    pytest.param("""
        name: vartype
        tags: [a]
        inputs:
          samples: {type: int, default: 10}
        variations:
          size:
            tiny:
              inputs: {samples: few}
        """, "inputs: {samples: few}", "input 'samples' of variation 'tiny': expected an integer", None,
                 id="variation-setting-an-input-to-the-wrong-type"),
    pytest.param("""
        name: varsecret
        tags: [a]
        inputs:
          token: {type: secret, env: T}
        variations:
          auth:
            fixed:
              inputs:
                token: abc
        """, "token: abc", "cannot set secret input 'token'", None, id="variation-setting-a-secret"),
    pytest.param("""
        name: twodefaults
        tags: [a]
        variations:
          device:
            cpu: {default: true}
            cuda: {default: true}
        """, "device:", "variation group 'device' has more than one default", None, id="two-defaults-in-a-group"),
    pytest.param("name: flagdefault\ntags: [a]\nflags:\n  debug:\n    default: true\n", "default: true",
                 "flag 'debug' cannot be a default", None, id="flag-as-a-default"),
    pytest.param("name: emptygroup\ntags: [a]\nvariations:\n  device: {}\n", "device:",
                 "variation group 'device' is empty", None, id="empty-variation-group"),
    # deps and `when`
    pytest.param("""
        name: badwhen
        tags: [a]
        context: [device]
        deps:
          - tags: get rocm
            when: __import__("os").system("true")
        """, "when:", "bad `when` expression", "allowed:", id="when-calling-a-function"),
    pytest.param("""
        name: unlisted
        tags: [a]
        deps:
          - tags: get rocm
            when: context.device == "rocm"
        """, "when:", "reads context.device, which the recipe does not list", "context",
                 id="when-reading-an-unlisted-context-key"),
    pytest.param("""
        name: bare
        tags: [a]
        context: [device]
        deps:
          - tags: get rocm
            when: devise == "rocm"
        """, "when:", "reads 'devise'", "did you mean 'device'?", id="when-reading-an-unknown-bare-name"),
    pytest.param("name: notags\ntags: [a]\ndeps:\n  - as: py\n", "- as: py", "a dep needs `tags`", None,
                 id="dep-without-tags"),
    pytest.param("""
        name: tmplref
        tags: [a]
        deps:
          - tags: get python
            with:
              version: "{{ inputs.versoin }}"
        """, "version:", "template reads inputs.versoin", None, id="with-template-reading-an-undeclared-input"),
    # outputs and cache
    pytest.param("name: norun\ntags: [a]\noutputs:\n  path: {type: path}\n", "outputs:",
                 "outputs are declared but the recipe has no run.py", "run.py", id="outputs-without-run-py"),
    pytest.param("name: cachenokey\ntags: [a]\ncache: {}\n", "cache:", "cache mapping needs `key`", None,
                 id="cache-mapping-without-key"),
])
def test_a_refused_recipe_names_the_line_at_fault_and_why(tmp_path: Path, yaml_text: str, at: str, says: str,
                                                          hint: str | None) -> None:
    err = assert_error_at(write_named(tmp_path, yaml_text), at, says)
    if hint is not None:
        assert err.hint and hint in err.hint, err.render()


# --- names -------------------------------------------------------------------------------------

def test_name_differing_from_folder_names_file_and_line(tmp_path: Path) -> None:
    folder = write(tmp_path, "get-thing", """
        summary: x
        name: get-other
        tags: [a]
        """)
    err = assert_error_at(folder, "name:", "name 'get-other' differs from its folder 'get-thing'")
    assert "rename" in err.hint


def test_name_not_kebab_case_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    folder = write(tmp_path, "Get_Thing", "name: Get_Thing\ntags: [a]\n")
    err = assert_error_at(folder, "name:", "must be kebab-case")
    assert "'get-thing'" in err.hint


@pytest.mark.parametrize("tag", ["Get", "get_python", "get python-", "-x", "a--b"])
def test_tag_not_kebab_case_is_refused(tmp_path: Path, tag: str) -> None:
    folder = write(tmp_path, "tagged", f"""
        name: tagged
        summary: s
        tags: [ok, "{tag}"]
        """)
    assert_error_at(folder, "tags:", f"tag {tag!r} must be kebab-case")


def test_tags_as_a_string_are_split_on_spaces(tmp_path: Path) -> None:
    recipe = load(write(tmp_path, "spaced", "name: spaced\ntags: get python v3.11\n"))
    assert recipe.tags == ("get", "python", "v3.11")


def test_variation_name_defined_in_two_groups_is_refused(tmp_path: Path) -> None:
    folder = write(tmp_path, "twice", """
        name: twice
        tags: [a]
        variations:
          size:
            small: {}
          model:
            small: {}
        """)
    lines = [n for n, line in enumerate((folder / "recipe.yaml").read_text().splitlines(), 1) if "small" in line]
    err = error(folder)
    assert err.where == f"{folder / 'recipe.yaml'}:{lines[1]}"
    assert f"first at line {lines[0]}" in err.message


@pytest.mark.parametrize("bad", ["Samples", "sample-count", "2nd", "camelCase"])
def test_input_name_not_snake_case_names_its_line(tmp_path: Path, bad: str) -> None:
    folder = write(tmp_path, "inname", f"""
        name: inname
        tags: [a]
        inputs:
          ok_name: {{type: int, default: 1}}
          {bad}: {{type: int, default: 1}}
        """)
    assert_error_at(folder, f"{bad}:", f"input name {bad!r} must be snake_case")


# --- inputs ------------------------------------------------------------------------------------

def test_secret_with_null_default_is_optional(tmp_path: Path) -> None:
    recipe = load(write(tmp_path, "opt-secret", """
        name: opt-secret
        tags: [a]
        inputs:
          token: {type: secret, default: null}
        """))
    assert recipe.inputs["token"].required is False


# --- deps --------------------------------------------------------------------------------------

def test_two_deps_with_the_same_as_name_are_refused(tmp_path: Path) -> None:
    folder = write(tmp_path, "twoas", """
        name: twoas
        tags: [a]
        deps:
          - tags: get python
            as: tool
          - tags: get git
            as: tool
        """)
    lines = [n for n, line in enumerate((folder / "recipe.yaml").read_text().splitlines(), 1) if "as: tool" in line]
    err = error(folder)
    assert err.where == f"{folder / 'recipe.yaml'}:{lines[1]}"
    assert f"first at line {lines[0]}" in err.message


# --- outputs, cache, files ---------------------------------------------------------------------

def test_outputs_with_run_py_load(tmp_path: Path) -> None:
    recipe = load(write(tmp_path, "withrun", "name: withrun\ntags: [a]\noutputs:\n  n: {type: int}\n",
                        "def run(ctx):\n    return {'n': 1}\n"))
    assert recipe.outputs["n"].type == "int" and recipe.has_run


def test_output_without_a_type_is_refused(tmp_path: Path) -> None:
    folder = write(tmp_path, "outtype", "name: outtype\ntags: [a]\noutputs:\n  n: {help: x}\n",
                   "def run(ctx):\n    return {}\n")
    assert_error_at(folder, "n: {help", "output 'n' needs a type")


@pytest.mark.parametrize("field", ["inputs.nope", "inputs.token", "context.precision", "deps.nope", "variation",
                                   "run.py"])
def test_bad_cache_key_field_names_its_line(tmp_path: Path, field: str) -> None:
    folder = write(tmp_path, "badkey", f"""
        name: badkey
        tags: [a]
        inputs:
          url: {{type: url, default: "https://example.org/x"}}
          token: {{type: secret, env: T}}
        context: [device]
        cache:
          key: [inputs.url, {field}]
        """)
    err = assert_error_at(folder, "key:", f"cache key field {field!r}")
    assert "secrets never enter keys" in err.hint


def test_valid_cache_key_fields_are_accepted(tmp_path: Path) -> None:
    recipe = load(write(tmp_path, "goodkey", """
        name: goodkey
        tags: [a]
        inputs:
          url: {type: url, default: "https://example.org/x"}
        context: [device]
        deps:
          - tags: get python
            as: py
        cache: {key: [inputs.url, context.device, variations, deps.py]}
        """))
    assert recipe.cache.enabled and recipe.cache.key == ("inputs.url", "context.device", "variations", "deps.py")


@pytest.mark.parametrize("rel", ["../outside.txt", "/etc/hostname", "missing.txt", "sub/../../outside.txt"])
def test_files_listing_a_file_outside_the_folder_is_refused(tmp_path: Path, rel: str) -> None:
    (tmp_path / "outside.txt").write_text("secret stuff")
    folder = write(tmp_path, "files", f"""
        name: files
        tags: [a]
        files: ["{rel}"]
        """)
    assert_error_at(folder, "files:", f"listed file {rel!r} is not a file inside the recipe folder")


def test_files_listing_a_symlink_that_leaves_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("secret stuff")
    folder = write(tmp_path, "linked", """
        name: linked
        tags: [a]
        files: [escape.txt]
        """)
    os.symlink(tmp_path / "outside.txt", folder / "escape.txt")
    assert_error_at(folder, "files:", "listed file 'escape.txt' is not a file inside the recipe folder")


def test_files_listing_a_file_in_a_subfolder_is_accepted(tmp_path: Path) -> None:
    folder = write(tmp_path, "subfile", "name: subfile\ntags: [a]\nfiles: [conf/user.conf]\n")
    (folder / "conf").mkdir()
    (folder / "conf" / "user.conf").write_text("x = 1\n")
    assert load(folder).files == ("conf/user.conf",)


# --- the digest --------------------------------------------------------------------------------

def test_digest_changes_when_recipe_yaml_changes(tmp_path: Path) -> None:
    folder = write(tmp_path, "dig", "name: dig\ntags: [a]\n")
    before = load(folder).digest
    (folder / "recipe.yaml").write_text("name: dig\ntags: [a]\nsummary: now with a summary\n")
    assert load(folder).digest != before


def test_digest_changes_when_run_py_changes(tmp_path: Path) -> None:
    folder = write(tmp_path, "dig", "name: dig\ntags: [a]\n", "def run(ctx):\n    return {}\n")
    before = load(folder).digest
    assert load(folder).digest == before  # stable when nothing changed
    (folder / "run.py").write_text("def run(ctx):\n    return {}  # edited\n")
    assert load(folder).digest != before


def test_digest_changes_when_run_py_appears(tmp_path: Path) -> None:
    folder = write(tmp_path, "dig", "name: dig\ntags: [a]\n")
    before = load(folder).digest
    (folder / "run.py").write_text("def run(ctx):\n    return {}\n")
    assert load(folder).digest != before


def test_digest_changes_when_a_listed_file_changes(tmp_path: Path) -> None:
    folder = write(tmp_path, "dig", "name: dig\ntags: [a]\nfiles: [user.conf]\n", **{"user.conf": "a = 1\n"})
    before = load(folder).digest
    (folder / "user.conf").write_text("a = 2\n")
    assert load(folder).digest != before


def test_digest_ignores_files_the_recipe_does_not_list(tmp_path: Path) -> None:
    folder = write(tmp_path, "dig", "name: dig\ntags: [a]\n", "def run(ctx):\n    return {}\n",
                   **{"README.md": "notes\n"})
    before = load(folder).digest
    (folder / "README.md").write_text("other notes\n")
    assert load(folder).digest == before


def test_stamps_cover_recipe_yaml_run_py_and_listed_files(tmp_path: Path) -> None:
    folder = write(tmp_path, "dig", "name: dig\ntags: [a]\nfiles: [user.conf]\n", **{"user.conf": "a = 1\n"})
    _, stamps = load_recipe(folder)
    names = [s[0] for s in stamps]
    assert names == ["recipe.yaml", "run.py", "user.conf"]
    assert stamps[1][2] == -1  # run.py missing: stamped as absent, so its creation is noticed


def test_a_dep_name_shared_by_deps_that_can_be_active_together_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "shadow"
    folder.mkdir()
    (folder / "recipe.yaml").write_text(
        "name: shadow\ntags: [shadow]\n"
        "deps:\n  - {tags: a, as: model}\n"
        "flags:\n  tiny:\n    deps:\n      - {tags: b, as: model}\n")
    with pytest.raises(RecipeError, match="'model' is also used by the recipe") as err:
        load_recipe(folder)
    assert err.value.where == f"{folder / 'recipe.yaml'}:8"


def test_variations_of_one_group_may_reuse_a_dep_name(tmp_path: Path) -> None:
    folder = tmp_path / "exclusive"
    folder.mkdir()
    (folder / "recipe.yaml").write_text(
        "name: exclusive\ntags: [exclusive]\n"
        "variations:\n  size:\n    full:\n      default: true\n      deps: [{tags: real model, as: model}]\n"
        "    tiny:\n      deps: [{tags: tiny model, as: model}]\n")
    recipe, _ = load_recipe(folder)
    assert [d.as_ for v in recipe.groups["size"] for d in v.deps] == ["model", "model"]


def test_an_inputs_needs_names_one_of_the_recipes_variations(tmp_path: Path) -> None:
    folder = write(tmp_path, "needy", """
        name: needy
        tags: [needy]
        inputs:
          url: {type: str, default: null, needs: remote}
        variations:
          backend:
            local: {default: true}
            remote: {}
        """)
    assert load(folder).inputs["url"].needs == "remote"
    (folder / "recipe.yaml").write_text((folder / "recipe.yaml").read_text().replace("needs: remote", "needs: far"))
    assert_error_at(folder, "needs: far", "input 'url' needs _far, which is not a variation or flag of this recipe",
                    "_local, _remote")


def test_an_inputs_unless_names_another_input(tmp_path: Path) -> None:
    folder = write(tmp_path, "model", """
        name: model
        tags: [model]
        inputs:
          endpoint: {type: url, default: "https://hub.example.org", unless: model_path}
          model_path: {type: path, default: null}
        """)
    assert load(folder).inputs["endpoint"].unless == "model_path"
    (folder / "recipe.yaml").write_text((folder / "recipe.yaml").read_text().replace("unless: model_path",
                                                                                       "unless: path"))
    assert_error_at(folder, "unless: path", "input 'endpoint' is unused unless 'path', which is not an input",
                    "endpoint, model_path")
