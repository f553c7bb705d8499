"""registry.yaml: the list of recipe sources, each a local folder, a git repo pinned to a commit, or the recipes
this cmx ships."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from cmx.errors import RegistryError
from cmx.home import builtin_recipes
from cmx.recipe.query import is_kebab
from cmx.tools.git import is_commit_sha

if TYPE_CHECKING:  # YAML is imported only when a registry file is read (not by a warm `cmx find`)
    from cmx.recipe.yamlload import LocDict

LOCAL_KEYS = ("name", "path")
GIT_KEYS = ("name", "git", "rev", "branch", "subdir")
BUILTIN_KEYS = ("name", "builtin")


class Source(NamedTuple):  # a NamedTuple: it is unpickled by `cmx find`, which must not import dataclasses
    """One recipe source. `path` is set for a local folder; `git`/`rev` for a pinned repo; `builtin` for the recipes
    this cmx ships (their folder is looked up when used, so a registry never holds a path into an installed
    package, which a new venv would leave stale)."""

    name: str
    path: Path | None = None
    git: str | None = None
    rev: str | None = None
    subdir: str = "recipes"
    line: int = 0
    branch: str | None = None  # a git source's branch, which `cmx registry update NAME` follows (None: the HEAD)
    builtin: bool = False

    @property
    def kind(self) -> str:
        return "builtin" if self.builtin else "git" if self.git else "local"

    def recipes_dir(self, sources_dir: Path) -> Path:
        """The folder that holds this source's recipe folders."""
        if self.builtin:
            return Path(builtin_recipes())
        if self.path is not None:
            return self.path
        return self.checkout_dir(sources_dir) / self.subdir

    def checkout_dir(self, sources_dir: Path) -> Path:
        assert self.rev is not None
        return sources_dir / f"{self.name}-{self.rev[:12]}"

    def follows(self) -> str:
        """What `cmx registry update NAME` moves a git source to: its branch's head, or the remote's HEAD."""
        return self.branch or "HEAD"

    def describe(self) -> str:
        if self.git is None:
            return str(self.recipes_dir(Path()))
        return f"{self.git} @ {self.rev} ({self.subdir}{', follows ' + self.branch if self.branch else ''})"


def read_registry(path: Path, repairing: str | None = None) -> tuple[Source, ...]:
    """Parse and validate registry.yaml; paths are relative to the file.

    `repairing` names a source whose rev may be invalid: the one `cmx registry update` is
    about to fix (its rev is then returned as written).
    """
    from cmx.recipe.yamlload import LocDict, LocList, load_yaml

    if not path.is_file():
        raise RegistryError(f"registry file {path} does not exist",
                            hint="fix --registry or CMX_REGISTRY; without either, cmx reads the home's "
                                 "registry.yaml, or the one it ships when the home has none")
    data = load_yaml(path)

    def where(line: int) -> str:
        return f"{path}:{line}"

    if not isinstance(data, LocDict) or set(data) - {"sources"} or "sources" not in data:
        raise RegistryError("registry.yaml must be a mapping with one key, `sources`", where=where(1))
    items = data["sources"]
    if not isinstance(items, LocList):
        raise RegistryError("`sources` must be a list", where=where(data.line_of("sources")))
    sources: list[Source] = []
    for item, line in zip(items, items.item_lines, strict=True):
        if not isinstance(item, LocDict):
            raise RegistryError("each source must be a mapping", where=where(line))
        kind, keys = ("git", GIT_KEYS) if "git" in item else ("builtin", BUILTIN_KEYS) if "builtin" in item \
            else ("local", LOCAL_KEYS)
        for key in item:
            if key not in keys:
                raise RegistryError(f"unknown key {key!r} in a {kind} source",
                                    where=where(item.line_of(key)), hint=f"allowed: {', '.join(keys)}")
        name = item.get("name")
        if not isinstance(name, str) or not is_kebab(name):
            raise RegistryError("a source needs a kebab-case `name`", where=where(line))
        if any(s.name == name for s in sources):
            raise RegistryError(f"two sources are named {name!r}", where=where(line))
        if kind == "git":
            sources.append(_git_source(path, item, name, line, repairing))
        elif kind == "builtin":
            if item["builtin"] is not True:
                raise RegistryError(f"`builtin` of source {name!r} must be `true`",
                                    where=where(item.line_of("builtin")),
                                    hint="`builtin: true` names the recipes this cmx ships; a folder is `path: DIR`")
            sources.append(Source(name=name, builtin=True, line=line))
        else:
            rel = item.get("path")
            if not isinstance(rel, str) or not rel:
                raise RegistryError(f"source {name!r} needs `path` (a folder), `git` + `rev`, or `builtin: true`",
                                    where=where(line))
            sources.append(Source(name=name, path=(path.parent / rel).resolve(), line=line))
    return tuple(sources)


def _git_source(path: Path, item: LocDict, name: str, line: int, repairing: str | None) -> Source:
    def where(key: str) -> str:
        return f"{path}:{item.line_of(key)}"

    rev = item.get("rev")
    if name == repairing:
        rev = str(rev)
    elif not isinstance(rev, str) or not is_commit_sha(rev):
        raise RegistryError(
            f"source {name!r} pins rev {rev!r}, which is not a full commit sha", where=where("rev"),
            hint="a branch or tag moves, so the same registry would give different recipes tomorrow: "
                 f"pin the 40-hex commit (`cmx registry update {name} SHA`)")
    subdir = item.get("subdir", "recipes")
    if not isinstance(subdir, str) or subdir.startswith("/") or ".." in Path(subdir).parts:
        raise RegistryError("`subdir` must be a relative folder inside the repository", where=where("subdir"))
    branch = item.get("branch")
    if branch is not None and (not isinstance(branch, str) or not branch):
        raise RegistryError("`branch` must be a branch name", where=where("branch"),
                            hint="the branch `cmx registry update NAME` follows; leave it out to follow the HEAD")
    url = item["git"]
    if not isinstance(url, str) or not url:
        raise RegistryError("`git` must be a repository URL or path", where=where("git"))
    if "://" not in url and not url.startswith("git@"):  # a local repository, relative to the file
        url = str((path.parent / url).resolve())
    return Source(name=name, git=url, rev=rev, subdir=subdir, line=line, branch=branch)
