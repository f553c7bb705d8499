"""Download one file over HTTP(S): resumable, retried, checksummed, published atomically."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from cmx.errors import CmxError
from cmx.secrets import Secret, masked_url

if TYPE_CHECKING:  # requests is imported only when a download happens (it is slow to import)
    import requests

ProgressCallback = Callable[[int, "int | None"], None]

MAX_DELAY_S = 30.0  # the longest sleep between two attempts, whatever backoff and Retry-After say
_RETRIED_STATUSES = {408, 429}  # plus every 5xx
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_CONTENT_RANGE = re.compile(r"^bytes\s+(?:(\d+)-(\d+)|\*)/(\d+|\*)$")

_log = logging.getLogger(__name__)
_log.addHandler(logging.NullHandler())  # a library: no "last resort" printing to stderr


class DownloadError(CmxError):
    """A download failed in a way retrying here will not fix: refused, not found, corrupted, or gave up."""


@dataclass(frozen=True)
class DownloadResult:
    """What download() produced: the file at `path`, its size and sha256.

    `verified` says whether the sha256 was compared with an expected value; `resumed` whether
    the file was completed from bytes an earlier, interrupted attempt had written; `attempts`
    counts the requests made (0 for a file:// copy).
    """

    path: Path
    size: int
    sha256: str
    resumed: bool
    attempts: int
    verified: bool

    def moved_to(self, dest: Path) -> DownloadResult:
        """Move the file (same filesystem: a rename) and return the result for its new place."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(self.path, dest)
        return replace(self, path=dest)


def partial_path(dest: Path) -> Path:
    """Where the bytes of `dest` are written until they are complete and verified."""
    return dest.with_name(dest.name + ".part")


def download(url: str, dest: Path, *, sha256: str | None, token: Secret | str | None = None,
             headers: Mapping[str, str] | None = None, retries: int = 5, backoff: float = 0.5,
             timeout: float = 60, chunk_size: int = 1 << 20, on_progress: ProgressCallback | None = None,
             session: requests.Session | None = None, keep_partial: bool = True,
             log: logging.Logger | None = None) -> DownloadResult:
    """Fetch `url` into `dest` and return what was written.

    Bytes go to `dest.part` (see partial_path) and are hashed as they arrive. A dropped
    connection, a timeout, or an HTTP 408/429/5xx is retried, resuming with a `Range` request
    where the server allows it. `retries` counts consecutive attempts that got no further, so a
    long download over a flaky link is not given up while it progresses. The delay doubles
    from `backoff` seconds (capped at MAX_DELAY_S). A `.part` left by an earlier call is
    resumed too.

    When `sha256` is given, a mismatch deletes the partial file and raises DownloadError.
    `dest` appears, by an atomic rename, only once the checksum passed; an existing `dest` is
    replaced. When retries run out, the partial file is kept (for the next call to resume)
    unless `keep_partial` is false. `token` is sent as `Authorization: Bearer` and appears in
    no message or log line. `file://` URLs are copied, for air-gapped mirrors.

    Callers must not download to the same `dest` from two processes at once.
    """
    expected = _expected_sha256(sha256)
    if isinstance(token, str):  # keep even a caller's plain string out of reprs from here on
        token = Secret(token)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    scheme = urlsplit(url).scheme.lower()
    if scheme == "file":
        return _copy_local(url, dest, expected, chunk_size, on_progress, log or _log)
    if scheme not in ("http", "https"):
        raise DownloadError(f"cannot download {_shown(url)}: the {scheme or 'missing'} URL scheme is not supported",
                            hint="use an http://, https:// or file:// URL (for Hugging Face: "
                                 "https://huggingface.co/ORG/REPO/resolve/REVISION/FILE)")
    import requests

    transfer = _Transfer(url=url, partial=partial_path(dest), token=token, headers=dict(headers or {}),
                         timeout=timeout, chunk_size=chunk_size, on_progress=on_progress, log=log or _log)
    own_session = session is None
    session = session or requests.Session()
    try:
        attempts = _fetch_with_retries(transfer, session, retries=retries, backoff=backoff,
                                       keep_partial=keep_partial)
    finally:
        if own_session:
            session.close()
    digest, size = transfer.digest(), transfer.partial.stat().st_size
    _check_and_publish(url, transfer.partial, dest, expected, digest, transfer.log)
    return DownloadResult(dest, size, digest, transfer.resumed, attempts, expected is not None)


# --- one transfer, over several attempts --------------------------------------------------------

class _Transient(Exception):
    """An attempt failed in a way that another attempt may fix (dropped, timed out, 5xx)."""

    def __init__(self, reason: str, retry_after: float = 0.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


@dataclass
class _Transfer:
    """The state one download carries from attempt to attempt."""

    url: str
    partial: Path
    token: Secret | None
    headers: dict[str, str]
    timeout: float
    chunk_size: int
    on_progress: ProgressCallback | None
    log: logging.Logger
    resumed: bool = False
    validator: str | None = None  # the ETag or Last-Modified of the first answer, for If-Range
    _hasher: hashlib._Hash | None = None
    _hashed: int = -1  # how many bytes of the partial file _hasher has seen

    def digest(self) -> str:
        return self._hasher_for(self.partial.stat().st_size).hexdigest()

    def size_on_disk(self) -> int:
        try:
            return self.partial.stat().st_size
        except FileNotFoundError:
            return 0

    def _hasher_for(self, size: int) -> hashlib._Hash:
        """A sha256 of the partial file's first `size` bytes; re-read from disk unless this
        process hashed exactly those bytes itself (re-reading a 100 GB file per drop is slow)."""
        if self._hasher is None or self._hashed != size:
            hasher = hashlib.sha256()
            with open(self.partial, "rb") as f:
                remaining = size
                while remaining:
                    block = f.read(min(remaining, 1 << 20))
                    if not block:
                        break
                    hasher.update(block)
                    remaining -= len(block)
            self._hasher, self._hashed = hasher, size
        return self._hasher.copy()

    def request_headers(self, offset: int) -> dict[str, str]:
        sent = dict(self.headers)
        # identity: a Range counts bytes of the file as stored, not of a gzip stream of it
        sent["Accept-Encoding"] = "identity"
        if self.token:
            sent["Authorization"] = f"Bearer {self.token.reveal()}"
        if offset:
            sent["Range"] = f"bytes={offset}-"
            if self.validator:  # the server answers 200 (whole file) if the file changed meanwhile
                sent["If-Range"] = self.validator
        return sent

    def attempt(self, session: requests.Session) -> None:
        """One request: append to (or restart) the partial file until the body ends."""
        import requests

        offset = self.size_on_disk()
        try:
            with session.get(self.url, headers=self.request_headers(offset), stream=True,
                             timeout=self.timeout) as response:
                start, total = self._start_and_total(response, offset)
                if start is None:
                    return  # the partial file was already complete (416 for a Range at its end)
                self._write_body(response, start, total)
        except requests.exceptions.SSLError as exc:
            raise DownloadError(f"cannot download {_shown(self.url)}: TLS error ({_short_reason(exc)})",
                                hint="check the machine's clock and CA certificates "
                                     "(REQUESTS_CA_BUNDLE for a private CA)") from None
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
                requests.exceptions.ChunkedEncodingError) as exc:
            raise _Transient(_short_reason(exc)) from None
        except requests.exceptions.RequestException as exc:  # a bad URL, too many redirects...
            raise DownloadError(f"cannot download {_shown(self.url)}: {_short_reason(exc)}",
                                hint="check the URL") from None

    def _start_and_total(self, response: requests.Response, offset: int) -> tuple[int | None, int | None]:
        """Where the body starts in the file and the file's full size (None: unknown), from
        the status and headers; raises for answers that are not the file."""
        status = response.status_code
        if status == 206:
            first, _, size = _parse_content_range(response.headers.get("Content-Range", ""))
            if first != offset:  # a range we did not ask for: start again from a clean slate
                self.partial.unlink(missing_ok=True)
                raise _Transient(f"the server sent bytes from {first} when asked from {offset}")
            self.resumed = True
            self.log.info("resuming %s at byte %d", _shown(self.url), offset)
            return offset, size
        if status == 416 and offset:
            _, _, size = _parse_content_range(response.headers.get("Content-Range", ""))
            if size == offset:
                self.log.info("the partial file already holds all %d bytes", size)
                return None, size
            self.partial.unlink(missing_ok=True)
            raise _Transient(f"the server refused a Range from byte {offset} (HTTP 416)")
        if status == 200:
            if offset:
                self.log.warning("the server sent the whole file again (HTTP 200 to a Range request, or the file "
                                 "changed); restarting from byte 0")
            self.resumed = False
            self.validator = _validator(response)  # of the file as it is now
            length = response.headers.get("Content-Length")
            return 0, int(length) if length and length.isdigit() else None
        raise _status_error(self.url, response, self.token)

    def _write_body(self, response: requests.Response, start: int, total: int | None) -> None:
        hasher = self._hasher_for(start) if start else hashlib.sha256()
        done = start
        self._report(done, total)
        try:
            with open(self.partial, "ab" if start else "wb") as f:
                for chunk in response.iter_content(self.chunk_size):
                    f.write(chunk)
                    hasher.update(chunk)
                    done += len(chunk)
                    self._hasher, self._hashed = hasher, done
                    self._report(done, total)
                f.flush()
                os.fsync(f.fileno())  # the bytes are on disk before the rename publishes them
        except OSError as exc:
            import requests

            if isinstance(exc, requests.exceptions.RequestException):  # these are OSErrors too
                raise
            raise DownloadError(f"cannot write {self.partial}: {exc.strerror or exc}",
                                hint="check free space and permissions of that folder") from None
        if total is not None and done < total:  # a server that closed early without saying so
            raise _Transient(f"the connection closed after {done} of {total} bytes")

    def _report(self, done: int, total: int | None) -> None:
        if self.on_progress is not None:
            self.on_progress(done, total)


def _fetch_with_retries(transfer: _Transfer, session: requests.Session, *, retries: int, backoff: float,
                        keep_partial: bool) -> int:
    """Run attempts until one completes; returns how many requests were made."""
    attempts = stalled = 0
    furthest = transfer.size_on_disk()
    while True:
        attempts += 1
        try:
            transfer.attempt(session)
            return attempts
        except _Transient as exc:
            got = transfer.size_on_disk()
            stalled = 0 if got > furthest else stalled + 1  # progress earns a fresh set of retries
            furthest = max(furthest, got)
            if stalled > retries:
                raise _gave_up(transfer, exc.reason, attempts, keep_partial) from None
            delay = min(max(backoff * 2 ** max(stalled - 1, 0), exc.retry_after), MAX_DELAY_S)
            transfer.log.warning("attempt %d of %s failed: %s; retrying in %.1fs", attempts, _shown(transfer.url),
                                 exc.reason, delay)
            time.sleep(delay)
        except DownloadError:
            if not keep_partial:
                transfer.partial.unlink(missing_ok=True)
            raise


def _gave_up(transfer: _Transfer, reason: str, attempts: int, keep_partial: bool) -> DownloadError:
    size = transfer.size_on_disk()
    if keep_partial and size:
        kept = f"the {size} bytes received are kept in {transfer.partial}, and the next download to it resumes there"
    else:
        transfer.partial.unlink(missing_ok=True)
        kept = "nothing was kept"
    return DownloadError(f"could not download {_shown(transfer.url)}: {reason} "
                         f"(gave up after {attempts} attempt{'s' if attempts != 1 else ''}; {kept})",
                         hint="check the network and that the server is up, then run again")


def _status_error(url: str, response: requests.Response, token: Secret | None) -> Exception:
    """The error for an HTTP status that is not the file: retried (_Transient) or final."""
    status = response.status_code
    what = f"HTTP {status} {response.reason or ''}".rstrip()
    if status >= 500 or status in _RETRIED_STATUSES:
        return _Transient(f"the server answered {what}", _retry_after(response))
    if status in (401, 403):
        if token:
            return DownloadError(f"{_shown(url)} answered {what}: the token was refused",
                                 hint="check the token is valid and has access to this file (for a gated "
                                      "Hugging Face model, accept its licence on the model's page first)")
        return DownloadError(f"{_shown(url)} answered {what}: it needs a token, and no token was given",
                             hint="pass --input token=... or set HF_TOKEN")
    if status == 404:
        return DownloadError(f"{_shown(url)} was not found (HTTP 404)",
                             hint="check the URL: the host answered, but has no file at that path")
    return DownloadError(f"{_shown(url)} answered {what}; not retried",
                         hint="a 4xx answer means the request itself is refused: check the URL and headers")


# --- the end: verify, then publish ------------------------------------------------------------

def _check_and_publish(url: str, partial: Path, dest: Path, expected: str | None, digest: str,
                       log: logging.Logger) -> None:
    if expected is not None and digest != expected:
        partial.unlink(missing_ok=True)  # corrupt or changed upstream: resuming from it would not help
        raise DownloadError(f"sha256 mismatch for {_shown(url)}: expected {expected}, got {digest}; "
                            "the downloaded file was removed",
                            hint="if the file changed upstream, check it and pin the new sha256; "
                                 "otherwise run again")
    if expected is not None:
        log.info("sha256 %s verified", digest)
    os.replace(partial, dest)


def _copy_local(url: str, dest: Path, expected: str | None, chunk_size: int,
                on_progress: ProgressCallback | None, log: logging.Logger) -> DownloadResult:
    """A file:// URL: copy through the partial file, hashing on the way, with the same checks."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise DownloadError(f"cannot copy {_shown(url)}: a file:// URL must name a local path (file:///path)",
                            hint="mount the share and use its local path")
    source = Path(unquote(parts.path))
    partial = partial_path(dest)
    hasher = hashlib.sha256()
    try:
        total = source.stat().st_size
        with open(source, "rb") as src, open(partial, "wb") as out:
            done = 0
            while block := src.read(chunk_size):
                out.write(block)
                hasher.update(block)
                done += len(block)
                if on_progress is not None:
                    on_progress(done, total)
    except FileNotFoundError:
        partial.unlink(missing_ok=True)
        raise DownloadError(f"{_shown(url)} was not found: no file at {source}", hint="check the path") from None
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise DownloadError(f"cannot copy {source} to {partial}: {exc.strerror or exc}",
                            hint="check the path, free space and permissions") from None
    digest = hasher.hexdigest()
    _check_and_publish(url, partial, dest, expected, digest, log)
    return DownloadResult(dest, done, digest, False, 0, expected is not None)


# --- small helpers ----------------------------------------------------------------------------

def _expected_sha256(sha256: str | None) -> str | None:
    if sha256 is None:
        return None
    value = sha256.strip().lower().removeprefix("sha256:")
    if not _SHA256.match(value):
        raise DownloadError(f"sha256 {sha256!r} is not a sha256 digest: it needs 64 hex digits",
                            hint="copy the digest from the publisher, or compute it with `sha256sum FILE`")
    return value


def _parse_content_range(header: str) -> tuple[int | None, int | None, int | None]:
    """'bytes 10-99/100' -> (10, 99, 100); 'bytes */100' -> (None, None, 100); unknown parts None."""
    match = _CONTENT_RANGE.match(header.strip())
    if not match:
        return None, None, None
    first, last, size = match.groups()
    return (int(first) if first else None, int(last) if last else None,
            int(size) if size and size != "*" else None)


def _validator(response: requests.Response) -> str | None:
    """A strong ETag, else Last-Modified: what If-Range accepts (a weak ETag W/"..." it does not)."""
    etag = response.headers.get("ETag")
    if etag and not etag.startswith("W/"):
        return etag
    return response.headers.get("Last-Modified")


def _retry_after(response: requests.Response) -> float:
    value = response.headers.get("Retry-After", "")
    return float(value) if value.strip().isdigit() else 0.0  # the HTTP-date form is rare; ignored


def _short_reason(exc: BaseException) -> str:
    """A short, URL-free reason for a requests exception (its str() repeats the URL, query and all)."""
    import requests

    text = repr(exc)
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return "connecting timed out"
    if isinstance(exc, requests.exceptions.ReadTimeout) or "ReadTimeoutError" in text or "timed out" in text:
        return "the server stopped sending (read timed out)"
    if isinstance(exc, requests.exceptions.ChunkedEncodingError):
        return "the connection dropped mid-file"
    if "Connection refused" in text:
        return "connection refused"
    if "NameResolutionError" in text or "Name or service not known" in text or "getaddrinfo" in text:
        return "cannot resolve the host name"
    if isinstance(exc, requests.exceptions.TooManyRedirects):
        return "too many redirects"
    if isinstance(exc, requests.exceptions.ConnectionError):
        return "the connection failed or dropped"
    return type(exc).__name__


def _shown(url: str) -> str:
    """The URL for messages: https://user:***@host/... (cmx.secrets.masked_url), never its password or token."""
    return masked_url(url)


__all__ = ["DownloadError", "DownloadResult", "download", "partial_path"]
