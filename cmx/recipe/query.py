"""The query grammar: `tag tag _variation -excluded`, shared by the CLI and recipe deps."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol, TypeVar

from cmx.errors import QueryError

_WORD = re.compile(r"^[a-z0-9]+(?:[.-][a-z0-9]+)*$")


def is_kebab(word: str) -> bool:
    """Lowercase letters and digits joined by '-' (or '.', for version-like names: 99.9, v6.0)."""
    return bool(_WORD.match(word))


class Query(NamedTuple):  # a NamedTuple: parsed by `cmx find`, which must not import dataclasses
    """A parsed query: tags a recipe must all carry, tags it must not carry, variations."""

    tags: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    variations: tuple[str, ...] = ()

    def __str__(self) -> str:
        words = [*self.tags, *(f"-{t}" for t in self.exclude), *(f"_{v}" for v in self.variations)]
        return " ".join(words)


class QuerySyntaxError(ValueError):
    """A word of the query is malformed; the message names it."""


def parse_query(text: str | list[str] | tuple[str, ...]) -> Query:
    """Split a query into tags, exclusions (`-tag`) and variations (`_name`).

    Commas are accepted as separators too, so CM-style `get,python` works.
    """
    words = text.replace(",", " ").split() if isinstance(text, str) else \
        [w for part in text for w in part.replace(",", " ").split()]
    tags: list[str] = []
    exclude: list[str] = []
    variations: list[str] = []
    for word in words:
        if word.startswith("_"):
            target, bare = variations, word[1:]
        elif word.startswith("-"):
            target, bare = exclude, word[1:]
        else:
            target, bare = tags, word
        if not is_kebab(bare):
            raise QuerySyntaxError(f"{word!r} is not a valid query word (lowercase letters, digits and '-')")
        if bare not in target:
            target.append(bare)
    if not tags:
        raise QuerySyntaxError("a query needs at least one tag (variations alone select nothing)")
    return Query(tuple(tags), tuple(exclude), tuple(variations))


QUERY_HINT = 'a query looks like "get python-package" or "app mlperf inference llama2 _rocm"'


def query_of(text: str | Query) -> Query:
    """`text` as a Query (a Query passes through); a QueryError saying what a query looks like when malformed."""
    if isinstance(text, Query):
        return text
    try:
        return parse_query(text)
    except QuerySyntaxError as exc:
        raise QueryError(str(exc), hint=QUERY_HINT) from None


class _HasVariations(Protocol):
    def variation(self, name: str) -> object: ...


class _Named(Protocol):
    @property
    def name(self) -> str: ...  # read-only, so that a NamedTuple record satisfies it


Found = TypeVar("Found", bound=_Named)


def having_variations(found: Sequence[Found], variations: Sequence[str],
                      recipe: Callable[[str], _HasVariations]) -> list[Found]:
    """The recipes among `found` that have every variation asked for (a `_x` word of a query narrows by it)."""
    return [f for f in found if all(recipe(f.name).variation(v) for v in variations)]
