"""Which registry cmx reads: --registry / CMX_REGISTRY, else the home's registry.yaml, else the one cmx ships, whose
builtin source is the recipes of the cmx that runs (a checkout's recipes/, an installed package's cmx/_recipes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from cmx.home import CHECKOUT, DEFAULT_REGISTRY, builtin_recipes, locations
from tests.conftest import REPO
from tests.registry.test_add_update import Remote
from tests.registry.test_registry import recipe_yaml


def test_the_registry_in_force_is_the_given_one_else_the_homes_else_the_shipped_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"CMX_HOME": str(home), "HOME": str(tmp_path / "user")}
    assert locations(None, env) == (DEFAULT_REGISTRY, str(home / "cache"), str(home / "runs"))
    (home / "registry.yaml").write_text("sources: []\n")
    assert locations(None, env)[0] == str(home / "registry.yaml")
    missing = str(tmp_path / "none.yaml")  # given: used even when missing (its reader says so)
    assert locations(missing, env)[0] == missing
    assert locations(None, {**env, "CMX_REGISTRY": missing})[0] == missing


def test_without_cmx_home_a_checkout_reads_its_own_registry(tmp_path: Path) -> None:
    assert (Path(CHECKOUT) / "registry.yaml").is_file()  # this test runs from a checkout
    assert locations(None, {"HOME": str(tmp_path)})[0] == str(Path(CHECKOUT) / "registry.yaml")


def test_the_shipped_registry_lists_the_builtin_recipes_of_this_checkout(tmp_path: Path) -> None:
    home = tmp_path / "empty-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CMX_")}
    proc = subprocess.run([sys.executable, "-m", "cmx", "registry", "ls", "--json"], env={**env, "CMX_HOME": str(home),
                          "PYTHONPATH": str(REPO)}, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    [source] = json.loads(proc.stdout)
    assert (source["name"], source["kind"], source["path"]) == ("builtin", "builtin", str(REPO / "recipes"))
    assert source["recipes"] == len(list((REPO / "recipes").glob("*/recipe.yaml")))
    assert builtin_recipes() == str(REPO / "recipes")


def installed(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """This cmx laid out as an installed package: site/cmx with its recipes in cmx/_recipes (as the wheel has them)
    and no registry.yaml beside it; a user whose ~ has no .cmx; a working folder with no checkout."""
    site = tmp_path / "site"
    shutil.copytree(REPO / "cmx", site / "cmx", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("shipped-one", "shipped-two"):
        (site / "cmx" / "_recipes" / name).mkdir(parents=True)
        (site / "cmx" / "_recipes" / name / "recipe.yaml").write_text(recipe_yaml(name, "shipped", f"shipped, {name}"))
    user = tmp_path / "user"
    user.mkdir()
    work = tmp_path / "anywhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CMX_", "PYTHON"))}
    env.update(PYTHONPATH=str(site), HOME=str(user))
    return site / "cmx", env, work


def run_installed(env: dict[str, str], work: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cmx", *args], env=env, cwd=work, capture_output=True, text=True,
                          timeout=120)


def test_an_installed_cmx_finds_its_builtin_recipes_in_any_folder_and_keeps_its_cache_in_home(tmp_path: Path) -> None:
    package, env, work = installed(tmp_path)
    user = Path(env["HOME"])
    listed = run_installed(env, work, "registry", "ls")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        f"registry: {package / 'default-registry.yaml'} (the one cmx ships: the home has no registry.yaml)",
        "NAME     KIND     RECIPES  WHERE",
        f"builtin  builtin  2        {package / '_recipes'}"]
    found = run_installed(env, work, "find", "shipped", "--json")
    assert found.returncode == 0, found.stderr
    assert [(r["name"], r["source"], r["path"]) for r in json.loads(found.stdout)] == [
        ("shipped-one", "builtin", str(package / "_recipes" / "shipped-one")),
        ("shipped-two", "builtin", str(package / "_recipes" / "shipped-two"))]
    assert (user / ".cmx" / "cache" / ".index").is_dir() and not (user / ".cmx" / "registry.yaml").exists()
    assert not list(work.iterdir())  # nothing written where it ran


def test_registry_add_from_an_installed_cmx_writes_home_registry_naming_builtin_by_kind(tmp_path: Path) -> None:
    package, env, work = installed(tmp_path)
    remote = Remote(tmp_path / "git", {"from-git": recipe_yaml("from-git", "from git", "shipped, remote")})
    added = run_installed(env, work, "registry", "add", "extra", str(remote.url))
    assert added.returncode == 0, added.stderr
    registry = Path(env["HOME"]) / ".cmx" / "registry.yaml"
    assert f"to {registry}" in added.stdout
    text = registry.read_text()
    assert "  - name: builtin\n    builtin: true\n" in text and str(package) not in text  # no path into the package
    found = run_installed(env, work, "find", "shipped", "--json")
    assert [r["name"] for r in json.loads(found.stdout)] == ["from-git", "shipped-one", "shipped-two"]
    # another install of cmx (a new venv) reads the same registry: its builtin source is its own recipes
    shutil.move(package.parent, tmp_path / "site2")
    moved = run_installed({**env, "PYTHONPATH": str(tmp_path / "site2")}, work, "find", "shipped", "--json")
    assert moved.returncode == 0, moved.stderr
    assert {r["path"] for r in json.loads(moved.stdout) if r["source"] == "builtin"} == {
        str(tmp_path / "site2" / "cmx" / "_recipes" / n) for n in ("shipped-one", "shipped-two")}
