"""The `cmx registry` verbs (each source with its recipe count; fetching a git source at a commit to pin it) and
`cmx show`'s look-up of one recipe."""

from __future__ import annotations

from dataclasses import dataclass

from cmx.errors import QueryError, RegistryError
from cmx.recipe.model import Recipe
from cmx.recipe.query import query_of
from cmx.registry.index import RecipeIndex
from cmx.registry.sources import Source, read_registry, update_rev
from cmx.settings import Settings


@dataclass(frozen=True)
class SourceInfo:
    source: Source
    recipes: int | None  # None: a git source not fetched yet


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


def update(settings: Settings, name: str, rev: str | None = None) -> Source:
    """Fetch git source `name` at commit `rev` and pin it there (registry.yaml is edited only after the fetch
    worked); without `rev`, fetch the commit it is pinned to."""
    from cmx.tools.git import checkout_commit

    current = next((x for x in read_registry(settings.registry, repairing=name) if x.name == name), None)
    if (current is None or current.git is None) and rev:
        return update_rev(settings.registry, name, rev)  # says what is wrong with the name
    if current is None or current.git is None:
        known = ", ".join(x.name for x in read_registry(settings.registry) if x.git is not None) or "none"
        raise RegistryError(f"{name!r} is not a git source of {settings.registry}", hint=f"its git sources: {known}")
    candidate = current._replace(rev=rev or current.rev)
    try:
        checkout_commit(current.git, candidate.rev or "", candidate.checkout_dir(settings.sources_dir))
    except Exception as exc:  # noqa: BLE001 - a git or network failure of any kind is the source's, said in one line
        raise RegistryError(f"source {name!r}: {getattr(exc, 'message', exc)}", hint=getattr(exc, "hint", None)) \
            from None
    return update_rev(settings.registry, name, rev) if rev else current


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
