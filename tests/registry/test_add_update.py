"""`cmx registry add|update|fetch|rm` on real git repositories (a local bare repository is the remote), and the
cmx versions a source states it works with (cmx-source.yaml)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cmx import DISTRIBUTION, __version__
from tests.conftest import Home
from tests.registry.test_registry import commit, git, git_source, make_repo, recipe_yaml, write_registry


class Remote:
    """A bare repository (the URL cmx is given) and a working clone that pushes to it."""

    def __init__(self, root: Path, recipes: dict[str, str]) -> None:
        self.work, _ = make_repo(root / "work", recipes)
        self.url = root / "remote.git"
        git(root, "clone", "-q", "--bare", str(self.work), str(self.url))
        git(self.work, "remote", "add", "origin", str(self.url))

    def head(self, ref: str = "HEAD") -> str:
        return git(self.url, "rev-parse", ref)

    def push(self, recipes: dict[str, str], branch: str = "main", files: dict[str, str] | None = None) -> str:
        git(self.work, "checkout", "-q", branch)
        for rel, text in (files or {}).items():
            (self.work / rel).write_text(text)
        sha = commit(self.work, recipes)
        git(self.work, "push", "-q", "origin", branch)
        return sha


def newer_than_this() -> str:
    """A specifier this cmx does not meet: the next major version on."""
    return f">={int(__version__.split('.')[0]) + 1}.0"


def pinned_rev(registry: Path, name: str) -> str:
    lines = registry.read_text().splitlines()
    start = lines.index(f"  - name: {name}")
    return next(line.split(":", 1)[1].strip() for line in lines[start + 1:] if line.strip().startswith("rev:"))


def error_lines(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error:")]


# --- add ---------------------------------------------------------------------------------------------------------

def test_add_pins_the_sha_of_the_remotes_head_and_fetches_it(home: Home, tmp_path: Path) -> None:
    remote = Remote(tmp_path, {"from-git": recipe_yaml("from-git", "first", "get, remote")})
    head = remote.head()
    registry = write_registry(home)
    out = home.cmx("registry", "add", "extra", str(remote.url), check=True).stdout
    assert out == f"added extra: {remote.url} at {head} (recipes in recipes/) to {registry}\n"
    assert registry.read_text().endswith(f"  - name: extra\n    git: {remote.url}\n    rev: {head}\n"
                                         "    subdir: recipes\n")  # a sha, never the branch it came from
    assert (home.settings.cache / ".sources" / f"extra-{head[:12]}" / ".git").is_dir()
    found = home.cmx_json("find", "remote")
    assert [(r["name"], r["source"], r["summary"]) for r in found] == [("from-git", "extra", "first")]


def test_add_then_update_moves_the_pin_to_a_new_commit_and_says_old_to_new(home: Home, tmp_path: Path) -> None:
    remote = Remote(tmp_path, {"from-git": recipe_yaml("from-git", "first")})
    registry = write_registry(home, header="# kept comment\n")
    home.cmx("registry", "add", "extra", str(remote.url), check=True)
    old = remote.head()
    assert home.cmx("registry", "update", "extra", check=True).stdout == f"extra: {old} (already there)\n"
    new = remote.push({"from-git": recipe_yaml("from-git", "second")})
    before = registry.read_text()
    assert home.cmx("registry", "update", "extra", check=True).stdout == f"extra: {old} -> {new}\n"
    assert registry.read_text() == before.replace(old, new)  # the rev line alone, the comment kept
    assert home.cmx_json("find")[0]["summary"] == "second"
    back = home.cmx_json("registry", "update", "extra", old)  # a given sha: today's pin-this-commit
    assert (back["old"], back["rev"]) == (new, old) and pinned_rev(registry, "extra") == old


def test_a_branch_given_at_add_is_pinned_by_its_sha_and_followed_by_update(home: Home, tmp_path: Path) -> None:
    remote = Remote(tmp_path, {"from-git": recipe_yaml("from-git", "on main")})
    git(remote.work, "checkout", "-q", "-b", "stable")
    stable = remote.push({"from-git": recipe_yaml("from-git", "on stable")}, branch="stable")
    remote.push({"from-git": recipe_yaml("from-git", "main moved")}, branch="main")
    registry = write_registry(home)
    added = home.cmx_json("registry", "add", "extra", str(remote.url), "--branch", "stable")
    assert (added["rev"], added["branch"], added["old"]) == (stable, "stable", None)
    assert "    branch: stable\n" in registry.read_text() and pinned_rev(registry, "extra") == stable
    assert home.cmx("registry", "update", "extra", check=True).stdout == f"extra: {stable} (already there)\n"
    newer = remote.push({"from-git": recipe_yaml("from-git", "stable moved")}, branch="stable")
    assert home.cmx("registry", "update", "extra", check=True).stdout == f"extra: {stable} -> {newer}\n"
    listed = next(s for s in home.cmx_json("registry", "ls") if s["name"] == "extra")
    assert (listed["rev"], listed["branch"]) == (newer, "stable")


def test_add_with_rev_pins_that_commit_and_a_subdir(home: Home, tmp_path: Path) -> None:
    remote = Remote(tmp_path, {"first": recipe_yaml("first")})
    first = remote.head()
    (remote.work / "cmx").mkdir()
    git(remote.work, "mv", "recipes/first", "cmx/first")
    remote.push({})
    write_registry(home)
    home.cmx("registry", "add", "old", str(remote.url), "--rev", first, check=True)
    home.cmx("registry", "add", "moved", str(remote.url), "--subdir", "cmx", check=True)
    assert home.cmx("find").returncode == 1  # both hold `first`: the same recipe name in two sources
    listed = {s["name"]: (s["rev"], s["subdir"]) for s in home.cmx_json("registry", "ls")}
    assert listed["old"] == (first, "recipes") and listed["moved"] == (remote.head(), "cmx")


@pytest.mark.parametrize("args, message", [
    (["extra", "<url>"], "error: <registry> already has a source named 'extra'"),
    (["Extra_Recipes", "<url>"], "error: source name 'Extra_Recipes' is not kebab-case"),
    (["secret", "https://me:hunter2@example.invalid/r.git"],
     "error: the URL of source 'secret' holds a password: the registry file is not a secret store"),
    (["other", "<url>", "--rev", "main"], "error: source 'other': 'main' is not a commit: a pinned checkout needs the "
                                        "full 40-hex sha"),
    (["other", "<url>", "--subdir", "nope"], "error: source 'other': subdir 'nope' does not exist in <url> at <head>"),
    (["other", "<nowhere>"], "error: source 'other': cannot list the branches and tags of <nowhere>"),
])
def test_add_refuses_in_one_line_and_leaves_the_registry_as_it_was(home: Home, tmp_path: Path, args: list[str],
                                                                     message: str) -> None:
    remote = Remote(tmp_path, {"from-git": recipe_yaml("from-git")})
    registry = write_registry(home, git_source(remote.url, remote.head()))
    original = registry.read_text()
    fill = {"<url>": str(remote.url), "<nowhere>": str(tmp_path / "nowhere"), "<head>": remote.head(),
            "<registry>": str(registry)}
    filled = lambda text: re.sub("|".join(map(re.escape, fill)), lambda m: fill[m.group()], text)  # noqa: E731
    proc = home.cmx("registry", "add", *map(filled, args))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    errors = error_lines(proc)
    assert len(errors) == 1 and errors[0].startswith(filled(message))  # (git's own reason may follow)
    assert "hunter2" not in proc.stderr  # the refusal does not print the secret either
    assert registry.read_text() == original


# --- the registry cmx ships --------------------------------------------------------------------------------------

def test_add_while_the_shipped_registry_is_in_force_writes_the_homes_with_the_builtin_source(
        home: Home, tmp_path: Path) -> None:
    from cmx.home import DEFAULT_REGISTRY

    remote = Remote(tmp_path, {"from-git": recipe_yaml("from-git", "from git", "get, remote")})
    registry = home.root / "registry.yaml"
    registry.unlink()
    assert home.cmx("registry", "ls", check=True).stdout.startswith(
        f"registry: {DEFAULT_REGISTRY} (the one cmx ships: the home has no registry.yaml)\n")
    refused = home.cmx("registry", "rm", "builtin")
    assert error_lines(refused) == [f"error: the registry in force is the one cmx ships ({DEFAULT_REGISTRY}), "
                                    "which is not edited"] and not registry.exists()
    home.cmx("registry", "add", "extra", str(remote.url), check=True)
    text = registry.read_text()
    assert "  - name: builtin\n    builtin: true\n  - name: extra\n" in text and "site-packages" not in text
    listed = home.cmx_json("registry", "ls")
    assert [(s["name"], s["kind"]) for s in listed] == [("builtin", "builtin"), ("extra", "git")]
    assert [r["name"] for r in home.cmx_json("find", "remote")] == ["from-git"]


# --- fetch, rm ---------------------------------------------------------------------------------------------------

def test_fetch_checks_out_every_git_source_at_its_pin_and_edits_nothing(home: Home, tmp_path: Path) -> None:
    one = Remote(tmp_path / "one", {"one-recipe": recipe_yaml("one-recipe")})
    two = Remote(tmp_path / "two", {"two-recipe": recipe_yaml("two-recipe")})
    registry = write_registry(home, git_source(one.url, one.head(), "one") + git_source(two.url, two.head(), "two"))
    original = registry.read_text()
    assert home.cmx("find").returncode == 1  # not fetched: find never fetches
    out = home.cmx("registry", "fetch", check=True).stdout
    assert out == f"one fetched at {one.head()}\ntwo fetched at {two.head()}\n"
    assert [r["name"] for r in home.cmx_json("find")] == ["one-recipe", "two-recipe"]
    assert registry.read_text() == original
    local = home.cmx("registry", "fetch", "local")
    assert error_lines(local) == [f"error: 'local' is a local source: nothing to fetch in {registry}"]


def test_rm_removes_only_that_sources_lines(home: Home, tmp_path: Path) -> None:
    remote = Remote(tmp_path, {"from-git": recipe_yaml("from-git")})
    registry = write_registry(home, git_source(remote.url, remote.head()) + "    # about extra\n"
                              + "  - name: more\n    path: more\n", header="# top\n")
    (home.root / "more").mkdir()
    assert home.cmx("registry", "rm", "extra", check=True).stdout == f"removed extra (git) from {registry}\n"
    assert registry.read_text() == "# top\nsources:\n  - name: local\n    path: recipes\n  - name: more\n" \
                                   "    path: more\n"
    home.cmx("registry", "rm", "local", check=True)
    home.cmx("registry", "rm", "more", check=True)
    assert registry.read_text() == "# top\nsources: []\n" and home.cmx_json("registry", "ls") == []
    missing = home.cmx("registry", "rm", "nope")
    assert error_lines(missing) == [f"error: no source named 'nope' in {registry}"]


def test_add_and_rm_on_a_flow_style_registry_rewrite_its_list_in_block_style(home: Home, tmp_path: Path) -> None:
    remote = Remote(tmp_path, {"from-git": recipe_yaml("from-git")})
    registry = home.root / "registry.yaml"
    registry.write_text("# mine\nsources: [{name: local, path: recipes}]\n")
    home.cmx("registry", "add", "extra", str(remote.url), check=True)
    assert registry.read_text() == (f"# mine\nsources:\n  - name: local\n    path: recipes\n  - name: extra\n"
                                    f"    git: {remote.url}\n    rev: {remote.head()}\n    subdir: recipes\n")
    registry.write_text("sources: [{name: local, path: recipes}, {name: gone, path: recipes}]\n")
    home.cmx("registry", "rm", "gone", check=True)
    assert registry.read_text() == "sources:\n  - name: local\n    path: recipes\n"


# --- cmx-source.yaml: which cmx a source works with --------------------------------------------------------------

def test_a_source_written_for_a_newer_cmx_is_refused_with_the_cmx_to_install(home: Home, tmp_path: Path) -> None:
    spec = newer_than_this()
    install = f"pip install '{DISTRIBUTION}{spec}'"
    refusal = f"recipe source 'extra' needs cmx {spec} (this is {__version__}): {install}"
    remote = Remote(tmp_path, {"from-git": recipe_yaml("from-git", "for this cmx")})
    suits = remote.head()
    registry = write_registry(home)
    newer = remote.push({}, files={"recipes/cmx-source.yaml": f'requires-cmx: "{spec}"\n'})

    at_add = home.cmx("registry", "add", "extra", str(remote.url))  # HEAD is the newer commit
    assert error_lines(at_add) == [f"error: {refusal}"] and "extra" not in registry.read_text()

    home.cmx("registry", "add", "extra", str(remote.url), "--rev", suits, check=True)
    at_update = home.cmx("registry", "update", "extra")
    assert error_lines(at_update) == [f"error: {refusal}"] and pinned_rev(registry, "extra") == suits
    assert "`cmx registry update extra SHA`" in at_update.stderr  # or pin a commit written for this cmx

    registry.write_text(registry.read_text().replace(suits, newer))  # pinned by hand: every command refuses it
    home.cmx("registry", "fetch", "extra")
    for verb in (["find"], ["plan", "from-git"], ["run", "from-git"]):
        proc = home.cmx(*verb)
        assert error_lines(proc) == [f"error: {refusal}"], verb


def test_a_local_source_states_its_cmx_versions_and_an_edit_is_seen_by_a_warm_index(home: Home) -> None:
    home.recipe("alpha", recipe_yaml("alpha"))
    write_registry(home)
    stated = home.recipes / "cmx-source.yaml"
    stated.write_text(f'requires-cmx: ">={__version__}"\n')
    assert [r["name"] for r in home.cmx_json("find")] == ["alpha"]  # suits this cmx: taken, and not a recipe
    assert [r["name"] for r in home.cmx_json("find")] == ["alpha"]  # warm
    stated.write_text(f'requires-cmx: "{newer_than_this()}"\n')
    proc = home.cmx("find")
    assert error_lines(proc) == [f"error: recipe source 'local' needs cmx {newer_than_this()} (this is {__version__}):"
                                 f" pip install '{DISTRIBUTION}{newer_than_this()}'"]
    assert "cmx registry update" not in proc.stderr  # a local folder has no commit to pin instead
    stated.write_text('requires-cmx: "0.2 or later"\n')
    bad = home.cmx("find")
    assert error_lines(bad) == [f"error: {stated}:1: requires-cmx '0.2 or later' of recipe source 'local' is not a "
                                "version specifier"]
    stated.write_text('requires-cmx: ">=0.1"\nmaintainer: me\n')
    unknown = home.cmx("find")
    assert error_lines(unknown) == [f"error: {stated}:2: unknown key 'maintainer' in cmx-source.yaml of recipe "
                                    "source 'local'"]
    stated.unlink()
    assert [r["name"] for r in home.cmx_json("find")] == ["alpha"]  # no file: taken as before
