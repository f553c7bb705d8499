"""Getting a round's published table: the raw file of mlcommons/inference_results_vX.Y at a commit, through
cmx.tools.download (resumed, retried, checked against a sha256), from GitHub, a mirror, or a local copy.

The URL is `<base_url>/mlcommons/inference_results_<round>/<commit>/<filename>`: with the default base,
https://raw.githubusercontent.com, GitHub's raw file at that commit; a mirror for an air-gapped node serves
the same layout (a static file server over a folder `mlcommons/inference_results_v6.1/<commit>/summary.json`
is one). A local file is copied by the same code (a file:// URL). Only a full 40-hex commit is taken: a
branch moves, and the table with it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cmx.mlperf.published.table import PublishedResultsError, read_table
from cmx.secrets import Secret
from cmx.tools.download import download

DEFAULT_BASE_URL = "https://raw.githubusercontent.com"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class Fetched:
    """The table in the cache entry, where it came from, and what it holds."""

    path: Path
    url: str
    sha256: str
    verified: bool
    rows: int


def repository(round_name: str) -> str:
    return f"mlcommons/inference_results_{round_name}"


def summary_url(base_url: str, round_name: str, commit: str | None, filename: str) -> str:
    """The raw file's URL at `commit`; PublishedResultsError when no full commit is given."""
    if not commit:
        raise PublishedResultsError(
            f"no commit of {repository(round_name)} is pinned for round {round_name}",
            hint=f"pass --input commit=SHA (`cmx results --commit SHA`), the 40-hex commit of "
                 f"{repository(round_name)} whose {filename} you want (`git ls-remote "
                 f"https://github.com/{repository(round_name)} HEAD`), or --input summary=FILE (--summary FILE) "
                 "for a copy you have")
    if not _COMMIT.match(commit):
        raise PublishedResultsError(f"{commit!r} is not a full commit of {repository(round_name)}",
                                    hint="give its 40 hex digits: a branch or a short hash does not pin the table")
    return f"{base_url.rstrip('/')}/{repository(round_name)}/{commit}/{filename}"


def fetch_summary(dest: Path, *, url: str, sha256: str | None, token: Secret | None = None, retries: int = 5,
                  scratch: Path | None = None, on_progress: Callable[[int, int | None], None] | None = None,
                  log: logging.Logger | None = None) -> Fetched:
    """Download (or copy, for a file:// URL) the table to `dest` and read it once, so a file that is no table
    fails here rather than in every later `cmx results`."""
    staged = (scratch or dest.parent) / dest.name
    result = download(url, staged, sha256=sha256, token=token, retries=retries, keep_partial=True,
                      on_progress=on_progress, log=log)
    if staged != dest:
        result = result.moved_to(dest)
    rows = read_table(dest)  # raises, naming the file, when it holds no rows
    return Fetched(path=dest, url=url, sha256=result.sha256, verified=result.verified, rows=len(rows))


def local_url(path: Path) -> str:
    """A local copy as the file:// URL cmx.tools.download copies from."""
    path = Path(path)
    if not path.is_file():
        raise PublishedResultsError(f"{path} is not a file", hint="give a summary.json or summary.csv you have")
    return path.resolve().as_uri()
