"""Secret: a value (a token, an API key) that is never printed, logged, hashed into a cache key or written to disk."""

from __future__ import annotations

from typing import NoReturn


class Secret:
    """A value that must never be printed, logged, hashed into a key or written to disk.

    str() and repr() are redacted; `reveal()` gives the value to the code that needs it.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __str__(self) -> str:
        return "********"

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("cmx.Secret", self._value))

    def __reduce__(self) -> NoReturn:  # pickling a secret would write it to disk
        raise TypeError("a Secret cannot be pickled")


def public_url(url: str) -> str:
    """`url` without user:password@ (what may be logged and recorded): a token is often given as the user name
    (https://TOKEN@host/...), so the whole of it goes, not only a password."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
