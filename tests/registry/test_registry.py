"""cmx/registry: the persistent recipe index, local and pinned git sources, `cmx registry`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cmx.errors import RegistryError
from cmx.registry.index import open_index
from tests.conftest import CMX, Home

GIT = ["git", "-c", "user.name=cmx test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false",
       "-c", "init.defaultBranch=main"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def recipe_yaml(name: str, summary: str = "from git", tags: str = "") -> str:
    return f"name: {name}\nsummary: {summary}\ntags: [{tags or name}]\n"


def make_repo(root: Path, recipes: dict[str, str], run_py: dict[str, str] | None = None) -> tuple[Path, str]:
    """A real git repository with recipes/<name>/recipe.yaml; returns (path, sha of HEAD)."""
    root.mkdir(parents=True)
    git(root, "init", "-q")
    return root, commit(root, recipes, run_py)


def commit(repo: Path, recipes: dict[str, str], run_py: dict[str, str] | None = None) -> str:
    for name, text in recipes.items():
        folder = repo / "recipes" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "recipe.yaml").write_text(text)
    for name, text in (run_py or {}).items():
        (repo / "recipes" / name / "run.py").write_text(text)
    (repo / "README.md").write_text("not a recipe\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "recipes")
    return git(repo, "rev-parse", "HEAD")


def write_registry(home: Home, extra: str = "", header: str = "") -> Path:
    path = home.root / "registry.yaml"
    path.write_text(header + "sources:\n  - name: local\n    path: recipes\n" + extra)
    return path


def git_source(url: Path, rev: str, name: str = "extra") -> str:
    return f"  - name: {name}\n    git: {url}\n    rev: {rev}\n    subdir: recipes\n"


def cli(home: Home, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CMX, *args], env={**home.env, **(env or {})}, cwd=home.root, capture_output=True,
                          text=True, timeout=120)


def names(found: object) -> list[str]:
    assert isinstance(found, list)
    return sorted(r["name"] for r in found)


# --- the index -------------------------------------------------------------------------------

def test_index_is_persisted_under_cache_index_and_not_rewritten_when_nothing_changed(home: Home) -> None:
    home.recipe("alpha", recipe_yaml("alpha", "first"))
    assert names(home.cmx_json("find")) == ["alpha"]
    files = sorted((home.settings.cache / ".index").glob("*.pickle"))
    assert [f.name.split(".", 1)[1] for f in files] == ["pickle", "recipes.pickle"]  # small file + recipes
    stamps = [f.stat().st_mtime_ns for f in files]
    assert names(home.cmx_json("find")) == ["alpha"]
    assert home.cmx("plan", "alpha").returncode == 0
    assert [f.stat().st_mtime_ns for f in files] == stamps  # warm loads only read them


def test_a_warm_index_reparses_only_the_recipe_files_that_changed(home: Home) -> None:
    a = home.recipe("alpha", recipe_yaml("alpha", "summary one"))
    b = home.recipe("beta", recipe_yaml("beta", "summary one"))
    assert open_index(home.settings).info("beta").summary == "summary one"  # cold: builds the index
    # change beta's text but not its stat (same size, same mtime): a re-parse would see it
    b_yaml = b / "recipe.yaml"
    st = b_yaml.stat()
    b_yaml.write_text(recipe_yaml("beta", "summary TWO"))
    os.utime(b_yaml, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert b_yaml.stat().st_size == st.st_size
    (a / "recipe.yaml").write_text(recipe_yaml("alpha", "edited summary"))
    index = open_index(home.settings)
    assert index.info("alpha").summary == "edited summary"  # the changed file was re-parsed
    assert index.info("beta").summary == "summary one"  # the unchanged-looking one was reused from the index
    assert index.get("beta").summary == "summary one"


def test_the_index_sees_edits_deletions_and_new_recipes(home: Home) -> None:
    import shutil

    home.recipe("alpha", recipe_yaml("alpha", "old", "get, alpha"))
    home.recipe("beta", recipe_yaml("beta", "b", "get, beta"))
    assert names(home.cmx_json("find", "get")) == ["alpha", "beta"]
    home.recipe("alpha", recipe_yaml("alpha", "a new summary, longer than before", "get, alpha, extra-tag"))
    found = home.cmx_json("find", "extra-tag")
    assert names(found) == ["alpha"] and found[0]["summary"] == "a new summary, longer than before"
    shutil.rmtree(home.recipes / "beta")
    home.recipe("gamma", recipe_yaml("gamma", "c", "get, gamma"))
    assert names(home.cmx_json("find", "get")) == ["alpha", "gamma"]
    assert home.cmx("run", "beta").returncode != 0
    (home.recipes / "gamma" / "run.py").write_text("def run(ctx):\n    return {}\n")
    assert home.cmx_json("show", "gamma")["name"] == "gamma"
    assert (home.settings.cache / ".index").is_dir()


def test_a_broken_recipe_is_reported_with_file_and_line(home: Home) -> None:
    home.recipe("alpha", "name: alpha\nsummary: s\ntags: [alpha]\nbogus: 1\n")
    proc = home.cmx("find")
    assert proc.returncode == 1
    assert f"{home.recipes / 'alpha' / 'recipe.yaml'}:4" in proc.stderr and "bogus" in proc.stderr


# --- git sources -----------------------------------------------------------------------------

def test_git_source_recipes_are_found_and_checked_out_under_cache_sources(home: Home, tmp_path: Path) -> None:
    repo, sha = make_repo(tmp_path / "repo", {"from-git": recipe_yaml("from-git", "from git", "get, remote")},
                          {"from-git": "def run(ctx):\n    return {'where': __file__}\n"})
    (repo / "recipes" / "from-git" / "recipe.yaml").write_text(
        recipe_yaml("from-git", "from git", "get, remote") + "outputs:\n  where: {type: str}\n")
    sha = commit(repo, {})
    home.recipe("here", recipe_yaml("here", "local", "get, here"))
    write_registry(home, git_source(repo, sha))
    home.cmx("registry", "fetch", "extra")
    found = home.cmx_json("find", "get")
    assert names(found) == ["from-git", "here"]
    remote = next(r for r in found if r["name"] == "from-git")
    checkout = home.settings.cache / ".sources" / f"extra-{sha[:12]}"
    assert remote["source"] == "extra"
    assert remote["path"] == str(checkout / "recipes" / "from-git")
    assert git(checkout, "rev-parse", "HEAD") == sha
    result = home.cmx_json("run", "remote")
    assert result["outputs"]["where"] == str(checkout / "recipes" / "from-git" / "run.py")
    assert not list((home.settings.cache / ".sources").glob(".tmp-*"))


def test_find_and_plan_never_fetch_a_source_and_name_the_command_that_does(home: Home, tmp_path: Path) -> None:
    repo, sha = make_repo(tmp_path / "repo", {"from-git": recipe_yaml("from-git", "from git", "get, remote")})
    registry = write_registry(home, git_source(repo, sha))
    for verb in (["find"], ["plan", "remote"], ["show", "from-git"]):
        proc = home.cmx(*verb)
        assert proc.returncode == 1
        assert f"{registry}:" in proc.stderr and "git source 'extra' is not fetched yet" in proc.stderr
        assert "cmx registry fetch extra" in proc.stderr
    assert not (home.settings.cache / ".sources").exists()
    listed = home.cmx_json("registry", "ls")
    assert [(s["name"], s["recipes"]) for s in listed] == [("local", 0), ("extra", None)]


def test_the_first_run_fetches_a_missing_source_and_says_so(home: Home, tmp_path: Path) -> None:
    repo, sha = make_repo(tmp_path / "repo", {"from-git": recipe_yaml("from-git", "from git", "get, remote")})
    write_registry(home, git_source(repo, sha))
    proc = home.cmx("run", "remote", "--progress", "none")
    assert proc.returncode == 0, proc.stderr
    assert f"fetching recipe source 'extra' ({repo} at {sha})" in proc.stderr
    assert home.cmx("plan", "remote").returncode == 0  # fetched now: plan reads it
    again = home.cmx("run", "remote", "--progress", "none")
    assert "fetching" not in again.stderr


def test_a_git_source_pinned_to_a_branch_is_refused_for_reproducibility(home: Home, tmp_path: Path) -> None:
    repo, _ = make_repo(tmp_path / "repo", {"from-git": recipe_yaml("from-git")})
    registry = write_registry(home, git_source(repo, "main"))
    proc = home.cmx("find")
    assert proc.returncode == 1
    assert "not a full commit sha" in proc.stderr
    assert "branch or tag moves" in proc.stderr
    assert f"{registry}:" in proc.stderr
    assert not (home.settings.cache / ".sources").exists()  # refused before any fetch


def test_an_unknown_commit_is_a_clear_error(home: Home, tmp_path: Path) -> None:
    repo, sha = make_repo(tmp_path / "repo", {"from-git": recipe_yaml("from-git")})
    missing = "0123456789abcdef0123456789abcdef01234567"
    assert missing != sha
    write_registry(home, git_source(repo, missing))
    proc = home.cmx("registry", "fetch", "extra")
    assert proc.returncode == 1
    assert f"commit {missing} was not found" in proc.stderr and "extra" in proc.stderr
    assert "Traceback" not in proc.stderr
    sources = home.settings.cache / ".sources"
    assert not sources.exists() or not any(sources.iterdir())  # no half checkout left behind


def test_a_git_source_that_cannot_be_fetched_is_a_clear_error(home: Home, tmp_path: Path) -> None:
    write_registry(home, git_source(tmp_path / "no-such-repo", "0123456789abcdef0123456789abcdef01234567"))
    proc = home.cmx("registry", "fetch", "extra")
    assert proc.returncode == 1
    assert "source 'extra': cannot fetch" in proc.stderr and "internal error" not in proc.stderr


def test_registry_ls_lists_sources_with_recipe_counts(home: Home, tmp_path: Path) -> None:
    repo, sha = make_repo(tmp_path / "repo", {"g-one": recipe_yaml("g-one"), "g-two": recipe_yaml("g-two")})
    home.recipe("here", recipe_yaml("here"))
    registry = write_registry(home, git_source(repo, sha))
    home.cmx("registry", "fetch", "extra", check=True)
    listed = home.cmx_json("registry", "ls")
    assert listed == [
        {"name": "local", "kind": "local", "path": str(home.recipes), "git": None, "rev": None, "branch": None,
         "subdir": None, "recipes": 1},
        {"name": "extra", "kind": "git", "path": None, "git": str(repo), "rev": sha, "branch": None,
         "subdir": "recipes", "recipes": 2},
    ]
    text = home.cmx("registry", "ls", check=True).stdout
    assert f"registry: {registry}" in text and sha in text and "extra" in text


def test_registry_update_fetches_then_rewrites_only_the_rev_line(home: Home, tmp_path: Path) -> None:
    repo, old = make_repo(tmp_path / "repo", {"from-git": recipe_yaml("from-git", "version one")})
    new = commit(repo, {"from-git": recipe_yaml("from-git", "version two")})
    header = "# my registry\n# keep this comment\n"
    registry = write_registry(home, git_source(repo, old) + "    # rev above is pinned on purpose\n", header=header)
    assert "extra fetched at" in home.cmx("registry", "fetch", "extra", check=True).stdout
    assert home.cmx_json("find")[0]["summary"] == "version one"
    before = registry.read_text().splitlines()
    out = home.cmx("registry", "update", "extra", new, check=True).stdout
    assert out == f"extra: {old} -> {new}\n"
    after = registry.read_text().splitlines()
    changed = [(b, a) for b, a in zip(before, after, strict=False) if b != a]
    assert len(before) == len(after) and changed == [(f"    rev: {old}", f"    rev: {new}")]
    assert (home.settings.cache / ".sources" / f"extra-{new[:12]}" / ".git").is_dir()  # fetched
    assert home.cmx_json("find")[0]["summary"] == "version two"


def test_registry_update_edits_a_flow_style_entry_with_a_relative_git_path(home: Home, tmp_path: Path) -> None:
    repo, old = make_repo(tmp_path / "repo", {"from-git": recipe_yaml("from-git", "version one")})
    new = commit(repo, {"from-git": recipe_yaml("from-git", "version two")})
    registry = home.root / "registry.yaml"
    line = f"  - {{name: extra, git: ../repo, rev: {old}, subdir: recipes}}  # pinned\n"
    registry.write_text("sources:\n  - name: local\n    path: recipes\n" + line)
    home.cmx("registry", "fetch", "extra", check=True)
    assert home.cmx_json("find")[0]["summary"] == "version one"  # ../repo is relative to registry.yaml
    home.cmx("registry", "update", "extra", new, check=True)
    assert registry.read_text().splitlines()[-1] == line.rstrip("\n").replace(old, new)
    assert home.cmx_json("find")[0]["summary"] == "version two"


def test_registry_update_refuses_a_branch_and_an_unknown_commit_without_touching_the_file(
        home: Home, tmp_path: Path) -> None:
    repo, sha = make_repo(tmp_path / "repo", {"from-git": recipe_yaml("from-git")})
    registry = write_registry(home, git_source(repo, sha), header="# comment\n")
    original = registry.read_text()
    branch = home.cmx("registry", "update", "extra", "main")
    assert branch.returncode == 1 and "branch or tag moves" in branch.stderr
    missing = "fedcba9876543210fedcba9876543210fedcba98"
    unknown = home.cmx("registry", "update", "extra", missing)
    assert unknown.returncode == 1 and f"commit {missing} was not found" in unknown.stderr
    nosuch = home.cmx("registry", "update", "nope", sha)
    assert nosuch.returncode == 1 and "no source named 'nope'" in nosuch.stderr
    local = home.cmx("registry", "update", "local", sha)
    assert local.returncode == 1 and "local folder" in local.stderr
    assert registry.read_text() == original


# --- choosing a registry, name clashes -------------------------------------------------------

def test_registry_option_and_cmx_registry_select_another_registry(home: Home, tmp_path: Path) -> None:
    home.recipe("home-recipe", recipe_yaml("home-recipe"))
    other_dir = tmp_path / "elsewhere"
    (other_dir / "mine" / "other-recipe").mkdir(parents=True)
    (other_dir / "mine" / "other-recipe" / "recipe.yaml").write_text(recipe_yaml("other-recipe"))
    other = other_dir / "other.yaml"
    other.write_text("sources:\n  - name: mine\n    path: mine\n")  # relative to the file, not the cwd
    assert names(home.cmx_json("find")) == ["home-recipe"]
    assert names(home.cmx_json("--registry", str(other), "find")) == ["other-recipe"]
    assert names(home.cmx_json("find", "--registry", str(other))) == ["other-recipe"]
    via_env = cli(home, "find", "--json", env={"CMX_REGISTRY": str(other)})
    assert names(json.loads(via_env.stdout)) == ["other-recipe"]
    ls = json.loads(cli(home, "registry", "ls", "--json", env={"CMX_REGISTRY": str(other)}).stdout)
    assert [s["name"] for s in ls] == ["mine"]
    missing = home.cmx("--registry", str(tmp_path / "nope.yaml"), "find")
    assert missing.returncode == 1 and "does not exist" in missing.stderr


def test_the_same_recipe_name_in_two_sources_is_an_error_naming_both(home: Home, tmp_path: Path) -> None:
    first = home.recipe("twin", recipe_yaml("twin", "local one"))
    repo, sha = make_repo(tmp_path / "repo", {"twin": recipe_yaml("twin", "git one")})
    write_registry(home, git_source(repo, sha))
    home.cmx("registry", "fetch", "extra")
    proc = home.cmx("find")
    assert proc.returncode == 1
    second = home.settings.cache / ".sources" / f"extra-{sha[:12]}" / "recipes" / "twin"
    assert "two recipes are named 'twin'" in proc.stderr
    assert str(first) in proc.stderr and str(second) in proc.stderr


def test_the_same_recipe_name_in_two_local_sources_is_an_error(home: Home, tmp_path: Path) -> None:
    home.recipe("twin", recipe_yaml("twin"))
    (home.root / "more" / "twin").mkdir(parents=True)
    (home.root / "more" / "twin" / "recipe.yaml").write_text(recipe_yaml("twin"))
    write_registry(home, "  - name: more\n    path: more\n")
    with pytest.raises(RegistryError, match="two recipes are named 'twin'"):
        open_index(home.settings)
