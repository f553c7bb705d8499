"""The environment as resolution reads it, noting each variable read: what a memo of the plan depends on."""

from __future__ import annotations

from collections.abc import Iterator, Mapping


class ReadEnviron(Mapping[str, str]):
    """`source`, noting each variable read (None: found unset). Anything that lists the whole environment
    (iteration, len, keys, items, values) sets `listed`: then no memo can say what the plan depended on."""

    def __init__(self, source: Mapping[str, str]) -> None:
        self.source = source
        self.read: dict[str, str | None] = {}
        self.listed = False

    def __getitem__(self, name: str) -> str:  # Mapping's get() and `in` come here too
        value = self.source.get(name)
        self.read[name] = value
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        self.listed = True
        return iter(self.source)

    def __len__(self) -> int:
        self.listed = True
        return len(self.source)
