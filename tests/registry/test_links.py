"""A recipe source runs only what it holds: a recipe folder, recipe.yaml or run.py (or a git source's subdir) that is
a symbolic link leaving the source, or pointing at nothing, is refused when the source is indexed, in one line that
names the recipe and the link. Links that stay inside the source are fine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import REPO, Home
from tests.registry.test_registry import commit, git, git_source, make_repo, recipe_yaml, write_registry

RUN_PY = "def run(ctx):\n    return {}\n"


def outside_recipe(tmp_path: Path, name: str = "evil") -> Path:
    """A recipe folder outside every source, with a run.py that leaves a mark when it runs."""
    folder = tmp_path / "outside" / name
    folder.mkdir(parents=True)
    (folder / "recipe.yaml").write_text(recipe_yaml(name, "outside", "get, linked"))
    mark = tmp_path / "ran-outside"
    (folder / "run.py").write_text(f"def run(ctx):\n    open({str(mark)!r}, 'w').close()\n    return {{}}\n")
    return folder


def linked_repo(tmp_path: Path, link: str, target: Path | str) -> tuple[Path, str]:
    """A git repository with recipe `linked` whose `link` (relative to the repo) is a committed symbolic link."""
    repo, _ = make_repo(tmp_path / "repo", {"linked": recipe_yaml("linked", "in git", "get, linked")},
                        {"linked": RUN_PY})
    path = repo / link
    if path.is_dir() and not path.is_symlink():
        import shutil

        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    os.symlink(target, path)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "link")
    return repo, git(repo, "rev-parse", "HEAD")


def refused(home: Home, *args: str) -> str:
    proc = home.cmx(*args)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


@pytest.mark.parametrize("link", ["recipes/linked/run.py", "recipes/linked"])
def test_a_git_sources_link_to_code_outside_its_commit_is_refused_by_find_plan_and_run(
        home: Home, tmp_path: Path, link: str) -> None:
    outside = outside_recipe(tmp_path, "linked")
    target = outside / "run.py" if link.endswith("run.py") else outside
    repo, sha = linked_repo(tmp_path, link, target)
    write_registry(home, git_source(repo, sha))
    home.cmx("registry", "fetch", "extra", check=True)
    shown = link.removeprefix("recipes/")
    for verb in (["find", "linked"], ["plan", "linked"], ["run", "linked", "--progress", "none"]):
        line = refused(home, *verb)
        assert f"recipe 'linked': {shown} is a symbolic link to {str(target)!r}, outside the source's recipe " \
               "folder" in line, line
    assert not (tmp_path / "ran-outside").exists()


def test_a_dangling_run_py_is_an_error_not_a_step_that_ran(home: Home, tmp_path: Path) -> None:
    repo, sha = linked_repo(tmp_path, "recipes/linked/run.py", "gone.py")
    write_registry(home, git_source(repo, sha))
    home.cmx("registry", "fetch", "extra", check=True)
    line = refused(home, "run", "linked", "--progress", "none")
    assert "recipe 'linked': linked/run.py is a symbolic link to 'gone.py', which does not exist" in line


def test_a_git_sources_subdir_that_links_out_of_the_checkout_is_refused(home: Home, tmp_path: Path) -> None:
    outside = outside_recipe(tmp_path, "linked").parent
    repo, sha = linked_repo(tmp_path, "recipes", outside)
    write_registry(home, git_source(repo, sha))
    line = refused(home, "registry", "fetch", "extra")
    assert f"subdir 'recipes' is not inside {repo} at {sha} (recipes is a symbolic link to {str(outside)!r})" in line
    assert not (tmp_path / "ran-outside").exists()


def test_a_local_sources_recipe_folder_linked_out_of_it_is_refused(home: Home, tmp_path: Path) -> None:
    outside = outside_recipe(tmp_path, "linked")
    os.symlink(outside, home.recipes / "linked")
    line = refused(home, "find")
    assert f"{home.recipes / 'linked'}: recipe 'linked': linked is a symbolic link to {str(outside)!r}" in line


def test_a_recipe_yaml_linked_out_of_the_source_is_refused(home: Home, tmp_path: Path) -> None:
    outside = outside_recipe(tmp_path, "linked")
    (home.recipes / "linked").mkdir()
    os.symlink(outside / "recipe.yaml", home.recipes / "linked" / "recipe.yaml")
    assert "linked/recipe.yaml is a symbolic link to" in refused(home, "find")


def test_links_that_stay_inside_the_source_are_followed(home: Home, tmp_path: Path) -> None:
    repo, _ = make_repo(tmp_path / "repo", {"linked": recipe_yaml("linked", "in git", "get, linked")})
    shared = repo / "recipes" / "_shared"
    shared.mkdir()
    (shared / "run.py").write_text("def run(ctx):\n    return {'from': 'shared'}\n")
    os.symlink("../_shared/run.py", repo / "recipes" / "linked" / "run.py")
    (repo / "recipes" / "linked" / "recipe.yaml").write_text(
        recipe_yaml("linked", "in git", "get, linked") + "outputs:\n  from: {type: str}\n")
    sha = commit(repo, {})
    write_registry(home, git_source(repo, sha))
    home.cmx("registry", "fetch", "extra", check=True)
    assert home.cmx_json("run", "linked")["outputs"] == {"from": "shared"}


def test_this_checkouts_own_recipes_hold_no_link_out_of_them() -> None:
    root = REPO / "recipes"
    links = [p for p in root.rglob("*") if p.is_symlink()]
    leaving = [f"{p} -> {os.readlink(p)}" for p in links
               if not os.path.realpath(p).startswith(os.path.realpath(root) + os.sep) or not p.exists()]
    assert leaving == []
