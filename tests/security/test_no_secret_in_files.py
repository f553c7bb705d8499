"""No secret reaches a file cmx writes, prints or packages: a real `cmx run` of the tiny Llama 2 app over HTTP, with a
Hugging Face token in the environment, against a server of our own on 127.0.0.1 that echoes the request's
Authorization header back wherever it can (the model list's `owned_by`, the /version answer, HTTP 500 bodies), and
then a scan of every file under the run's home (run records, step logs, harness.log, result.json, cmx_run.json, the
cache entries, the packaged tree, its tarball extracted, the report) and of what the commands printed.

Three runs, since one request carries one Authorization header (cmx refuses a URL password and an API key together):
- the API key (sent as Bearer), which the server echoes in a 500 for every sample: the run fails, its records and
  report are scanned;
- the URL's password (sent as HTTP Basic), which the server echoes in its 200 answers: the run passes, is packaged
  (tree and tarball) and reported, and all is scanned;
- the API key again, echoed in the 200 answers' model list and version: the run passes and is packaged.
"""

from __future__ import annotations

import asyncio
import base64
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, Home
from tests.fake_openai import FakeOpenAIServer

KEY = "sk-KEY-5f3a9c1e7b"
PASSWORD = "PW-8d2e4b6a0c"
TOKEN = "hf_TOKEN2c7e9a1f3d"
USER = "alice"
SYSTEM_FILE = REPO / "docs/examples/system-demo.yaml"
# each value in every form it travels in: as given, and user:password as an HTTP Basic header carries it
FORBIDDEN = {KEY: "the API key", PASSWORD: "the URL password", TOKEN: "the HF token",
             base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(): "the URL password (Basic, base64)"}


class EchoingServer(FakeOpenAIServer):
    """Puts the request's Authorization header into every answer it can: the model's owner and the server's
    version (which cmx records as the server's own words), and, when `fail` is set, an HTTP 500 for every
    completion whose message quotes the header (as a misconfigured proxy's error page does)."""

    def __init__(self, fail: bool) -> None:
        super().__init__()
        self.fail = fail
        self.seen: list[str] = []

    def header(self, request: Any) -> str:
        value = request.headers.get("Authorization", "")
        self.seen.append(value)
        return value

    async def models(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response({"data": [{"id": "own", "owned_by": f"echo {self.header(request)}",
                                            "max_model_len": 2048}]})

    async def complete(self, request: Any) -> Any:
        from aiohttp import web

        body = await request.json()
        header = self.header(request)
        if self.fail and self.completions > 12:  # the backend's probe and warm-up pass; every sample fails
            return web.json_response({"error": {"message": f"bad request with Authorization: {header}"}},
                                     status=500)
        await asyncio.sleep(0.7)  # an Offline run of LoadGen's min_duration (500 ms), with every sample in flight
        n = body["max_tokens"]
        choice = {"text": "x", "token_ids": [7] * n, "finish_reason": "length"}
        return await self.stream_or_json(request, body, [choice], {"usage": {"completion_tokens": n}})


def leaks(root: Path, texts: dict[str, str]) -> dict[str, list[str]]:
    """Each forbidden value -> the files under `root` (tarballs read inside) and the `texts` that hold it."""
    found: dict[str, list[str]] = {}

    def scan(name: str, data: bytes) -> None:
        for value, what in FORBIDDEN.items():
            if value.encode() in data:
                found.setdefault(what, []).append(name)

    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        scan(str(path.relative_to(root)), path.read_bytes())
        if path.name.endswith(".tar.gz"):
            with tarfile.open(path) as tar:
                for member in tar.getmembers():
                    extracted = tar.extractfile(member) if member.isfile() else None
                    if extracted is not None:
                        scan(f"{path.name}:{member.name}", extracted.read())
    for name, text in texts.items():
        scan(name, text.encode())
    return found


def app_run(home: Home, server: EchoingServer, url: str, out: Path, *extra: str) -> Any:
    return home.cmx("run", "app mlperf inference llama2 _cpu _tiny _short _endpoint _submission",
                    "--input", "round=v6.0", "--input", "scenarios=Offline", "--input", "modes=performance,accuracy",
                    "--input", "rows=16", "--input", f"endpoint_url={url}", "--input", "endpoint_model=own",
                    "--input", f"results_dir={out / 'results'}", "--input", "system_name=cpu-box",
                    "--input", "submitter=cmx-test", "--input", f"system_file={SYSTEM_FILE}",
                    "--input", f"submission_dir={out / 'submission'}", "--progress", "none", *extra, timeout=900)


@pytest.mark.e2e
def test_no_key_password_or_token_reaches_any_file_or_output(builtin: Home, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    printed: dict[str, str] = {}
    with EchoingServer(fail=True) as server:  # the key, echoed in a 500 for every sample: a failed run
        failed = app_run(builtin, server, server.url, tmp_path / "keyed", "--input", f"endpoint_api_key={KEY}")
        assert f"Bearer {KEY}" in server.seen  # the key was sent, and so echoed
    assert failed.returncode == 1 and "samples failed in the backend" in failed.stderr, failed.stderr[-3000:]
    with EchoingServer(fail=False) as server:  # the URL's password, sent as Basic auth and echoed: a packaged run
        url = server.url.replace("http://", f"http://{USER}:{PASSWORD}@")
        # the token on the command line too: it must leave argv's records (run.json, cmx_run.json, the README)
        passed = app_run(builtin, server, url, tmp_path / "basic", "--input", f"get-ml-model-llama2.token={TOKEN}")
        assert any(h.startswith("Basic ") for h in server.seen)
    assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-3000:]
    with EchoingServer(fail=False) as server:  # the key again, echoed in the server's own words: a packaged run
        keyed = app_run(builtin, server, server.url, tmp_path / "keyed-ok", "--input", f"endpoint_api_key={KEY}")
        assert f"Bearer {KEY}" in server.seen
    assert keyed.returncode == 0, keyed.stdout[-3000:] + keyed.stderr[-3000:]
    assert list((tmp_path / "keyed-ok/submission").rglob("README.md"))  # the key's run was packaged, and is scanned
    # the tarball submitters upload, from the same results (the app's _submission writes the tree only)
    tarred = builtin.cmx("run", "generate mlperf submission", "--input", f"results_dir={tmp_path / 'basic/results'}",
                         "--input", f"out_dir={tmp_path / 'basic/upload'}", "--input", "submitter=cmx-test",
                         "--input", "division=open", "--input", "tar=true", "--input",
                         f"system_file={SYSTEM_FILE}", "--progress", "none")
    assert tarred.returncode == 0, tarred.stderr[-3000:]
    reports = [builtin.cmx("report", str(tmp_path / run / "results"), "--out", str(tmp_path / f"{run}.html"))
               for run in ("keyed", "basic", "keyed-ok")]
    assert all(r.returncode == 0 for r in reports), [r.stderr for r in reports]
    for name, proc in (("failed run", failed), ("packaged run", passed), ("keyed packaged run", keyed),
                       ("tarball", tarred), *((f"report {i}", r) for i, r in enumerate(reports))):
        printed[f"{name} stdout"], printed[f"{name} stderr"] = proc.stdout, proc.stderr
    files = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    for needed in ("harness.log", "result.json", "cmx_run.json", "run.json", "cmx.lock", "meta.json", "README.md"):
        assert needed in files, needed  # the scan reads what it means to
    assert list(tmp_path.rglob("*.tar.gz")) and list(tmp_path.glob("*.html"))
    assert leaks(tmp_path, printed) == {}
    echoed = json.loads(next((tmp_path / "basic/results").rglob("cmx_run.json")).read_text())["backend"]
    assert "echo" in json.dumps(echoed)  # the server's words are recorded, less the secret in them
