"""A Hugging Face Hub on 127.0.0.1 for tests: one gated repository at one commit, behind a bearer token.

It serves the revision API (`/api/models/{repo}/revision/{rev}?blobs=true`, or `/api/datasets/...` for a
`datasets/ORG/NAME` repository, listing `siblings` with their size and LFS sha256 or git blob id) and
`/{repo}/resolve/{commit}/{path}`, with
byte ranges (`Range: bytes=N-`, 206) so that downloads can resume. A request without the token
gets 401; one with OTHER_TOKEN (an account that has not accepted the licence) gets 403.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

TOKEN = "hf_Qx7TinyHubTokenThatMustNeverBePrinted"
OTHER_TOKEN = "hf_Wm2AnotherAccountWithoutTheLicence"
REPO_ID = "meta-llama/Llama-2-70b-chat-hf"
COMMIT = "e4b287212771ce25f782ed8636cbea2d7c5ac7e2"  # the recipe's default revision


@dataclass
class Seen:
    path: str
    query: dict[str, list[str]]
    authorization: str | None
    range: str | None = None


@dataclass
class HubSite:
    """One repository at one commit; `branches` name other revisions that resolve to it."""

    files: dict[str, bytes]
    lfs: set[str]
    corrupt: set[str] = field(default_factory=set)  # served with other bytes than listed
    branches: tuple[str, ...] = ("main",)
    drops: dict[str, list[int]] = field(default_factory=dict)  # file -> cut the next answers after N body bytes
    listed_sha: str = COMMIT  # the commit the API says it lists (a mirror that serves another)
    extra_siblings: list[dict] = field(default_factory=list)  # listed, not served (an unsafe path...)
    repo: str = REPO_ID  # datasets/ORG/NAME for a dataset's repository
    seen: list[Seen] = field(default_factory=list)
    url: str = ""

    def sibling(self, path: str) -> dict:
        data = self.files[path]
        entry: dict = {"rfilename": path, "size": len(data)}
        if path in self.lfs:
            entry["blobId"] = hashlib.sha1(b"pointer " + path.encode()).hexdigest()
            entry["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
        else:
            entry["blobId"] = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        return entry

    def requests_for(self, prefix: str) -> list[str]:
        return [s.path for s in self.seen if s.path.startswith(prefix)]

    def ranges(self, name: str) -> list[str | None]:
        """The Range header of each request for file `name`, in order (None: the whole file)."""
        return [s.range for s in self.seen if s.path == f"/{REPO_ID}/resolve/{COMMIT}/{name}"]


class HubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    site: HubSite

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        auth = self.headers.get("Authorization")
        self.site.seen.append(Seen(path, parse_qs(parts.query), auth, self.headers.get("Range")))
        if auth == f"Bearer {OTHER_TOKEN}":
            return self._send(403, b'{"error":"Access to model is restricted."}', {"X-Error-Code": "GatedRepo"})
        if auth != f"Bearer {TOKEN}":
            return self._send(401, b'{"error":"Invalid username or password."}',
                              {"X-Error-Code": "GatedRepo"} if auth else {})
        repo = self.site.repo
        api = f"/api/{repo if repo.startswith('datasets/') else 'models/' + repo}/revision/"
        resolve = f"/{repo}/resolve/{COMMIT}/"
        if path.startswith(api):
            revision = path[len(api):]
            if revision not in (COMMIT, *self.site.branches):
                return self._send(404, b'{"error":"Invalid rev id"}', {"X-Error-Code": "RevisionNotFound"})
            body = {"id": repo.removeprefix("datasets/"), "sha": self.site.listed_sha, "private": False,
                    "gated": "manual",
                    "siblings": [self.site.sibling(p) for p in self.site.files] + self.site.extra_siblings}
            return self._send(200, json.dumps(body).encode(), {"Content-Type": "application/json"})
        if path.startswith(resolve) and path[len(resolve):] in self.site.files:
            name = path[len(resolve):]
            data = self.site.files[name]
            return self._file(name, data[::-1] if name in self.site.corrupt else data)
        return self._send(404, b'{"error":"Entry not found"}', {"X-Error-Code": "EntryNotFound"})

    def _file(self, name: str, data: bytes) -> None:
        start = 0
        header = self.headers.get("Range") or ""
        if header.startswith("bytes=") and header.endswith("-"):
            start = int(header[len("bytes="):-1])
        headers = {"ETag": '"x"'}
        if start:
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        drops = self.site.drops.get(name)
        cut = drops.pop(0) if drops else None
        self._send(206 if start else 200, data[start:], headers, cut=cut)

    def _send(self, status: int, body: bytes, headers: dict[str, str], cut: int | None = None) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if cut is None:
            self.wfile.write(body)
            return
        self.wfile.write(body[:cut])
        self.wfile.flush()
        self.close_connection = True  # the client sees the body end early


def serve(site: Any, handler: type | None = None) -> Iterator[Any]:
    """Serve `site` on a free port of 127.0.0.1 (sets its `url`) until the generator is closed: for
    fixtures. `handler` (default HubHandler) reads the site from its class attribute `site`."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (handler or HubHandler,), {"site": site}))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    site.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield site
    server.shutdown()
    server.server_close()
