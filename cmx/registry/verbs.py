"""The `cmx registry` verbs (each source with its recipe count; adding a git source pinned to a commit, moving its
pin, fetching it, removing a source) and `cmx show`'s look-up of one recipe."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from cmx.errors import QueryError, RegistryError
from cmx.home import DEFAULT_REGISTRY, home_dir, home_registry
from cmx.recipe.model import Recipe
from cmx.recipe.query import is_kebab, query_of
from cmx.registry.compat import check_compatible
from cmx.registry.index import RecipeIndex
from cmx.registry.sources import Source, read_registry
from cmx.settings import Settings

T = TypeVar("T")


@dataclass(frozen=True)
class SourceInfo:
    source: Source
    recipes: int | None  # None: a git source not fetched yet


@dataclass(frozen=True)
class Pinned:
    """A git source as `cmx registry add` or `update` left it."""

    source: Source
    old: str | None  # the rev it had before (None: just added)
    registry: Path  # the registry file that now pins it


def is_default(settings: Settings) -> bool:
    """Whether the registry in force is the one cmx ships (the home has no registry.yaml yet)."""
    return settings.registry == Path(DEFAULT_REGISTRY)


def sources(settings: Settings) -> list[SourceInfo]:
    """Each source with its number of recipes (None for a git source not fetched yet: nothing is fetched here)."""
    out = []
    for source in read_registry(settings.registry):
        fetched = source.git is None or (source.checkout_dir(settings.sources_dir) / ".git").is_dir()
        root = source.recipes_dir(settings.sources_dir)
        count = sum(1 for p in root.glob("*/recipe.yaml") if not p.parent.name.startswith((".", "_"))) \
            if fetched and root.is_dir() else None
        out.append(SourceInfo(source, count))
    return out


def add(settings: Settings, name: str, url: str, *, rev: str | None = None, branch: str | None = None,
        subdir: str = "recipes") -> Pinned:
    """Add git source `name`, pinned to commit `rev` (default: the head of `branch`, or the remote's HEAD, now).

    It is fetched and checked (its subdir, its cmx-source.yaml) before the registry is written. Into the registry in
    force, or, while that is the one cmx ships, into a new registry.yaml of the home that starts from it.
    """
    from cmx.tools.git import absolute_if_local

    if not is_kebab(name):
        raise RegistryError(f"source name {name!r} is not kebab-case",
                            hint="lowercase letters and digits joined by - or ., e.g. acme-recipes")
    existing = read_registry(settings.registry)
    if any(s.name == name for s in existing):
        raise RegistryError(f"{settings.registry} already has a source named {name!r}",
                            hint=f"pick another name; `cmx registry update {name}` moves its pin, "
                                 f"`cmx registry rm {name}` removes it")
    _refuse_password(name, url)
    if subdir.startswith("/") or ".." in Path(subdir).parts:
        raise RegistryError(f"--subdir {subdir!r} is not a relative folder inside the repository")
    url = absolute_if_local(url)
    sha = _git(name, lambda: _commit_to_pin(url, rev, branch))
    source = Source(name=name, git=url, rev=sha, subdir=subdir, branch=branch)
    fetch_source(settings, source)
    from cmx.registry.edit import append_source

    target = Path(home_registry(home_dir(), existing=False)) if is_default(settings) else settings.registry
    entry = {"name": name, "git": url, "rev": sha, **({"branch": branch} if branch else {}), "subdir": subdir}
    append_source(target, entry, start=_first_registry())
    return Pinned(source, None, target)


def update(settings: Settings, name: str, rev: str | None = None) -> Pinned:
    """Pin git source `name` to commit `rev`, or (without `rev`) to the head of what it follows now: its `branch`,
    or the remote's HEAD. The commit is fetched and checked first; registry.yaml is edited only after that worked."""
    from cmx.registry.edit import update_rev
    from cmx.tools.git import resolve_ref

    current = next((x for x in read_registry(settings.registry, repairing=name) if x.name == name), None)
    if current is None or current.git is None:
        if rev:
            update_rev(settings.registry, name, rev)  # says what is wrong with the name
        known = ", ".join(x.name for x in read_registry(settings.registry) if x.git is not None) or "none"
        raise RegistryError(f"{name!r} is not a git source of {settings.registry}", hint=f"its git sources: {known}")
    git = current.git
    target = rev or _git(name, lambda: resolve_ref(git, current.follows()))
    fetch_source(settings, current._replace(rev=target))
    pinned = update_rev(settings.registry, name, target) if target != current.rev else current
    return Pinned(pinned, current.rev, settings.registry)


def fetch(settings: Settings, names: tuple[str, ...] = ()) -> list[Source]:
    """Fetch git sources `names` (default: every one) at the commits they are pinned to; nothing is edited."""
    every = read_registry(settings.registry)
    gits = [s for s in every if s.git is not None]
    for name in names:
        if not any(s.name == name for s in gits):
            what = next((f"a {s.kind} source: nothing to fetch" for s in every if s.name == name), "no source")
            raise RegistryError(f"{name!r} is {what} in {settings.registry}",
                                hint=f"its git sources: {', '.join(s.name for s in gits) or 'none'}")
    chosen = [s for s in gits if not names or s.name in names]
    for source in chosen:
        fetch_source(settings, source)
    return chosen


def remove(settings: Settings, name: str) -> Source:
    """Take source `name` out of the registry in force (a git source's checkout stays in the cache)."""
    from cmx.registry.edit import remove_source

    if is_default(settings):
        raise RegistryError(f"the registry in force is the one cmx ships ({settings.registry}), which is not edited",
                            hint=f"write your own at {home_registry(home_dir(), existing=False)} "
                                 "(`cmx registry add` starts one from it)")
    return remove_source(settings.registry, name)


def fetch_source(settings: Settings, source: Source) -> Path:
    """Check out git `source` at its rev (reused when there), and check it: its subdir, its cmx-source.yaml."""
    from cmx.tools.git import checkout_commit, inside

    checkout = source.checkout_dir(settings.sources_dir)
    root = _git(source.name, lambda: inside(checkout_commit(source.git or "", source.rev or "", checkout),
                                            source.subdir, what=f"{source.git} at {source.rev}"))
    check_compatible(source.name, root, git=True)
    return root


def _git(name: str, step: Callable[[], T]) -> T:
    """`step()`, a git or network failure of which is said in one line as source `name`'s."""
    try:
        return step()
    except Exception as exc:  # noqa: BLE001 - a git or network failure of any kind is the source's, said in one line
        raise RegistryError(f"source {name!r}: {getattr(exc, 'message', exc)}", hint=getattr(exc, "hint", None)) \
            from None


def _commit_to_pin(url: str, rev: str | None, branch: str | None) -> str:
    """`rev` when it is a full sha (else GitError saying what to pin), or the sha `branch` (or HEAD) names now."""
    from cmx.tools.git import require_commit_sha, resolve_ref

    if rev:
        require_commit_sha(url, rev)
        return rev
    return resolve_ref(url, branch or "HEAD")


def _refuse_password(name: str, url: str) -> None:
    from urllib.parse import urlsplit

    if "://" in url and urlsplit(url).password is not None:  # the URL is not echoed: it holds the secret
        raise RegistryError(f"the URL of source {name!r} holds a password: the registry file is not a secret store",
                            hint="give the URL without it; git asks its credential helper (`git config "
                                 "credential.helper`) or uses your SSH key for a git@host:path URL")


def _first_registry() -> str:
    """The text a home's registry.yaml starts from: the one cmx ships, under a comment that says where it came from."""
    shipped = Path(DEFAULT_REGISTRY).read_text(encoding="utf-8")
    body = "".join(line for line in shipped.splitlines(keepends=True) if not line.startswith("#"))
    return ("# Recipe sources cmx searches, in order (`cmx registry ls` lists them). `cmx registry add` wrote this\n"
            "# file from the registry cmx ships; the format is in docs/recipes.md, \"The registry file\".\n" + body)


def recipe_named(idx: RecipeIndex, name: str) -> Recipe:
    """One recipe by name, or by a query that matches exactly one recipe; QueryError with near names otherwise."""
    if name in idx.names():
        return idx.get(name)
    found = idx.find(query_of(name))
    if len(found) == 1:
        return idx.get(found[0].name)
    if not found:
        import difflib

        close = difflib.get_close_matches(name, idx.names(), n=3)
        raise QueryError(f"no recipe named {name!r}", hint=f"did you mean {', '.join(close)}?" if close
                         else "`cmx find` lists recipes")
    raise QueryError(f"{name!r} matches {len(found)} recipes: {', '.join(i.name for i in found)}",
                     hint="give the recipe's name")
