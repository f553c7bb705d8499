"""cmx.tools.download and the download-file recipe, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import logging
import random
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import requests

from cmx.secrets import Secret
from cmx.tools.download import DownloadError, DownloadResult, download, partial_path
from tests.conftest import REPO, Home
from tests.hf_server import serve

TOKEN = "hf_Zq81xPwSecretTokenNotForMessages"
DATA = random.Random(1).randbytes(1_000_000)  # about 15 chunks of 64 KiB
DATA_SHA = hashlib.sha256(DATA).hexdigest()
CHUNK = 1 << 16
# a drop point on a chunk boundary: requests hands over whole chunks, so the bytes of a chunk
# cut short by a drop are not written, and are fetched again by the resumed request
DROP = 5 * CHUNK


# --- the server -------------------------------------------------------------------------------

@dataclass
class Act:
    """What the server does for one request; a path's list of Acts is used up in order, then `serve`."""

    kind: str = "serve"  # serve | drop (after n body bytes) | status | whole (ignore Range) | stall | redirect
    n: int = 0
    status: int = 200
    location: str = ""
    then: Callable[[], None] | None = None  # runs after the response (e.g. the file changes upstream)


@dataclass
class Seen:
    path: str
    range: str | None
    if_range: str | None
    authorization: str | None


@dataclass
class Site:
    files: dict[str, bytes] = field(default_factory=dict)
    acts: dict[str, list[Act]] = field(default_factory=dict)
    private: set[str] = field(default_factory=set)  # paths that need `Bearer TOKEN`
    seen: list[Seen] = field(default_factory=list)
    url: str = ""

    def ranges(self, path: str) -> list[str | None]:
        return [s.range for s in self.seen if s.path == path]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    site: Site

    def log_message(self, *args: object) -> None:  # keep pytest's output clean
        pass

    def do_GET(self) -> None:
        site = self.site
        path = self.path.split("?")[0]
        site.seen.append(Seen(path, self.headers.get("Range"), self.headers.get("If-Range"),
                              self.headers.get("Authorization")))
        act = site.acts[path].pop(0) if site.acts.get(path) else Act()
        if path in site.private and self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._status(401 if self.headers.get("Authorization") is None else 403)
        elif act.kind == "status":
            self._status(act.status)
        elif act.kind == "redirect":
            self.send_response(302)
            self.send_header("Location", act.location)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path not in site.files:
            self._status(404)
        else:
            self._file(site.files[path], act)
        if act.then:
            act.then()

    def _status(self, code: int) -> None:
        body = b"no\n"
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _file(self, data: bytes, act: Act) -> None:
        etag = f'"{hashlib.sha1(data).hexdigest()}"'
        start = _range_start(self.headers.get("Range"))
        if self.headers.get("If-Range") not in (None, etag) or act.kind == "whole":
            start = None  # RFC 9110: a changed file (or a server without Range support) sends all of it
        if start is not None and start >= len(data):
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{len(data)}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = data[start or 0:]
        self.send_response(206 if start is not None else 200)
        if start is not None:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", etag)
        self.end_headers()
        if act.kind == "drop":
            self.wfile.write(body[:act.n])
            self.wfile.flush()
            self.close_connection = True  # the client sees the body end early
        elif act.kind == "stall":
            self.wfile.write(body[:act.n])
            self.wfile.flush()
            time.sleep(1.0)  # longer than the client's timeout
            self.close_connection = True
        else:
            self.wfile.write(body)


def _range_start(header: str | None) -> int | None:
    if header and header.startswith("bytes=") and header.endswith("-"):
        return int(header[len("bytes="):-1])
    return None


@pytest.fixture
def site() -> Iterator[Site]:
    yield from serve(Site(files={"/data.bin": DATA}), Handler)


def fetch(site: Site, dest: Path, path: str = "/data.bin", **kw: Any) -> DownloadResult:
    """download() with fast test settings: no backoff, small chunks, short timeout."""
    kw.setdefault("sha256", DATA_SHA)
    kw.setdefault("backoff", 0)
    kw.setdefault("timeout", 5)
    kw.setdefault("chunk_size", CHUNK)
    return download(site.url + path, dest, **kw)


# --- the tool ---------------------------------------------------------------------------------

def test_download_writes_the_file_and_reports_size_checksum_and_one_attempt(site: Site, tmp_path: Path) -> None:
    result = fetch(site, tmp_path / "out" / "data.bin")
    assert result.path.read_bytes() == DATA
    assert (result.size, result.sha256, result.attempts, result.resumed, result.verified) == \
        (len(DATA), DATA_SHA, 1, False, True)
    assert not partial_path(result.path).exists()
    assert site.ranges("/data.bin") == [None]


def test_a_connection_dropped_mid_file_is_resumed_with_a_range_request(site: Site, tmp_path: Path) -> None:
    site.acts["/data.bin"] = [Act("drop", n=DROP)]
    result = fetch(site, tmp_path / "data.bin")
    assert result.resumed and result.attempts == 2
    assert site.ranges("/data.bin") == [None, f"bytes={DROP}-"]
    # the checksum covers the bytes of the first attempt too, re-read from the partial file
    assert result.sha256 == DATA_SHA and result.path.read_bytes() == DATA


def test_each_resume_starts_where_the_previous_attempt_stopped(site: Site, tmp_path: Path) -> None:
    site.acts["/data.bin"] = [Act("drop", n=CHUNK), Act("drop", n=CHUNK), Act("drop", n=CHUNK)]
    result = fetch(site, tmp_path / "data.bin", retries=1)  # each attempt progresses, so 1 retry is enough
    assert site.ranges("/data.bin") == [None, f"bytes={CHUNK}-", f"bytes={2 * CHUNK}-", f"bytes={3 * CHUNK}-"]
    assert result.attempts == 4 and result.path.read_bytes() == DATA


def test_a_resume_sends_if_range_so_a_file_changed_upstream_is_restarted_not_spliced(site: Site,
                                                                                     tmp_path: Path) -> None:
    new = bytes(reversed(DATA))

    def change() -> None:
        site.files["/data.bin"] = new

    site.acts["/data.bin"] = [Act("drop", n=DROP, then=change)]
    result = fetch(site, tmp_path / "data.bin", sha256=hashlib.sha256(new).hexdigest())
    assert site.seen[1].range == f"bytes={DROP}-" and site.seen[1].if_range == f'"{hashlib.sha1(DATA).hexdigest()}"'
    assert result.path.read_bytes() == new and not result.resumed


def test_a_server_that_ignores_range_restarts_from_zero_and_succeeds(site: Site, tmp_path: Path) -> None:
    site.acts["/data.bin"] = [Act("drop", n=DROP), Act("whole")]
    result = fetch(site, tmp_path / "data.bin")
    assert site.ranges("/data.bin") == [None, f"bytes={DROP}-"]
    assert result.path.read_bytes() == DATA and result.sha256 == DATA_SHA and not result.resumed


def test_a_stalled_server_times_out_and_the_download_resumes(site: Site, tmp_path: Path) -> None:
    site.acts["/data.bin"] = [Act("stall", n=DROP)]
    result = fetch(site, tmp_path / "data.bin", timeout=0.3)
    assert site.ranges("/data.bin") == [None, f"bytes={DROP}-"]
    assert result.resumed and result.path.read_bytes() == DATA


def test_a_server_that_always_drops_fails_after_the_retries_and_keeps_the_partial_file(site: Site,
                                                                                       tmp_path: Path) -> None:
    site.acts["/data.bin"] = [Act("drop", n=0) for _ in range(10)]
    dest = tmp_path / "data.bin"
    with pytest.raises(DownloadError) as info:
        fetch(site, dest, retries=2)
    assert len(site.seen) == 3
    assert "the connection dropped mid-file" in info.value.message
    assert "gave up after 3 attempts" in info.value.message
    assert not dest.exists()


def test_bytes_kept_by_a_failed_call_are_resumed_by_the_next_call(site: Site, tmp_path: Path) -> None:
    site.acts["/data.bin"] = [Act("drop", n=DROP)] + [Act("drop", n=0) for _ in range(2)]
    dest = tmp_path / "data.bin"
    with pytest.raises(DownloadError) as info:
        fetch(site, dest, retries=1)
    assert f"the {DROP} bytes received are kept in {partial_path(dest)}" in info.value.message
    assert partial_path(dest).stat().st_size == DROP and not dest.exists()
    result = fetch(site, dest)
    assert site.ranges("/data.bin")[-1] == f"bytes={DROP}-"
    assert result.resumed and result.path.read_bytes() == DATA and not partial_path(dest).exists()


def test_keep_partial_false_removes_what_a_failed_download_received(site: Site, tmp_path: Path) -> None:
    site.acts["/data.bin"] = [Act("drop", n=DROP), Act("drop", n=0), Act("drop", n=0)]
    dest = tmp_path / "data.bin"
    with pytest.raises(DownloadError, match="nothing was kept"):
        fetch(site, dest, retries=1, keep_partial=False)
    assert not partial_path(dest).exists() and not dest.exists()


def test_a_complete_partial_file_is_finished_when_the_server_answers_416(site: Site, tmp_path: Path) -> None:
    dest = tmp_path / "data.bin"
    partial_path(dest).write_bytes(DATA)  # an earlier call received everything but stopped before the rename
    result = fetch(site, dest)
    assert site.ranges("/data.bin") == [f"bytes={len(DATA)}-"]
    assert result.path.read_bytes() == DATA and result.sha256 == DATA_SHA


def test_a_checksum_mismatch_removes_the_partial_file_and_names_both_digests(site: Site, tmp_path: Path) -> None:
    site.files["/data.bin"] = DATA[:-1] + b"\x00"  # the wrong bytes
    got = hashlib.sha256(site.files["/data.bin"]).hexdigest()
    dest = tmp_path / "data.bin"
    with pytest.raises(DownloadError) as info:
        fetch(site, dest)
    assert f"expected {DATA_SHA}, got {got}" in info.value.message
    assert "the downloaded file was removed" in info.value.message
    assert not dest.exists() and not partial_path(dest).exists()


def test_without_sha256_the_file_is_downloaded_but_not_verified(site: Site, tmp_path: Path) -> None:
    result = fetch(site, tmp_path / "data.bin", sha256=None)
    assert result.sha256 == DATA_SHA and not result.verified


def test_a_malformed_sha256_is_refused_before_any_request(site: Site, tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match="64 hex digits"):
        fetch(site, tmp_path / "data.bin", sha256="abc123")
    assert site.seen == []


def test_the_token_is_sent_as_a_bearer_header(site: Site, tmp_path: Path) -> None:
    site.files["/private.bin"] = DATA
    site.private.add("/private.bin")
    result = fetch(site, tmp_path / "data.bin", path="/private.bin", token=Secret(TOKEN))
    assert site.seen[0].authorization == f"Bearer {TOKEN}" and result.path.read_bytes() == DATA


def test_401_without_a_token_says_no_token_was_given(site: Site, tmp_path: Path) -> None:
    site.files["/private.bin"] = DATA
    site.private.add("/private.bin")
    with pytest.raises(DownloadError) as info:
        fetch(site, tmp_path / "data.bin", path="/private.bin")
    assert "HTTP 401" in info.value.message and "no token was given" in info.value.message
    assert info.value.hint == "pass --input token=... or set HF_TOKEN"
    assert len(site.seen) == 1  # not retried


def test_a_refused_token_is_reported_without_its_value(site: Site, tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    site.files["/private.bin"] = DATA
    site.private.add("/private.bin")
    wrong = TOKEN + "-wrong"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(DownloadError) as info:
        fetch(site, tmp_path / "data.bin", path="/private.bin", token=Secret(wrong))
    assert "HTTP 403" in info.value.message and "the token was refused" in info.value.message
    shown = " ".join([str(info.value), repr(info.value), info.value.hint or "", caplog.text])
    assert TOKEN not in shown
    assert len(site.seen) == 1


@pytest.mark.parametrize("status", [401, 403])
def test_401_and_403_name_the_status_and_distinguish_token_given_or_not(site: Site, tmp_path: Path,
                                                                        status: int) -> None:
    site.acts["/data.bin"] = [Act("status", status=status), Act("status", status=status)]
    with pytest.raises(DownloadError) as without:
        fetch(site, tmp_path / "a.bin")
    with pytest.raises(DownloadError) as given:
        fetch(site, tmp_path / "b.bin", token=Secret(TOKEN))
    assert f"HTTP {status}" in without.value.message and "no token was given" in without.value.message
    assert f"HTTP {status}" in given.value.message and "the token was refused" in given.value.message
    assert TOKEN not in str(given.value)


def test_404_says_the_url_was_not_found_and_is_not_retried(site: Site, tmp_path: Path) -> None:
    with pytest.raises(DownloadError) as info:
        fetch(site, tmp_path / "data.bin", path="/missing.bin")
    assert info.value.message == f"{site.url}/missing.bin was not found (HTTP 404)"
    assert len(site.seen) == 1


def test_other_4xx_answers_are_not_retried(site: Site, tmp_path: Path) -> None:
    site.acts["/data.bin"] = [Act("status", status=410)]
    with pytest.raises(DownloadError, match="answered HTTP 410 Gone; not retried"):
        fetch(site, tmp_path / "data.bin")
    assert len(site.seen) == 1


def test_500_is_retried_and_then_succeeds(site: Site, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    site.acts["/data.bin"] = [Act("status", status=500), Act("status", status=503)]
    caplog.set_level(logging.WARNING, logger="cmx.tools.download")
    result = fetch(site, tmp_path / "data.bin")
    assert result.attempts == 3 and result.path.read_bytes() == DATA
    assert "HTTP 500 Internal Server Error; retrying" in caplog.text


def test_persistent_5xx_gives_up_after_the_retries(site: Site, tmp_path: Path) -> None:
    site.acts["/data.bin"] = [Act("status", status=502) for _ in range(5)]
    with pytest.raises(DownloadError, match=r"HTTP 502 Bad Gateway \(gave up after 3 attempts; nothing was kept\)"):
        fetch(site, tmp_path / "data.bin", retries=2)


def test_backoff_doubles_between_attempts_that_make_no_progress(site: Site, tmp_path: Path) -> None:
    site.acts["/data.bin"] = [Act("status", status=503) for _ in range(3)]
    started = time.monotonic()
    fetch(site, tmp_path / "data.bin", backoff=0.05)  # sleeps 0.05 + 0.1 + 0.2
    assert time.monotonic() - started >= 0.35


def test_the_token_is_not_sent_to_another_host_after_a_redirect(site: Site, tmp_path: Path) -> None:
    # Hugging Face redirects to a CDN; the token is for huggingface.co only (requests drops it)
    site.files["/private.bin"] = DATA
    site.private.add("/private.bin")
    other_host = site.url.replace("127.0.0.1", "localhost")
    site.acts["/private.bin"] = [Act("redirect", location=f"{other_host}/data.bin")]
    result = fetch(site, tmp_path / "data.bin", path="/private.bin", token=Secret(TOKEN))
    assert [s.authorization for s in site.seen] == [f"Bearer {TOKEN}", None]
    assert result.path.read_bytes() == DATA


def test_progress_reports_bytes_done_and_the_total(site: Site, tmp_path: Path) -> None:
    site.acts["/data.bin"] = [Act("drop", n=DROP)]
    calls: list[tuple[int, int | None]] = []
    fetch(site, tmp_path / "data.bin", on_progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, len(DATA)) and calls[-1] == (len(DATA), len(DATA))
    assert (DROP, len(DATA)) in calls  # the resumed attempt starts from what is on disk
    assert all(total == len(DATA) for _, total in calls)


def test_an_existing_destination_is_replaced_only_after_the_checksum_passes(site: Site, tmp_path: Path) -> None:
    dest = tmp_path / "data.bin"
    dest.write_bytes(b"old")
    with pytest.raises(DownloadError):
        fetch(site, dest, sha256="0" * 64)
    assert dest.read_bytes() == b"old"
    fetch(site, dest)
    assert dest.read_bytes() == DATA


def test_a_file_url_is_copied_and_verified(tmp_path: Path) -> None:
    source = tmp_path / "mirror" / "data.bin"
    source.parent.mkdir()
    source.write_bytes(DATA)
    result = download(source.as_uri(), tmp_path / "out" / "data.bin", sha256=DATA_SHA)
    assert result.path.read_bytes() == DATA and result.verified and result.attempts == 0
    with pytest.raises(DownloadError, match="was not found"):
        download((tmp_path / "nope.bin").as_uri(), tmp_path / "x.bin", sha256=None)


def test_an_unsupported_scheme_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match="the hf URL scheme is not supported"):
        download("hf://org/model/file", tmp_path / "x.bin", sha256=None)


def test_a_refused_connection_is_retried_then_reported(tmp_path: Path) -> None:
    with socket_on_a_closed_port() as port, \
            pytest.raises(DownloadError, match=r"connection refused .gave up after 2 attempts"):
        download(f"http://127.0.0.1:{port}/x", tmp_path / "x.bin", sha256=None, retries=1, backoff=0)


class socket_on_a_closed_port:
    """A port nothing listens on: bound, then closed."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def __exit__(self, *exc: object) -> None:
        pass


def test_a_caller_session_is_used_and_left_open(site: Site, tmp_path: Path) -> None:
    with requests.Session() as session:
        session.headers["X-Test"] = "1"
        fetch(site, tmp_path / "a.bin", session=session)
        fetch(site, tmp_path / "b.bin", session=session)  # still usable
    assert len(site.seen) == 2


# --- the download-file recipe, through the CLI --------------------------------------------------

@pytest.fixture
def dl_home(home: Home) -> Home:
    shutil.copytree(REPO / "recipes" / "download-file", home.recipes / "download-file")
    return home


def _cache_entries(home: Home) -> list[dict[str, Any]]:
    entries = home.cmx_json("cache", "ls")
    assert isinstance(entries, list)  # `cmx cache ls --json` prints a list
    return entries


@pytest.mark.e2e
def test_recipe_downloads_into_the_cache_and_a_second_run_makes_no_request(dl_home: Home, site: Site) -> None:
    url = f"{site.url}/data.bin"
    first = dl_home.cmx_json("run", "download file", "--input", f"url={url}", "--input", f"sha256={DATA_SHA}")
    path = Path(first["outputs"]["path"])
    assert path.name == "data.bin" and path.read_bytes() == DATA
    assert path.is_relative_to(dl_home.root / "cache" / "download-file")
    assert first["outputs"]["sha256"] == DATA_SHA and first["outputs"]["size"] == len(DATA)
    assert first["outputs"]["verified"] is True
    second = dl_home.cmx_json("run", "download file", "--input", f"url={url}", "--input", f"sha256={DATA_SHA}")
    assert second["outputs"] == first["outputs"]
    assert len(site.seen) == 1  # the second run came from the cache
    assert len(_cache_entries(dl_home)) == 1


@pytest.mark.e2e
def test_recipe_checksum_mismatch_exits_1_with_no_cache_entry_and_no_traceback(dl_home: Home, site: Site) -> None:
    wrong = "0" * 64
    proc = dl_home.cmx("run", "download file", "--input", f"url={site.url}/data.bin", "--input", f"sha256={wrong}")
    assert proc.returncode == 1
    assert f"expected {wrong}, got {DATA_SHA}" in proc.stderr and "the downloaded file was removed" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert _cache_entries(dl_home) == []


@pytest.mark.e2e
def test_recipe_without_sha256_downloads_says_unverified_and_the_token_stays_out_of_logs(
        dl_home: Home, site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    big = DATA * 3  # the recipe reads 1 MiB chunks: drop after the first one
    site.files["/private.bin"] = big
    site.private.add("/private.bin")
    site.acts["/private.bin"] = [Act("drop", n=1 << 20)]
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    result = dl_home.cmx_json("run", "download file", "--input", f"url={site.url}/private.bin",
                              "--input", "filename=model.bin")
    assert result["outputs"]["verified"] is False and result["outputs"]["sha256"] == hashlib.sha256(big).hexdigest()
    assert Path(result["outputs"]["path"]).read_bytes() == big and Path(result["outputs"]["path"]).name == "model.bin"
    assert site.seen[-1].authorization == f"Bearer {TOKEN}" and site.seen[-1].range == f"bytes={1 << 20}-"
    logs = "".join(p.read_text() for p in (dl_home.root / "runs").rglob("*") if p.is_file())
    assert "not verified" in logs and TOKEN not in logs
    assert TOKEN not in json.dumps(_cache_entries(dl_home))


@pytest.mark.e2e
def test_recipe_that_gives_up_leaves_no_cache_entry(dl_home: Home, site: Site) -> None:
    site.acts["/data.bin"] = [Act("drop", n=0) for _ in range(5)]
    proc = dl_home.cmx("run", "download file", "--input", f"url={site.url}/data.bin", "--input", "retries=1")
    assert proc.returncode == 1 and "gave up after 2 attempts" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _cache_entries(dl_home) == []


@pytest.mark.e2e
def test_recipe_refuses_a_file_name_that_is_a_path_or_missing(dl_home: Home, site: Site) -> None:
    escape = dl_home.cmx("run", "download file", "--input", f"url={site.url}/data.bin", "--input", "filename=../x.bin")
    assert escape.returncode == 1 and "'../x.bin' is not a plain file name" in escape.stderr
    bare = dl_home.cmx("run", "download file", "--input", f"url={site.url}/")
    assert bare.returncode == 1 and f"{site.url}/ ends with no file name" in bare.stderr
    assert "pass --input filename=NAME" in bare.stderr
    assert site.seen == [] and _cache_entries(dl_home) == []


@pytest.mark.e2e
def test_a_download_that_failed_in_one_run_resumes_in_the_next(dl_home: Home, site: Site) -> None:
    big = DATA * 3
    site.files["/big.bin"] = big
    site.acts["/big.bin"] = [Act("drop", n=1 << 20), Act("drop", n=0), Act("drop", n=0)]  # then serves
    url, sha = f"{site.url}/big.bin", hashlib.sha256(big).hexdigest()
    first = dl_home.cmx("run", "download file", "--input", f"url={url}", "--input", f"sha256={sha}",
                        "--input", "retries=1")
    assert first.returncode == 1 and _cache_entries(dl_home) == []
    second = dl_home.cmx_json("run", "download file", "--input", f"url={url}", "--input", f"sha256={sha}")
    assert Path(second["outputs"]["path"]).read_bytes() == big
    assert site.seen[-1].range == f"bytes={1 << 20}-", "the second run continued the first run's partial file"
    assert not list((dl_home.root / "cache" / "download-file").glob(".scratch-*")), "scratch removed on success"
