"""Fetch a Hugging Face model or dataset repository at a pinned commit: list its files, check the space, download
and verify each.

The Hub's HTTP API is small: `GET {endpoint}/api/models/{repo}/revision/{revision}?blobs=true`
answers the commit the revision names (`sha`) and the files there (`siblings`, each with its
size and either its LFS sha256 or its git blob id), and `{endpoint}/{repo}/resolve/{commit}/{path}`
serves a file. A dataset repository is named as the Hub's pages name it, `datasets/ORG/NAME`: its
listing is `/api/datasets/ORG/NAME/revision/...`, and its files are served under `/datasets/ORG/NAME/`.
Downloads go through cmx.tools.download (resumable, retried, the token never shown); LFS files are
checked by sha256, small files kept in git by their git blob id.

A token is sent as `Authorization: Bearer` and appears in no message or log line. `requests`
is imported only when a request is made (it is slow to import).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeGuard
from urllib.parse import quote

from cmx.errors import CmxError
from cmx.secrets import Secret
from cmx.tools.download import download

if TYPE_CHECKING:  # requests is imported only when the API is asked (it is slow to import)
    import requests

ProgressCallback = Callable[[int, int], None]
"""`on_progress(done, total)`: bytes of the chosen files downloaded (or found verified) so far, of all of them."""

DUPLICATE_WEIGHTS = ("*.bin", "*.bin.index.json", "*.pth", "*.pt", "*.ckpt", "*.h5", "*.msgpack", "original/*")
"""Weights in formats vLLM does not need when the repository also has *.safetensors (skipped by default)."""

MANIFEST = ".cmx-verified.json"
"""In the scratch folder: the files already downloaded and checked, so a new attempt skips them."""

DATASETS = "datasets/"  # a repository named datasets/ORG/NAME is a dataset's
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_LIST_ATTEMPTS = 4

_log = logging.getLogger(__name__)
_log.addHandler(logging.NullHandler())  # a library: no "last resort" printing to stderr


class HuggingFaceError(CmxError):
    """The Hub refused or failed a request, a revision is not pinned, or a file does not match its checksum."""


@dataclass(frozen=True)
class RepoFile:
    """One file of a repository at a commit, as the Hub API lists it."""

    path: str
    size: int
    sha256: str | None  # LFS files: the sha256 of the content
    blob_id: str | None  # files kept in git: the git blob id (sha1 of "blob SIZE\0" + content)


def is_commit(revision: str | None) -> TypeGuard[str]:
    """Whether `revision` is a full commit sha (40 lowercase hex digits), the only thing that does not move."""
    return revision is not None and bool(_COMMIT.match(revision))


def current_commit(endpoint: str, repo: str, revision: str = "main", *, token: Secret | str | None = None,
                   backoff: float = 1.0) -> str | None:
    """The commit that `revision` (a branch, a tag) names at `endpoint` now; None when the server gives none."""
    commit, _ = _listing(endpoint.rstrip("/"), repo, revision, _secret(token), backoff)
    return commit


def require_commit(endpoint: str, repo: str, revision: str | None, *, token: Secret | str | None = None,
                   name: str = "revision", backoff: float = 1.0) -> str:
    """`revision` when it is a full commit sha; otherwise refuse it, naming the commit it points at now.

    A branch, a tag or a short sha moves (or can become ambiguous), so the same request could
    fetch other files tomorrow. For `None`, the commit `main` points at is named. `name` is the
    input that holds the revision, for the hint (`pin it with --input NAME=COMMIT`). Only a
    revision that is not a commit costs a request.
    """
    if is_commit(revision):
        return revision
    asked = revision or "main"
    commit = current_commit(endpoint, repo, asked, token=token, backoff=backoff)
    what = f"{name} {revision!r} is not a full commit sha" if revision else f"no {name} is pinned for {repo}"
    raise HuggingFaceError(f"{what}: a branch or tag moves, so the same query could download other weights tomorrow",
                           hint=f"{repo} {asked} is at {commit or '(the server gave no commit)'} now: "
                                f"pin it with --input {name}={commit or 'COMMIT'}")


def list_files(endpoint: str, repo: str, revision: str, *, token: Secret | str | None = None,
               backoff: float = 1.0) -> list[RepoFile]:
    """The files of `repo` at `revision`, with their sizes and checksums.

    When `revision` is a commit, the server must answer for that commit (a mirror that serves
    another is refused). A file whose path is absolute or has `..` is refused. 5xx, 429 and
    network errors are retried (4 attempts, waits doubling from `backoff` seconds); 401, 403
    and 404 are explained.
    """
    endpoint = endpoint.rstrip("/")
    commit, files = _listing(endpoint, repo, revision, _secret(token), backoff)
    if is_commit(revision) and commit and commit != revision:
        raise HuggingFaceError(f"{endpoint} lists {repo} at commit {commit} when asked for {revision}",
                               hint="check the endpoint: a mirror must serve the commit asked for")
    _check_paths(files, repo)
    return files


def select_files(files: Sequence[RepoFile], include: str | None = None, *, repo: str,
                 revision: str) -> list[RepoFile]:
    """The files to download: those matching `include` (space-separated globs), or by default all but
    `.gitattributes` and, when the repository has *.safetensors, the DUPLICATE_WEIGHTS.
    `repo` and `revision` name the repository in the error when no file matches."""
    if include:
        patterns = include.split()
        chosen = [f for f in files if any(fnmatch.fnmatchcase(f.path, p) for p in patterns)]
        if not chosen:
            raise HuggingFaceError(f"no file of {repo} at {revision} matches include={include!r}",
                                   hint=f"its files are: {', '.join(f.path for f in files[:20])}")
        return chosen
    has_safetensors = any(f.path.endswith(".safetensors") for f in files)
    skipped = (".gitattributes", *(DUPLICATE_WEIGHTS if has_safetensors else ()))
    return [f for f in files if not any(fnmatch.fnmatchcase(f.path, p) for p in skipped)]


def download_repo(endpoint: str, repo: str, revision: str, dest: Path, *, token: Secret | str | None = None,
                  files: Sequence[RepoFile] | None = None, scratch: Path | None = None, retries: int = 5,
                  backoff: float = 0.5, min_free: int = 0, on_progress: ProgressCallback | None = None,
                  log: logging.Logger | None = None) -> Path:
    """Download `files` of `repo` at commit `revision` into the folder `dest`, each checked; return `dest`.

    `revision` must be a full commit (see require_commit). `files` defaults to select_files()
    of list_files(). Files are downloaded into `scratch` and moved to `dest` (created if
    needed) once every one is there and checked: LFS files by sha256, the others by git blob
    id; a file that fails is removed and HuggingFaceError or DownloadError is raised. What a
    failed call leaves in `scratch` (verified files, recorded in MANIFEST, and partial files)
    is reused by the next call with the same `scratch`. The default `scratch` is a folder
    beside `dest`, removed on success; a caller's own is left to the caller.

    Before the first byte, the free space of `scratch` must hold what is still to fetch plus
    `min_free` bytes. `retries` and `backoff` are download()'s. `on_progress(done, total)`
    counts bytes over all the files; `log` gets a line per file (`PATH: N bytes, sha256
    verified`).
    """
    endpoint, token, log = endpoint.rstrip("/"), _secret(token), log or _log
    commit = require_commit(endpoint, repo, revision, token=token)
    if files is None:
        files = select_files(list_files(endpoint, repo, commit, token=token), repo=repo, revision=commit)
    _check_paths(files, repo)  # a caller's own list too: every path is joined to dest
    dest = Path(dest)
    own_scratch = scratch is None
    scratch = dest.with_name(f".{dest.name}.download") if scratch is None else Path(scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    check_space(scratch, files, min_free=min_free)
    _fetch_all(endpoint, repo, commit, files, scratch, token=token, retries=retries, backoff=backoff,
               on_progress=on_progress, log=log)
    for f in files:
        target = dest / f.path
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(scratch / f.path, target)
    if own_scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    return dest


def check_space(folder: Path, files: Sequence[RepoFile], *, min_free: int = 0) -> None:
    """Refuse when `folder`'s disk lacks room for the bytes of `files` not yet there, plus `min_free`."""
    needed = sum(f.size for f in files) - sum(_size(folder / f.path) for f in files)
    free = shutil.disk_usage(folder).free
    if needed + min_free > free:
        also = f" (and {_gb(min_free)} must stay free)" if min_free else ""
        raise HuggingFaceError(f"the download needs {_gb(needed)} more{also} and {folder} has {_gb(free)} free",
                               hint="free space, or move the cache to a larger disk with CMX_CACHE=/big/disk/cache")


# --- the API ---------------------------------------------------------------------------------------

def _listing(endpoint: str, repo: str, revision: str, token: Secret | None,
             backoff: float) -> tuple[str | None, list[RepoFile]]:
    """The commit `revision` resolves to, and the repository's files there."""
    url = f"{endpoint}/api/{api_repo(repo)}/revision/{quote(revision, safe='')}"
    response = _get(url, {"blobs": "true"}, token, backoff)
    if response.status_code != 200:
        raise _api_error(response, endpoint, token, repo, revision)
    try:
        data = response.json()
        files = [_repo_file(s) for s in data["siblings"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise HuggingFaceError(f"{url} did not answer with a repository's file list ({type(exc).__name__}: {exc})",
                               hint="check the endpoint: it must serve the Hugging Face Hub API") from None
    return data.get("sha"), files


def api_repo(repo: str) -> str:
    """The API's path of a repository: `models/ORG/NAME`, or `datasets/ORG/NAME` for a dataset's."""
    return repo if repo.startswith(DATASETS) else f"models/{repo}"


def _get(url: str, params: dict[str, str], token: Secret | None, backoff: float) -> requests.Response:
    import requests

    headers = {"Authorization": f"Bearer {token.reveal()}"} if token else {}
    for attempt in range(_LIST_ATTEMPTS):
        try:
            response = requests.get(url, params=params, headers=headers, timeout=60)
        except requests.exceptions.RequestException as exc:
            reason = "connection refused" if "Connection refused" in repr(exc) else type(exc).__name__
        else:
            if response.status_code < 500 and response.status_code != 429:
                return response
            reason = f"HTTP {response.status_code}"
        if attempt == _LIST_ATTEMPTS - 1:
            raise HuggingFaceError(f"cannot list the files of {url}: {reason} ({_LIST_ATTEMPTS} attempts)",
                                   hint="check the network and the endpoint (HF_ENDPOINT), then run again")
        time.sleep(backoff * 2 ** attempt)
    raise AssertionError("unreachable")


def _check_paths(files: Sequence[RepoFile], repo: str) -> None:
    for f in files:
        parts = PurePosixPath(f.path).parts
        if f.path.startswith("/") or "\\" in f.path or ".." in parts or not parts:
            raise HuggingFaceError(f"{repo} lists a file with an unsafe path: {f.path!r}")


def _repo_file(sibling: dict[str, Any]) -> RepoFile:
    lfs = sibling.get("lfs") or {}
    size = lfs.get("size", sibling.get("size"))
    return RepoFile(path=sibling["rfilename"], size=int(size) if size is not None else 0,
                    sha256=lfs.get("sha256"), blob_id=None if lfs else sibling.get("blobId"))


def _api_error(response: requests.Response, endpoint: str, token: Secret | None, repo: str,
               revision: str) -> HuggingFaceError:
    code = response.headers.get("X-Error-Code", "")
    page = f"{endpoint}/{repo}"
    if code == "RevisionNotFound" or (response.status_code == 404 and "revision" in response.text.lower()):
        return HuggingFaceError(f"{repo} has no revision {revision!r} at {endpoint}",
                                hint=f"check the commit on {page}/commits/main")
    if code == "GatedRepo" or response.status_code == 403:
        return HuggingFaceError(f"{repo} is gated and the token given has no access to it "
                                f"(HTTP {response.status_code})",
                                hint=f"accept the licence on {page} with the account of the token, then run again")
    if response.status_code == 401:
        if token:
            return HuggingFaceError(f"{endpoint} refused the token for {repo} (HTTP 401): it is invalid, or the "
                                    "repository does not exist", hint="check the token and the repository name")
        return HuggingFaceError(f"{repo} needs a token, or does not exist (HTTP 401 from {endpoint})",
                                hint="pass --input token=... or set HF_TOKEN (a read token of an account that "
                                     "accepted the model's licence)")
    if response.status_code == 404:
        kind = "dataset" if repo.startswith(DATASETS) else "model"
        return HuggingFaceError(f"{endpoint} has no {kind} repository {repo.removeprefix(DATASETS)!r} (HTTP 404)",
                                hint="check the repository name (ORG/NAME)")
    return HuggingFaceError(f"{endpoint} answered HTTP {response.status_code} when asked for the files of {repo}")


# --- downloading and checking ----------------------------------------------------------------------

def _fetch_all(endpoint: str, repo: str, commit: str, files: Sequence[RepoFile], scratch: Path, *,
               token: Secret | None, retries: int, backoff: float, on_progress: ProgressCallback | None,
               log: logging.Logger) -> None:
    total = sum(f.size for f in files)
    report = on_progress or (lambda done, total: None)
    manifest_path = scratch / MANIFEST
    verified = _read_manifest(manifest_path)
    done = 0
    for f in files:
        target = scratch / f.path
        if _already_verified(verified, f, target):
            log.info("%s: already downloaded and checked", f.path)
        else:
            url = f"{endpoint}/{repo}/resolve/{commit}/{quote(f.path)}"
            def file_progress(got: int, _size: int | None, base: int = done) -> None:
                report(base + got, total)

            result = download(url, target, sha256=f.sha256, token=token, retries=retries, backoff=backoff,
                              keep_partial=True, log=log, on_progress=file_progress)
            if f.blob_id is not None:
                _check_blob_id(target, f, repo)
            what = "sha256 verified" if f.sha256 else "git blob id verified" if f.blob_id else "not verified"
            log.info("%s: %d bytes, %s", f.path, result.size, what)
            st = target.stat()
            verified[f.path] = [st.st_size, st.st_mtime_ns, f.sha256 or f.blob_id]
            _write_manifest(manifest_path, verified)
        done += f.size
        report(done, total)


def git_blob_id(path: Path) -> str:
    """The id git gives the file's content: the sha1 of `blob SIZE\\0` followed by the bytes."""
    hasher = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            hasher.update(block)
    return hasher.hexdigest()


def _check_blob_id(path: Path, f: RepoFile, repo: str) -> None:
    digest = git_blob_id(path)
    if digest != f.blob_id:
        path.unlink(missing_ok=True)
        raise HuggingFaceError(f"{f.path} of {repo} does not match its git blob id: expected {f.blob_id}, got "
                               f"{digest}; the file was removed",
                               hint="run again; if it fails again, the server serves another file")


def _already_verified(verified: dict[str, object], f: RepoFile, path: Path) -> bool:
    try:
        st = path.stat()
    except OSError:
        return False
    return verified.get(f.path) == [st.st_size, st.st_mtime_ns, f.sha256 or f.blob_id]


def _read_manifest(path: Path) -> dict[str, object]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
        return value if isinstance(value, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_manifest(path: Path, verified: dict[str, object]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(verified, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def _secret(token: Secret | str | None) -> Secret | None:
    """A caller's plain string is wrapped at once, so no repr from here on shows it; "" means none."""
    if isinstance(token, str):
        token = Secret(token)
    return token or None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB"


__all__ = ["DUPLICATE_WEIGHTS", "MANIFEST", "HuggingFaceError", "RepoFile", "check_space", "current_commit",
           "download_repo", "git_blob_id", "is_commit", "list_files", "require_commit", "select_files"]
