"""registry.yaml: the list of recipe sources, each a local folder or a git repo pinned to a commit."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from cmx.errors import RegistryError
from cmx.recipe.query import is_kebab
from cmx.tools.git import is_commit_sha

LOCAL_KEYS = ("name", "path")
GIT_KEYS = ("name", "git", "rev", "subdir")


class Source(NamedTuple):  # a NamedTuple: it is unpickled by `cmx find`, which must not import dataclasses
    """One recipe source. `path` is set for a local folder; `git`/`rev` for a pinned repo."""

    name: str
    path: Path | None = None
    git: str | None = None
    rev: str | None = None
    subdir: str = "recipes"
    line: int = 0

    @property
    def kind(self) -> str:
        return "git" if self.git else "local"

    def recipes_dir(self, sources_dir: Path) -> Path:
        """The folder that holds this source's recipe folders."""
        if self.path is not None:
            return self.path
        return self.checkout_dir(sources_dir) / self.subdir

    def checkout_dir(self, sources_dir: Path) -> Path:
        assert self.rev is not None
        return sources_dir / f"{self.name}-{self.rev[:12]}"

    def describe(self) -> str:
        return str(self.path) if self.path is not None else f"{self.git} @ {self.rev} ({self.subdir})"


def read_registry(path: Path, repairing: str | None = None) -> tuple[Source, ...]:
    """Parse and validate registry.yaml; paths are relative to the file.

    `repairing` names a source whose rev may be invalid: the one `cmx registry update` is
    about to fix (its rev is then returned as written).
    """
    from cmx.recipe.yamlload import LocDict, LocList, load_yaml

    if not path.is_file():
        raise RegistryError(f"registry file {path} does not exist",
                            hint="pass --registry FILE or set CMX_REGISTRY, or create it with "
                                 "`sources: [{name: builtin, path: recipes}]`")
    data = load_yaml(path)
    where = lambda line: f"{path}:{line}"  # noqa: E731 - a one-line helper, used only here
    if not isinstance(data, LocDict) or set(data) - {"sources"} or "sources" not in data:
        raise RegistryError("registry.yaml must be a mapping with one key, `sources`", where=where(1))
    items = data["sources"]
    if not isinstance(items, LocList):
        raise RegistryError("`sources` must be a list", where=where(data.line_of("sources")))
    sources: list[Source] = []
    for item, line in zip(items, items.item_lines, strict=True):
        if not isinstance(item, LocDict):
            raise RegistryError("each source must be a mapping", where=where(line))
        keys = GIT_KEYS if "git" in item else LOCAL_KEYS
        for key in item:
            if key not in keys:
                raise RegistryError(f"unknown key {key!r} in a {'git' if 'git' in item else 'local'} source",
                                    where=where(item.line_of(key)), hint=f"allowed: {', '.join(keys)}")
        name = item.get("name")
        if not isinstance(name, str) or not is_kebab(name):
            raise RegistryError("a source needs a kebab-case `name`", where=where(line))
        if any(s.name == name for s in sources):
            raise RegistryError(f"two sources are named {name!r}", where=where(line))
        if "git" in item:
            rev = item.get("rev")
            if name == repairing:
                rev = str(rev)
            elif not isinstance(rev, str) or not is_commit_sha(rev):
                raise RegistryError(
                    f"source {name!r} pins rev {rev!r}, which is not a full commit sha",
                    where=where(item.line_of("rev")),
                    hint="a branch or tag moves, so the same registry would give different recipes tomorrow: "
                         f"pin the 40-hex commit (`cmx registry update {name} SHA`)")
            subdir = item.get("subdir", "recipes")
            if not isinstance(subdir, str) or subdir.startswith("/") or ".." in Path(subdir).parts:
                raise RegistryError("`subdir` must be a relative folder inside the repository",
                                    where=where(item.line_of("subdir")))
            url = item["git"]
            if not isinstance(url, str) or not url:
                raise RegistryError("`git` must be a repository URL or path", where=where(item.line_of("git")))
            if "://" not in url and not url.startswith("git@"):  # a local repository, relative to the file
                url = str((path.parent / url).resolve())
            sources.append(Source(name=name, git=url, rev=rev, subdir=subdir, line=line))
        else:
            rel = item.get("path")
            if not isinstance(rel, str) or not rel:
                raise RegistryError(f"source {name!r} needs `path` (a folder) or `git` + `rev`", where=where(line))
            sources.append(Source(name=name, path=(path.parent / rel).resolve(), line=line))
    return tuple(sources)


def update_rev(path: Path, name: str, rev: str) -> Source:
    """Point git source `name` at commit `rev`, editing only that line of registry.yaml."""
    from cmx.recipe.yamlload import load_yaml

    sources = read_registry(path, repairing=name)
    source = next((s for s in sources if s.name == name), None)
    if source is None:
        raise RegistryError(f"no source named {name!r} in {path}",
                            hint=f"sources: {', '.join(s.name for s in sources)}")
    if source.git is None:
        raise RegistryError(f"source {name!r} is a local folder; only git sources have a rev")
    if not is_commit_sha(rev):
        raise RegistryError(f"{rev!r} is not a full commit sha",
                            hint="a branch or tag moves; pin the 40-hex commit for reproducibility")
    data = load_yaml(path)
    item = next(i for i in data["sources"] if i.get("name") == name)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    index = item.line_of("rev") - 1
    new_line, count = re.subn(r"(rev\s*:\s*)['\"]?[0-9A-Za-z._/-]+['\"]?", lambda m: m.group(1) + rev,
                              lines[index], count=1)
    if count != 1:
        raise RegistryError(f"cannot find the rev of {name!r} on its line", where=f"{path}:{index + 1}")
    lines[index] = new_line
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(lines), encoding="utf-8")
    tmp.replace(path)
    return Source(name=name, git=source.git, rev=rev, subdir=source.subdir, line=source.line)
