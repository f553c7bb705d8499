"""Fetch a file of an MLCommons R2 dataset: follow its .uri, find the file in its .md5 list, download it and
check the md5.

MLCommons publishes benchmark data on Cloudflare R2 behind small metadata files, which its R2
downloader (mlcommons/r2-downloader, mlc-r2-downloader.sh) reads:

- `https://HOST/metadata/NAME.uri` holds one line: the base URL of the dataset's files
  (for llama3.1-8b's eval set, .../metadata/llama3-1-8b-cnn-eval.uri);
- `https://HOST/metadata/NAME.md5`, beside it, lists the files as `md5sum` writes them
  (`<32 hex digits>  <path>`), paths relative to the base URL;
- each file is at `<base URL>/<path>`, and is checked against its md5.

This module does the same over HTTPS with cmx.tools.download (resumable, retried, the token
never shown). Datasets behind Cloudflare Access (a login page instead of the metadata) are not
supported: download those with the R2 downloader and give the file's path (file:///...).
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from urllib.parse import quote, urljoin, urlsplit

from cmx.errors import CmxError
from cmx.secrets import Secret
from cmx.tools.download import DownloadResult, ProgressCallback, download

_MD5_LINE = re.compile(r"^([0-9a-fA-F]{32})\s+\*?(.+?)\s*$")
_MAX_METADATA_BYTES = 1 << 20  # a .uri is one line, a .md5 list a few lines per file

_log = logging.getLogger(__name__)
_log.addHandler(logging.NullHandler())  # a library: no "last resort" printing to stderr


class R2Error(CmxError):
    """An R2 dataset's metadata is missing or malformed, lacks the file asked for, or a file fails its md5."""


@dataclass(frozen=True)
class R2File:
    """One file of an R2 dataset: where it is, its path in the dataset and the md5 MLCommons lists for it."""

    url: str
    path: str
    md5: str


@dataclass(frozen=True)
class R2Download:
    """What fetch_r2_file produced: the download (its sha256 included) and the R2 entry it was checked against."""

    result: DownloadResult
    file: R2File

    @property
    def path(self) -> Path:
        return self.result.path

    def moved_to(self, dest: Path) -> R2Download:
        return replace(self, result=self.result.moved_to(dest))


def is_r2_metadata(url: str) -> bool:
    """Whether `url` names an R2 dataset's metadata (a .uri file) rather than a file of data."""
    return urlsplit(url).path.endswith(".uri")


def r2_listing(uri_url: str, scratch: Path, *, token: Secret | str | None = None, retries: int = 5,
               log: logging.Logger | None = None) -> list[R2File]:
    """The files of the R2 dataset whose metadata is `uri_url`, with their URLs and md5s.

    The .uri and .md5 files are downloaded into `scratch`.
    """
    if not is_r2_metadata(uri_url):
        raise R2Error(f"{uri_url} is not an R2 dataset's metadata (a URL ending in .uri)")
    parts = urlsplit(uri_url)
    name = PurePosixPath(parts.path).name[:-len(".uri")]
    md5_url = parts._replace(path=str(PurePosixPath(parts.path).with_name(f"{name}.md5")), query="",
                             fragment="").geturl()
    base = _metadata_text(uri_url, scratch / f"{name}.uri", token, retries, log).strip()
    if not re.fullmatch(r"https?://\S+", base):
        raise R2Error(f"{uri_url} does not hold a dataset's base URL (it starts {base[:60]!r})",
                      hint="a dataset behind Cloudflare Access answers with a login page: download it with "
                           "MLCommons' R2 downloader and pass the file as --input url=file:///PATH")
    listed = _metadata_text(md5_url, scratch / f"{name}.md5", token, retries, log)
    files = [_listed_file(line, i, md5_url, base) for i, line in enumerate(listed.splitlines(), 1) if line.strip()]
    if not files:
        raise R2Error(f"{md5_url} lists no files")
    return files


def fetch_r2_file(uri_url: str, filename: str, dest: Path, scratch: Path, *, sha256: str | None = None,
                  token: Secret | str | None = None, retries: int = 5, on_progress: ProgressCallback | None = None,
                  log: logging.Logger | None = None) -> R2Download:
    """Download the file named `filename` of the R2 dataset `uri_url` to `dest`, checked against its listed md5.

    `filename` is the last part of the file's path in the dataset's list; exactly one file must
    have it. `sha256`, when given, is checked too (by cmx.tools.download, before the md5). A file
    that fails a check is removed. Partial downloads in `dest`'s folder are resumed.
    """
    log = log or _log
    files = r2_listing(uri_url, scratch, token=token, retries=retries, log=log)
    matches = [f for f in files if PurePosixPath(f.path).name == filename]
    if len(matches) != 1:
        listed = ", ".join(f.path for f in files[:20])
        raise R2Error(f"the dataset of {uri_url} lists {'no' if not matches else len(matches)} file named {filename!r}",
                      hint=f"it lists: {listed}; pass the name of one of them")
    entry = matches[0]
    result = download(entry.url, dest, sha256=sha256, token=token, retries=retries, on_progress=on_progress, log=log)
    digest = _md5(result.path)
    if digest != entry.md5:
        result.path.unlink(missing_ok=True)
        raise R2Error(f"md5 mismatch for {entry.url}: the dataset's list says {entry.md5}, got {digest}; the file "
                      "was removed", hint="run again; if it fails again, the file changed upstream")
    log.info("%s: md5 %s verified against the dataset's list", entry.path, digest)
    return R2Download(result, entry)


def _metadata_text(url: str, dest: Path, token: Secret | str | None, retries: int, log: logging.Logger | None) -> str:
    got = download(url, dest, sha256=None, token=token, retries=retries, log=log)
    if got.size > _MAX_METADATA_BYTES:
        raise R2Error(f"{url} is {got.size} bytes, too large for an R2 metadata file",
                      hint="give the .uri URL MLCommons publishes for the dataset")
    try:
        return got.path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise R2Error(f"{url} is not text: it is not an R2 metadata file") from None


def _listed_file(line: str, number: int, md5_url: str, base: str) -> R2File:
    match = _MD5_LINE.match(line)
    if match is None:
        raise R2Error(f"{md5_url}: line {number} is not `<md5>  <path>`: {line[:80]!r}")
    md5, path = match.group(1).lower(), match.group(2).removeprefix("./")
    parts = PurePosixPath(path).parts
    if not parts or path.startswith("/") or ".." in parts:
        raise R2Error(f"{md5_url}: line {number} names an unsafe path {path!r}")
    return R2File(urljoin(base.rstrip("/") + "/", quote(path)), path, md5)


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


__all__ = ["R2Download", "R2Error", "R2File", "fetch_r2_file", "is_r2_metadata", "r2_listing"]
