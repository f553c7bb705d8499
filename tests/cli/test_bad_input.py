"""Bad input, end to end through the real CLI (`python -m cmx` as a process).

Each case must: exit non-zero; print on stderr one clear sentence naming what failed (file:line
for recipe problems) and a hint; print no Python traceback; and change nothing (no cache
entry, no run record for errors found before running).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from cmx.cache.store import Store
from tests.conftest import Home

# --- helpers -----------------------------------------------------------------------------------


def fails(home: Home, *args: str) -> str:
    """Run cmx, expect a clean failure, return stderr."""
    proc = home.cmx(*args)
    assert proc.returncode != 0, f"cmx {' '.join(args)} succeeded:\n{proc.stdout}"
    assert proc.returncode != 3, f"internal error instead of a user error:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout, proc.stdout
    # progress lines may come first on stderr; the error starts at the line "error: ..."
    start = proc.stderr.find("error: ")
    assert start == 0 or proc.stderr[start - 1] == "\n", proc.stderr
    return proc.stderr[start:]


def first_line(stderr: str) -> str:
    return stderr.splitlines()[0]


def hint(stderr: str) -> str:
    found = re.search(r"^\s+hint: (.+)$", stderr, re.M)
    assert found, f"no hint in:\n{stderr}"
    return found.group(1)


def assert_nothing_cached(home: Home) -> None:
    cache = home.root / "cache"
    assert list(Store(cache).entries()) == []
    if cache.is_dir():
        assert not list(cache.rglob(".tmp-*")), "a build folder was left behind"
        # besides cmx's hidden folders (the recipe index, fetched sources), at most the build lock of a
        # step that failed: no file a later run could mistake for an entry
        for recipe_dir in (p for p in cache.iterdir() if p.is_dir() and not p.name.startswith(".")):
            assert all(f.name.startswith(".") and f.name.endswith(".lock") for f in recipe_dir.iterdir()), \
                list(recipe_dir.iterdir())


def assert_nothing_ran(home: Home) -> None:
    assert_nothing_cached(home)
    cache = home.root / "cache"
    if cache.is_dir():  # resolution failed: not even a lock was taken
        assert [p.name for p in cache.iterdir() if not p.name.startswith(".")] == []
    runs = home.root / "runs"
    assert not runs.exists() or not any(runs.iterdir()), "a run was recorded for a query that cannot run"


def line_in(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


def ok_recipe(home: Home) -> None:
    """A valid, cacheable recipe beside the bad ones: it must not get built either."""
    home.recipe("get-thing", """
        name: get-thing
        summary: a fine recipe
        tags: [get, thing]
        cache: true
        outputs:
          n: {type: int}
        """, "def run(ctx):\n    return {'n': 1}\n")


# --- recipe files ------------------------------------------------------------------------------

def test_malformed_yaml_names_file_and_line(home: Home) -> None:
    ok_recipe(home)
    folder = home.recipe("broken", "name: broken\ntags: [a, b\nsummary: x\n")
    err = fails(home, "run", "get", "thing")
    assert re.match(rf"error: {re.escape(str(folder / 'recipe.yaml'))}:[23]: malformed YAML", first_line(err))
    assert "YAML syntax" in hint(err)
    assert_nothing_ran(home)


def test_unknown_key_names_file_and_line(home: Home) -> None:
    folder = home.recipe("typo", """
        name: typo
        tags: [typo]
        sumary: misspelt
        """)
    err = fails(home, "run", "typo")
    assert first_line(err) == f"error: {folder / 'recipe.yaml'}:3: unknown key 'sumary' in a recipe"
    assert hint(err) == "did you mean 'summary'?"
    assert_nothing_ran(home)


def test_duplicate_key_names_file_and_line(home: Home) -> None:
    folder = home.recipe("dup", """
        name: dup
        tags: [dup]
        tags: [again]
        """)
    err = fails(home, "plan", "dup")
    assert first_line(err) == f"error: {folder / 'recipe.yaml'}:3: duplicate key 'tags' (first at line 2)"
    assert hint(err)
    assert_nothing_ran(home)


def test_wrong_type_names_file_and_line(home: Home) -> None:
    folder = home.recipe("wrongtype", """
        name: wrongtype
        tags: [wrongtype]
        inputs:
          samples: {type: int, default: lots}
        """)
    err = fails(home, "run", "wrongtype")
    assert first_line(err) == (f"error: {folder / 'recipe.yaml'}:4: default of 'samples': "
                               "expected an integer, got 'lots'")
    assert_nothing_ran(home)


def test_tags_not_a_list_names_file_and_line(home: Home) -> None:
    folder = home.recipe("badtags", "name: badtags\ntags: {a: 1}\n")
    err = fails(home, "run", "badtags")
    assert first_line(err) == f"error: {folder / 'recipe.yaml'}:2: tags must be a list of strings, got a mapping"
    assert_nothing_ran(home)


def test_bad_when_expression_names_file_and_line(home: Home) -> None:
    ok_recipe(home)
    folder = home.recipe("badwhen", """
        name: badwhen
        tags: [badwhen]
        context: [device]
        deps:
          - tags: get thing
            when: __import__("os").system("touch pwned")
        """)
    err = fails(home, "run", "badwhen")
    assert first_line(err).startswith(f"error: {folder / 'recipe.yaml'}:6: bad `when` expression")
    assert "allowed:" in hint(err)
    assert not (home.root / "pwned").exists()
    assert_nothing_ran(home)


# --- queries -----------------------------------------------------------------------------------

def test_unknown_tag_suggests_the_close_one(home: Home) -> None:
    ok_recipe(home)
    err = fails(home, "run", "get", "thnig")
    assert first_line(err) == "error: no recipe matches 'get thnig'"
    assert "'thnig': did you mean thing?" in hint(err)
    assert_nothing_ran(home)


def test_ambiguous_query_lists_the_candidates(home: Home) -> None:
    ok_recipe(home)
    home.recipe("get-thing-fast", "name: get-thing-fast\ntags: [get, thing, fast]\n")
    err = fails(home, "run", "get thing")
    assert "'get thing' matches 2 recipes" in first_line(err)
    assert "get-thing (tags: -)" in first_line(err) and "get-thing-fast (tags: fast)" in first_line(err)
    assert "-tag" in hint(err)
    assert_nothing_ran(home)


def test_malformed_query_word_is_refused(home: Home) -> None:
    ok_recipe(home)
    err = fails(home, "run", "get", "Thing!")
    assert "'Thing!' is not a valid query word" in first_line(err)
    assert hint(err)
    assert_nothing_ran(home)


def add_sized(home: Home) -> None:
    home.recipe("get-data", """
        name: get-data
        tags: [get, data]
        inputs:
          samples: {type: int, default: 100, help: how many samples}
        variations:
          size:
            full: {default: true}
            tiny: {inputs: {samples: 16}}
        cache: true
        outputs:
          n: {type: int}
        """, "def run(ctx):\n    return {'n': ctx.inputs['samples']}\n")


def test_unknown_variation_lists_the_valid_ones(home: Home) -> None:
    add_sized(home)
    err = fails(home, "run", "get data _tinny")
    assert first_line(err) == "error: recipe 'get-data' has no variation '_tinny'"
    assert hint(err) == "did you mean _tiny? variations: size: _full _tiny"
    assert_nothing_ran(home)


def test_two_variations_of_one_group_are_refused(home: Home) -> None:
    add_sized(home)
    err = fails(home, "run", "get data _full _tiny")
    assert first_line(err) == "error: _full and _tiny both belong to group 'size' of 'get-data'; choose one"
    assert_nothing_ran(home)


def test_dependency_cycle_prints_the_cycle(home: Home) -> None:
    home.recipe("alpha", "name: alpha\ntags: [alpha]\ncache: true\ndeps:\n  - tags: beta\n")
    home.recipe("beta", "name: beta\ntags: [beta]\ncache: true\ndeps:\n  - tags: alpha\n")
    err = fails(home, "run", "alpha")
    assert first_line(err).endswith("dependency cycle: alpha → beta → alpha")
    assert first_line(err).startswith(f"error: {home.recipes / 'beta' / 'recipe.yaml'}:5: ")
    assert "break the cycle" in hint(err)
    assert_nothing_ran(home)


# --- inputs ------------------------------------------------------------------------------------

def test_unknown_input_lists_the_valid_ones(home: Home) -> None:
    add_sized(home)
    err = fails(home, "run", "get data", "--input", "sample=8")
    assert first_line(err) == "error: recipe 'get-data' has no input 'sample'"
    assert hint(err) == "did you mean 'samples'? valid inputs: samples (int)"
    assert_nothing_ran(home)


def test_input_of_wrong_type_says_what_was_expected(home: Home) -> None:
    add_sized(home)
    err = fails(home, "run", "get data", "--input", "samples=lots")
    assert first_line(err) == ("error: input 'samples' of 'get-data' (from command line): "
                               "expected an integer, got 'lots'")
    assert_nothing_ran(home)


def test_an_input_on_the_command_line_outranks_the_chosen_variations_value(home: Home) -> None:
    add_sized(home)
    proc = home.cmx("run", "get data _tiny", "--input", "samples=8", "--json", check=True)
    assert json.loads(proc.stdout)["outputs"] == {"n": 8}
    shown = home.cmx("plan", "get data _tiny", "--input", "samples=8", "-v", check=True).stdout
    assert "samples = 8  (user)" in shown


def test_input_without_equals_sign_is_refused(home: Home) -> None:
    add_sized(home)
    proc = home.cmx("run", "get data", "--input", "samples")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "'samples' is not KEY=VALUE" in proc.stderr
    assert_nothing_ran(home)


# --- steps that fail ---------------------------------------------------------------------------

def add_parent_of(home: Home, child_run: str, child_outputs: str = "n: {type: int}") -> None:
    home.recipe("parent", """
        name: parent
        tags: [parent]
        cache: true
        deps:
          - tags: child
            as: child
        """)
    home.recipe("child", f"""
        name: child
        tags: [child]
        cache: true
        outputs:
          {child_outputs}
        """, child_run)


def step_failure(err: str) -> dict[str, str]:
    """The parts of a StepFailed message on stderr."""
    lines = err.splitlines()
    assert lines[0].startswith("error: step failed: "), err
    log = re.search(r"^\s+log: (\S+)$", err, re.M)
    rerun = re.search(r"^\s+re-run just this step: (.+)$", err, re.M)
    assert log and rerun, err
    return {"chain": lines[0][len("error: step failed: "):], "reason": lines[1].strip(), "log": log.group(1),
            "rerun": rerun.group(1)}


def test_missing_required_output_fails_the_step(home: Home) -> None:
    add_parent_of(home, "def run(ctx):\n    ctx.log.info('forgot to return n')\n    return {}\n")
    err = fails(home, "run", "parent")
    parts = step_failure(err)
    assert parts["chain"] == "parent ← child"
    assert parts["reason"].startswith("run() of child did not return declared output 'n'")
    assert "  hint: return it from run()" in err
    assert "forgot to return n" in err  # the end of the log is shown
    assert Path(parts["log"]).is_file()
    assert parts["rerun"] == "cmx run child"
    assert_nothing_cached(home)


def test_output_of_wrong_type_fails_the_step(home: Home) -> None:
    add_parent_of(home, "def run(ctx):\n    return {'n': 'many'}\n")
    err = fails(home, "run", "parent")
    assert step_failure(err)["reason"] == "output 'n' of child: expected an integer, got 'many'"
    assert_nothing_cached(home)


def test_step_raising_names_the_chain_log_tail_and_rerun(home: Home) -> None:
    add_parent_of(home, """
def run(ctx):
    ctx.log.info("warming up the frobnicator")
    raise ValueError("frobnicator exploded")
""")
    err = fails(home, "run", "parent", "--context", "device=cpu")
    parts = step_failure(err)
    assert parts["chain"] == "parent ← child"
    run_py = home.recipes / "child" / "run.py"
    assert parts["reason"] == f"ValueError: frobnicator exploded (at {run_py}:3, in run)"
    assert re.search(r"last \d+ lines of the log:", err)
    assert "| " in err and "warming up the frobnicator" in err
    log = Path(parts["log"])
    assert log.is_file() and log.is_relative_to(home.root / "runs")
    assert "Traceback" in log.read_text()  # the full traceback is kept in the log, for whoever needs it
    assert "frobnicator exploded" in log.read_text()
    assert parts["rerun"] == "cmx run child --context device=cpu"
    assert_nothing_cached(home)
    # the record says the run failed
    record = json.loads((log.parent.parent / "run.json").read_text())
    assert record["status"] == "failed" and record["results"]["child"]["status"] == "failed"
    assert record["results"]["parent"]["status"] == "skipped"


def test_step_raising_with_json_reports_the_error_too(home: Home) -> None:
    add_parent_of(home, "def run(ctx):\n    raise RuntimeError('no GPU here')\n")
    proc = home.cmx("run", "parent", "--json")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert data["ok"] is False
    assert data["error"].startswith("step failed: parent ← child")
    assert "RuntimeError: no GPU here" in data["error"]
    assert_nothing_cached(home)


def test_failing_command_in_a_step_shows_its_output(home: Home) -> None:
    add_parent_of(home, """
def run(ctx):
    ctx.run_cmd(["python3", "-c", "import sys; print('compiling kernels'); sys.exit(3)"])
    return {"n": 1}
""")
    err = fails(home, "run", "parent")
    parts = step_failure(err)
    assert "exited with status 3" in parts["reason"]
    assert "| compiling kernels" in err
    assert_nothing_cached(home)


def test_rerun_command_reproduces_just_the_failing_step(home: Home) -> None:
    add_parent_of(home, "def run(ctx):\n    raise ValueError('boom')\n")
    rerun = step_failure(fails(home, "run", "parent"))["rerun"]
    args = rerun.split()[1:]
    assert args == ["run", "child"]
    err = fails(home, *args)
    assert step_failure(err)["chain"] == "child"
    assert_nothing_cached(home)


# --- git sources -------------------------------------------------------------------------------

def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org",
                           "-c", "init.defaultBranch=main", *args],
                          cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def make_repo(root: Path) -> str:
    """A real git repository with one recipe; returns its HEAD commit."""
    root.mkdir()
    git(root, "init", "-q")
    folder = root / "recipes" / "remote-hello"
    folder.mkdir(parents=True)
    (folder / "recipe.yaml").write_text("name: remote-hello\ntags: [remote, hello]\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a recipe")
    return git(root, "rev-parse", "HEAD")


def point_registry_at(home: Home, repo: Path, rev: str) -> Path:
    registry = home.root / "registry.yaml"
    registry.write_text(f"sources:\n  - name: remote\n    git: {repo}\n    rev: {rev}\n")
    return registry


def test_git_source_with_unknown_commit_fails_cleanly(home: Home, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    head = make_repo(repo)
    wrong = "0123456789abcdef" * 2 + "01234567"
    assert wrong != head
    registry = point_registry_at(home, repo, wrong)
    err = fails(home, "run", "remote hello")
    assert first_line(err) == f"error: {registry}:2: source 'remote': commit {wrong} was not found in {repo}"
    assert "check the sha" in hint(err)
    assert_nothing_ran(home)
    sources = home.root / "cache" / ".sources"
    assert not sources.exists() or list(sources.iterdir()) == [], "a partial checkout was left behind"

    # control: the same registry at the right commit works, so the failure was the sha
    point_registry_at(home, repo, head)
    assert home.cmx("registry", "fetch", "remote").returncode == 0
    proc = home.cmx("plan", "remote hello")
    assert proc.returncode == 0, proc.stderr
    assert "remote-hello" in proc.stdout


def test_git_source_pinned_to_a_branch_is_refused(home: Home, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo)
    registry = point_registry_at(home, repo, "main")
    err = fails(home, "run", "remote hello")
    assert first_line(err) == f"error: {registry}:4: source 'remote' pins rev 'main', which is not a full commit sha"
    assert "pin the 40-hex commit" in hint(err) and "cmx registry update remote SHA" in hint(err)
    assert_nothing_ran(home)
    sources = home.root / "cache" / ".sources"
    assert not sources.exists() or list(sources.iterdir()) == []


def test_git_source_pinned_to_a_short_sha_is_refused(home: Home, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    head = make_repo(repo)
    registry = point_registry_at(home, repo, head[:12])
    err = fails(home, "plan", "remote hello")
    assert first_line(err).startswith(f"error: {registry}:4: source 'remote' pins rev ")
    assert "not a full commit sha" in first_line(err)
    assert_nothing_ran(home)


@pytest.mark.parametrize("registry_text, message", [
    ("sources:\n  - name: local\n    path: recipes\n    extra: 1\n", ":4: unknown key 'extra' in a local source"),
    ("sources: [\n", "malformed YAML"),
    ("sources:\n  - name: local\n    path: no-such-folder\n", "recipe folder"),
])
def test_bad_registry_file_fails_cleanly(home: Home, registry_text: str, message: str) -> None:
    ok_recipe(home)
    (home.root / "registry.yaml").write_text(registry_text)
    err = fails(home, "run", "get thing")
    assert message in first_line(err)
    assert_nothing_ran(home)


@pytest.mark.parametrize("args, suggestion", [(["runn"], "Did you mean 'run'?"),
                                              (["cache", "lss"], "Did you mean 'ls'?")])
def test_a_mistyped_verb_gets_a_did_you_mean_at_every_level(home: Home, args: list[str], suggestion: str) -> None:
    proc = home.cmx(*args)
    assert proc.returncode == 2 and suggestion in proc.stderr and "Traceback" not in proc.stderr


def test_show_takes_a_querys_words_quoted_or_not(home: Home) -> None:
    home.recipe("get-counter", "name: get-counter\nsummary: counts\ntags: [get, counter]\n")
    assert home.cmx_json("show", "get", "counter")["name"] == "get-counter"
    assert home.cmx_json("show", "get counter")["name"] == "get-counter"
