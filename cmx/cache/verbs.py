"""The `cmx cache` verbs on a store: list, pick by key prefix, remove, collect garbage, verify."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from cmx.cache.store import Entry, Store, VerifyProblem
from cmx.errors import CacheError, QueryError


def entries(store: Store, recipes: set[str] | None = None, variations: Iterable[str] = ()) -> list[Entry]:
    """Entries of the store, all or those of `recipes` built with every one of `variations`."""
    found = list(store.entries())
    if recipes is None:
        return found
    wanted = tuple(variations)
    return [e for e in found if e.recipe in recipes and all(v in e.variations for v in wanted)]


def _no_entry(key: str) -> CacheError:
    return CacheError(f"no cache entry has a key starting with {key!r}", hint="`cmx cache ls` lists keys")


def entry(store: Store, key: str) -> Entry:
    """The one entry whose key starts with `key`; an error when none, or several, do."""
    found = store.find(key)
    if not found:
        raise _no_entry(key)
    if len(found) > 1:
        raise CacheError(f"{key!r} starts {len(found)} keys", hint="give more characters of the key")
    if found[0].meta is None:
        raise CacheError(f"cache entry {found[0].path} has an unreadable meta.json",
                         hint=f"remove it with `cmx cache rm {found[0].key[:12]}`; it will be rebuilt")
    return found[0]


def select(store: Store, key_or_query: str, of_query: Callable[[str], list[Entry]]) -> list[Entry]:
    """Entries whose key starts with the argument; failing that, `of_query(argument)` (entries of matching
    recipes; a word that is no query matches nothing)."""
    if len(key_or_query) >= 4 and all(c in "0123456789abcdef" for c in key_or_query):
        found = store.find(key_or_query)
        if found:
            return found
    try:
        found = of_query(key_or_query)
    except QueryError:
        found = []
    if not found:
        raise CacheError(f"no cache entry matches {key_or_query!r} (as a key prefix or a query)",
                         hint="`cmx cache ls` lists entries and keys")
    return found


def remove(store: Store, chosen: Iterable[Entry]) -> None:
    for e in chosen:
        store.remove(e)


def gc(store: Store, older_than_days: float | None = None, *, dry_run: bool = False) -> list[Path]:
    seconds = older_than_days * 86400 if older_than_days is not None else None
    return store.gc(seconds, dry_run=dry_run)


def verify(store: Store, key: str | None = None, *, remove: bool = False) -> tuple[list[Entry], list[VerifyProblem]]:
    """Re-hash entries (one or all); with `remove`, delete the corrupted ones."""
    checked = store.find(key) if key else list(store.entries())
    if key and not checked:
        raise _no_entry(key)
    problems = [p for e in checked for p in store.verify(e)]
    if remove:
        for bad in {id(p.entry): p.entry for p in problems}.values():
            store.remove(bad)
    return checked, problems
