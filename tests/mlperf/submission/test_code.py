"""A packaged submission's src/ (cmx.mlperf.submission.code): the recipes that ran, as the runs' lockfiles pin
them, with the bases they extend, grouped by source; the lockfiles; the cmx package; a provenance file naming the
distribution, its version and each source's commit; and a README that lists exactly what src/ holds.

The recipe sources are real folders and real git repositories made in tmp_path, and the lock of the last tests
is made by cmx itself (`api.lock`) from a real registry, as `cmx run` leaves it beside run.json.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from cmx import DISTRIBUTION, __version__
from cmx.execute.lockfile import Lock, LockedSource, locked_source, source_commit
from cmx.mlperf.submission.code import _direct, contents
from cmx.mlperf.submission.package import package
from cmx.mlperf.submission.sources import PackageRequest, SubmissionRefused
from cmx.recipe.load import load_recipe
from cmx.registry.sources import Source
from tests.conftest import REPO, Home
from tests.submission_trees import RAN, RUN_RECORD, USER_SYSTEM, builtin_source, cmx_results

GIT = ("git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main")
PASSWORD = "s3cret-t0ken"


def git(repo: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def repo_of_recipes(root: Path, recipes: dict[str, str], run_py: dict[str, str] | None = None) -> tuple[Path, str]:
    """A real git repository holding recipes/<name>/ (and a README that is no recipe); (its recipes folder, HEAD)."""
    for name, text in recipes.items():
        (root / "recipes" / name).mkdir(parents=True)
        (root / "recipes" / name / "recipe.yaml").write_text(text)
    for name, text in (run_py or {}).items():
        (root / "recipes" / name / "run.py").write_text(text)
    (root / "README.md").write_text("not a recipe\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "recipes")
    return root / "recipes", git(root, "rev-parse", "HEAD")


def package_results(tmp_path: Path, results: Path, division: str = "closed") -> Path:
    system = tmp_path / "system.yaml"
    system.write_text(yaml.safe_dump(USER_SYSTEM))
    package(PackageRequest(results_dir=results, out_dir=tmp_path / "out", submitter="cmx-test", division=division,
                           system_file=system))
    return tmp_path / "out" / division / "cmx-test" / "src"


def refused(tmp_path: Path, results: Path) -> str:
    with pytest.raises(SubmissionRefused) as info:
        package_results(tmp_path, results)
    assert not (tmp_path / "out" / "closed").exists()  # nothing written
    return info.value.render()


@pytest.fixture
def team(tmp_path: Path) -> tuple[LockedSource, str]:
    """A git source as `cmx registry add team URL --rev SHA` pins it, the URL carrying a password, checked out:
    recipe `greet` extends `greet-base`, which has the run.py; `unused` is in the repository but never ran."""
    folder, sha = repo_of_recipes(tmp_path / "team", {
        "greet-base": "name: greet-base\nsummary: base\nabstract: true\n",
        "greet": "name: greet\nsummary: greets\ntags: [greet]\nextends: greet-base\n",
        "unused": "name: unused\nsummary: never ran\ntags: [unused]\n"},
        run_py={"greet-base": "def run(ctx):\n    return {}\n"})
    source = Source(name="team", git=f"https://bot:{PASSWORD}@git.example.com/team/recipes.git", rev=sha)
    return locked_source(source, folder, source_commit(source, folder)), sha


# --- what src/ holds ------------------------------------------------------------------------------------------


def test_src_holds_each_recipe_that_ran_with_its_bases_and_nothing_else_of_the_registry(tmp_path: Path, team):
    source, _ = team
    results = cmx_results(tmp_path / "results", ran=[(builtin_source(), RAN), (source, ["greet"])])
    src = package_results(tmp_path, results)
    recipes = sorted(str(p.relative_to(src / "recipes")) for p in (src / "recipes").glob("*/*"))
    assert recipes == ["builtin/app-mlperf-inference", "builtin/app-mlperf-inference-llama2",
                       "builtin/detect-system", "team/greet", "team/greet-base"]
    # copied byte for byte, and each loads back to the digest the run's lock pins
    assert ((src / "recipes/builtin/app-mlperf-inference/run.py").read_bytes() ==
            (REPO / "recipes/app-mlperf-inference/run.py").read_bytes())
    lock = Lock.read(src / "locks" / f"{RUN_RECORD}.lock")
    for step in lock.steps:
        assert load_recipe(src / "recipes" / step.source / step.recipe, step.source)[0].digest == step.digest
    assert sorted(p.name for p in src.iterdir()) == ["README.md", "cmx", "cmx-provenance.json", "locks", "recipes"]
    assert (src / "cmx/mlperf/loadgen/harness.py").read_bytes() == (REPO / "cmx/mlperf/loadgen/harness.py").read_bytes()
    assert not list(src.rglob("__pycache__")) and not (src / "cmx" / "_recipes").exists()


def test_the_readme_names_exactly_the_paths_src_holds(tmp_path: Path, team):
    source, _ = team
    src = package_results(tmp_path, cmx_results(tmp_path / "results", ran=[(builtin_source(), RAN),
                                                                           (source, ["greet"])]))
    readme = (src / "README.md").read_text()
    holds = readme.split("## What this folder holds", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^- `([^`]+)`", holds, flags=re.M)
    assert listed and all((src / path).exists() for path in listed), listed
    walked = {p.name + ("/" if p.is_dir() else "") for p in src.iterdir()} - {"recipes/", "locks/"}
    walked |= {f"{p.relative_to(src)}/" for p in src.glob("recipes/*/*")} | {str(p.relative_to(src))
                                                                            for p in src.glob("locks/*")}
    assert sorted(listed) == sorted(walked) == sorted(contents(src))
    # every path in backquotes elsewhere in the README is one of them, or a command or a commit
    for quoted in re.findall(r"`([^`\s]+/[^`\s]*)`", readme):
        assert (src / quoted).exists() or quoted.startswith(("https://", "cmx/mlperf/", "git.example.com")), quoted


def test_the_provenance_names_the_version_and_each_sources_commit(tmp_path: Path, team):
    git_source, sha = team
    # a local folder inside a git work tree, and one in none
    (tmp_path / "lab").mkdir()
    lab, lab_sha = repo_of_recipes(tmp_path / "lab", {"probe": "name: probe\nsummary: p\ntags: [probe]\n"})
    loose = tmp_path / "loose"
    (loose / "scratch").mkdir(parents=True)
    (loose / "scratch" / "recipe.yaml").write_text("name: scratch\nsummary: s\ntags: [scratch]\n")
    local = Source(name="lab", path=lab)
    other = Source(name="loose", path=loose)
    results = cmx_results(tmp_path / "results", ran=[
        (builtin_source(), RAN), (git_source, ["greet"]),
        (locked_source(local, lab, source_commit(local, lab)), ["probe"]),
        (locked_source(other, loose, source_commit(other, loose)), ["scratch"])])
    src = package_results(tmp_path, results)
    provenance = json.loads((src / "cmx-provenance.json").read_text())
    assert (provenance["distribution"], provenance["version"]) == (DISTRIBUTION, __version__)
    by_name = {s["name"]: s for s in provenance["sources"]}
    assert by_name["builtin"] | {"recipes": None} == {"name": "builtin", "kind": "builtin", "version": __version__,
                                                      "commit": None, "uncommitted_changes": False, "recipes": None}
    assert by_name["team"] == {"name": "team", "kind": "git", "url": "https://git.example.com/team/recipes.git",
                               "subdir": "recipes", "commit": sha, "uncommitted_changes": False,
                               "recipes": ["greet", "greet-base"]}
    assert (by_name["lab"]["kind"], by_name["lab"]["path"], by_name["lab"]["commit"]) == ("local", str(lab), lab_sha)
    assert (by_name["loose"]["path"], by_name["loose"]["commit"]) == (str(loose), None)
    assert provenance["runs"][0]["lock"] == f"locks/{RUN_RECORD}.lock"
    readme = (src / "README.md").read_text()
    assert f"`pip install '{DISTRIBUTION}[mlperf]=={__version__}'`" in readme  # the results ran on rocm
    assert f"`cmx registry add team https://git.example.com/team/recipes.git --rev {sha}`" in readme
    assert f"`lab`: the local folder `{lab}`, in a git work tree at commit `{lab_sha}`" in readme
    assert f"`cmx run --locked locks/{RUN_RECORD}.lock --input results_dir=RESULTS`" in readme


def test_a_url_password_reaches_no_file_of_the_submission(tmp_path: Path, team):
    source, _ = team
    results = cmx_results(tmp_path / "results", ran=[(builtin_source(), RAN), (source, ["greet"])])
    assert PASSWORD not in (tmp_path / "runs" / RUN_RECORD / "cmx.lock").read_text()  # the run's lock has none
    package_results(tmp_path, results)
    leaked = [p for p in (tmp_path / "out").rglob("*") if p.is_file() and PASSWORD.encode() in p.read_bytes()]
    assert leaked == []
    assert "git.example.com/team/recipes.git" in (tmp_path / "out/closed/cmx-test/src/README.md").read_text()


# --- refusals -------------------------------------------------------------------------------------------------


def test_a_recipe_changed_since_the_run_is_refused_naming_it_and_its_commit(tmp_path: Path, team):
    source, sha = team
    results = cmx_results(tmp_path / "results", ran=[(builtin_source(), RAN), (source, ["greet"])])
    greet = Path(source.folder) / "greet" / "recipe.yaml"
    greet.write_text(greet.read_text().replace("summary: greets", "summary: greets louder"))
    text = refused(tmp_path, results)
    assert re.search(rf"recipe greet \({greet.parent}\) changed since the run: its files hash to [0-9a-f]{{12}}, the "
                     rf"run's lock has [0-9a-f]{{12}}; restore it \(git checkout {sha} in its repository\), or run "
                     "the results again", text), text


def test_a_changed_base_refuses_the_recipe_that_extends_it(tmp_path: Path, team):
    source, _ = team
    results = cmx_results(tmp_path / "results", ran=[(builtin_source(), RAN), (source, ["greet"])])
    (Path(source.folder) / "greet-base" / "run.py").write_text("def run(ctx):\n    return {'x': 1}\n")
    assert "recipe greet (" in refused(tmp_path, results)


def test_a_recipe_gone_from_its_source_is_refused(tmp_path: Path):
    folder = tmp_path / "mine"
    (folder / "solo").mkdir(parents=True)
    (folder / "solo" / "recipe.yaml").write_text("name: solo\nsummary: s\ntags: [solo]\n")
    mine = LockedSource(name="mine", kind="local", folder=str(folder), commit=None)
    results = cmx_results(tmp_path / "results", ran=[(builtin_source(), RAN), (mine, ["solo"])])
    (folder / "solo" / "recipe.yaml").unlink()
    assert f"recipe solo of source mine is no longer in {folder}" in refused(tmp_path, results)


def test_the_lock_of_another_cmx_version_is_refused_naming_the_one_to_install(tmp_path: Path):
    results = cmx_results(tmp_path / "results")
    lock = tmp_path / "runs" / RUN_RECORD / "cmx.lock"
    lock.write_text(lock.read_text().replace(f"cmx_version: {__version__}", "cmx_version: 0.1.9"))
    text = refused(tmp_path, results)
    assert f"the run used cmx 0.1.9, this is cmx {__version__}" in text
    assert f"`pip install '{DISTRIBUTION}==0.1.9'`" in text


# --- a lock cmx made, from a real registry ----------------------------------------------------------------


def test_a_lock_cmx_writes_names_its_sources_and_packages_their_recipes(tmp_path: Path, home: Home):
    from cmx import api

    folder, sha = repo_of_recipes(tmp_path / "shared", {
        "say": "name: say\nsummary: says\ntags: [say]\n"})
    home.recipe("hello", "name: hello\nsummary: hi\ntags: [hello]\ndeps:\n  - tags: say\n")
    (home.root / "registry.yaml").write_text(f"sources:\n  - name: local\n    path: recipes\n"
                                             f"  - name: shared\n    git: {folder.parent}\n    rev: {sha}\n")
    api.index(home.settings, fetch=lambda source: None)  # checks the pinned commit out, as `cmx registry fetch`
    lock = api.lock("hello", settings=home.settings)
    assert {(s.name, s.kind, s.commit) for s in lock.sources} == {("local", "local", None), ("shared", "git", sha)}
    results = cmx_results(tmp_path / "results")
    lock.write(tmp_path / "runs" / RUN_RECORD / "cmx.lock")  # what `cmx run "hello"` would have left
    src = package_results(tmp_path, results)
    assert sorted(str(p.relative_to(src / "recipes")) for p in (src / "recipes").glob("*/*")) == [
        "local/hello", "shared/say"]
    shared = next(s for s in json.loads((src / "cmx-provenance.json").read_text())["sources"] if s["name"] == "shared")
    assert (shared["url"], shared["commit"]) == (str(folder.parent), sha)


# --- how cmx was installed ------------------------------------------------------------------------------------


@pytest.mark.parametrize("direct, said", [
    ({"url": "file:///home/me/dist/cmx_bench-0.2.0-py3-none-any.whl", "archive_info": {"hashes": {}}},
     {"how": "installed from a wheel", "file": "cmx_bench-0.2.0-py3-none-any.whl"}),
    ({"url": "file:///home/me/cmx", "dir_info": {"editable": True}}, {"how": "installed editable from a local folder"}),
    ({"url": f"https://bot:{PASSWORD}@git.example.com/cmx.git", "vcs_info": {"vcs": "git", "commit_id": "ab" * 20}},
     {"how": "installed from a git repository", "url": "https://git.example.com/cmx.git", "commit": "ab" * 20}),
])
def test_how_cmx_was_installed_is_read_from_its_direct_url_record(direct: dict, said: dict):
    """PEP 610's direct_url.json, as pip writes it for a wheel file, an editable folder and a git URL."""
    assert _direct(direct) == said
