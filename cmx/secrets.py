"""Secret: a value (a token, an API key) that is never printed, logged, hashed into a cache key or written to disk."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import quote, unquote

if TYPE_CHECKING:  # logging is imported by the writers that log, not by every command
    import logging


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


REDACTED = "********"
# tokens a run may hold in its environment: what reads them (a recipe's `env: HF_TOKEN` secret, the harness's API key)
# is not always the process that writes a log, so every writer redacts them when they are set
SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY", "CMX_ENDPOINT_API_KEY")
# the user:password@ (or token@) of a URL anywhere in a text: no whitespace, quote, slash, ?, # or @ in it
_USERINFO = re.compile(r"(?<=://)([^\s/?#@'\"<>]+)@")
# an ssh URL's bare user (ssh://git@host/...) is an account, never a token: ssh authenticates with keys
_SSH_USER = re.compile(r"(?:^|[^A-Za-z0-9+.-])(?:git\+)?ssh://$")


def masked_url(url: str) -> str:
    """`url` as messages and records show it: https://user:***@host/... (a token given as the user name,
    https://TOKEN@host/..., as https://***@host/...); a URL without credentials as it is."""
    return mask_urls(url)


def mask_urls(text: str) -> str:
    """`text` with the credentials of every URL in it masked (see masked_url)."""
    return _USERINFO.sub(_masked_userinfo, text) if "@" in text else text


def withheld_credentials(text: str) -> bool:
    """Whether `text` holds a URL whose credentials were masked (by masked_url): `user:***@`, `***@`. A record or
    lock holds the URL so; whoever reuses it must give the credentials again."""
    return "***@" in text and any(m.group(1) == "***" or m.group(1).endswith(":***")
                                  for m in _USERINFO.finditer(text))


def _masked_userinfo(match: re.Match[str]) -> str:
    user, colon, _ = match.group(1).partition(":")
    if colon:
        return f"{user}:***@"
    before = match.string[max(0, match.start() - 11):match.start()]  # "x" + "git+ssh://": enough to tell ssh
    return match.group(0) if _SSH_USER.search(before) else "***@"


def url_secrets(url: str) -> list[str]:
    """The secret parts of a URL's credentials in every form they travel in: the password (or a token given as the
    user name) as written and percent-decoded, and `user:password` as an HTTP Basic header carries it (base64)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:  # a malformed port or host: the regex still finds the credentials
        match = _USERINFO.search(url)
        if match is None:
            return []
        user, _, password = match.group(1).partition(":")
    if user is None and password is None:
        return []
    if not password and _SSH_USER.search(url[:url.find("://") + 3]):  # ssh://git@host: an account, not a token
        return []
    out = _forms(password) if password else _forms(user or "")
    if password:
        plain = f"{unquote(user or '')}:{unquote(password)}"
        out.append(base64.b64encode(plain.encode("latin-1", "replace")).decode())
    return out


def _forms(value: str) -> list[str]:
    return [v for v in dict.fromkeys((value, unquote(value), quote(value, safe=""))) if v]


class Redactor:
    """Replaces known secret values in text with ********, and masks the credentials of any URL in it: what every
    writer of a run (a step's log, the harness's log and result files, run records, the packager) passes its text
    through, so a value a server echoes back in an error is caught as well as one cmx itself would print."""

    __slots__ = ("_values",)

    def __init__(self, values: Iterable[str] = ()) -> None:
        # longest first: a secret that contains another is replaced whole
        self._values = tuple(sorted({v for v in values if v}, key=len, reverse=True))

    @classmethod
    def of(cls, values: Iterable[object], *, environment: Mapping[str, str] | None = None) -> Redactor:
        """A Redactor for `values` (a step's inputs, say): each Secret, and the credentials of each string that is a
        URL with user:password@, plus the SECRET_ENV tokens set in `environment` (default: this process's)."""
        import os

        found: list[str] = []
        for value in values:
            if isinstance(value, Secret):
                found += _forms(value.reveal())
            elif isinstance(value, str) and "@" in value:
                found += url_secrets(value)
        env = os.environ if environment is None else environment
        for name in SECRET_ENV:
            if env.get(name):
                found += _forms(env[name])
        return cls(found)

    def redact(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        return mask_urls(text)

    def redact_json(self, data: Any) -> Any:
        """`data` (JSON-like: dicts, lists, strings) with every string redacted, keys included."""
        if isinstance(data, str):
            return self.redact(data)
        if isinstance(data, dict):
            return {self.redact(k) if isinstance(k, str) else k: self.redact_json(v) for k, v in data.items()}
        if isinstance(data, (list, tuple)):
            return [self.redact_json(v) for v in data]
        return data


def redacting_formatter(fmt: str, redactor: Redactor) -> logging.Formatter:
    """A logging.Formatter whose every record (message, arguments and traceback) goes through `redactor`."""
    import logging

    class RedactingFormatter(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return redactor.redact(super().format(record))

    return RedactingFormatter(fmt)


def environment_redactor() -> Redactor:
    """The Redactor of a writer that was handed no secret itself (the packager, the report page): the tokens set in
    the environment (SECRET_ENV) and any URL's credentials, in what it copies from records an older cmx wrote."""
    return Redactor.of(())


def public_value(value: Any) -> Any:
    """An input's value as records hold it: a string's URL credentials masked (see masked_url)."""
    return mask_urls(value) if isinstance(value, str) else value
