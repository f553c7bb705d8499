"""One Redactor (cmx.secrets) for every writer of a run: secret values in every form they travel in, and the
credentials of any URL, out of the step log, run.json, cmx.lock, the cache entry's meta.json, the harness's files,
and the lines cmx prints; a URL password beside an API key is refused before anything runs."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cmx.mlperf.loadgen.harness import copy_redacted, harness_redactor
from cmx.mlperf.loadgen.harness_config import (
    API_KEY_ENV,
    URL_ENV,
    EndpointSettings,
    HarnessConfig,
    endpoint_environment,
    endpoint_url,
)
from cmx.secrets import Redactor, Secret, masked_url
from tests.conftest import Home
from tests.hf_server import serve
from tests.tools.test_download import DATA, Act, Handler, Site

PASSWORD = "PW-a1b2c3d4"
KEY = "sk-e5f6a7b8c9"


def files_holding(root: Path, value: str) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and not p.is_symlink() and value.encode() in p.read_bytes())


def test_a_url_is_shown_with_its_user_and_never_its_password_or_a_token_given_as_user():
    assert masked_url(f"https://alice:{PASSWORD}@host:8443/v1?x=1") == "https://alice:***@host:8443/v1?x=1"
    assert masked_url("https://hf_TOKEN123@host/f.bin") == "https://***@host/f.bin"
    assert masked_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    # an ssh URL's user is an account (ssh authenticates with keys): shown; its password, were one given, is not
    assert masked_url("ssh://git@github.com/o/r.git") == "ssh://git@github.com/o/r.git"
    assert masked_url("git+ssh://git@host/r") == "git+ssh://git@host/r"
    assert masked_url(f"ssh://bob:{PASSWORD}@host/r") == "ssh://bob:***@host/r"
    # nor is an ssh user a secret to blank wherever the word appears in a log
    assert Redactor.of(["ssh://git@github.com/o/r.git"], environment={}).redact("git fetch") == "git fetch"


def test_the_redactor_catches_a_password_as_written_percent_decoded_and_inside_a_basic_header():
    url = "http://alice:p%40ss-word@host/v1"
    redactor = Redactor.of([url, Secret(KEY), "plain words"], environment={"HF_TOKEN": "hf_tokenvalue"})
    basic = base64.b64encode(b"alice:p@ss-word").decode()
    text = (f"GET {url} -> 500 Authorization: Basic {basic}; password p@ss-word; Bearer {KEY}; hf_tokenvalue; "
            "and http://bob:other@elsewhere/x")
    shown = redactor.redact(text)
    for value in ("p%40ss-word", "p@ss-word", basic, KEY, "hf_tokenvalue", "other"):
        assert value not in shown
    assert "http://alice:***@host/v1" in shown and "http://bob:***@elsewhere/x" in shown
    assert redactor.redact("plain words") == "plain words"
    assert redactor.redact_json({"problems": [f"echo {KEY}"], "n": 3}) == {"problems": ["echo ********"], "n": 3}


def test_download_file_keeps_a_url_password_out_of_its_log_records_lock_and_cache_entry(builtin: Home):
    site = Site(files={"/data.bin": DATA}, acts={"/data.bin": [Act(kind="status", status=503)]})
    server = serve(site, Handler)
    next(server)
    try:
        url = site.url.replace("http://", f"http://alice:{PASSWORD}@") + "/data.bin"
        proc = builtin.cmx("run", "download file", "--input", f"url={url}", "--input", "retries=3",
                           "--progress", "none", timeout=120)
        again = builtin.cmx("run", "download file", "--input", f"url={url}", "--input", "retries=3",
                            "--progress", "none", timeout=120)  # from the cache: no memo may keep the URL
        assert again.returncode == 0, again.stderr[-3000:]
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [s.authorization for s in site.seen][-1] == "Basic " + base64.b64encode(
        f"alice:{PASSWORD}".encode()).decode()  # the password was used
    [log] = (builtin.root / "runs").glob("*/logs/download-file.log")
    text = log.read_text()
    assert "not verified" in text and "attempt 1 of" in text  # the lines the password used to be in
    assert f"{site.url.replace('http://', 'http://alice:***@')}/data.bin" in text
    assert files_holding(builtin.root, PASSWORD) == [] and PASSWORD not in proc.stdout + proc.stderr
    [meta] = (builtin.root / "cache").rglob("meta.json")
    assert json.loads(meta.read_text())["inputs"]["url"].startswith("http://alice:***@127.0.0.1:")


def test_a_url_password_and_an_api_key_together_are_refused_in_one_line_before_anything_runs(builtin: Home):
    proc = builtin.cmx("plan", "app mlperf inference llama2 _cpu _tiny _endpoint",
                       "--input", f"endpoint_url=http://alice:{PASSWORD}@gw:8000/v1",
                       "--input", f"endpoint_api_key={KEY}")
    assert proc.returncode == 1
    first = proc.stderr.strip().splitlines()[0]
    assert "http://alice:***@gw:8000/v1 holds credentials and an API key is given too" in first, proc.stderr
    assert PASSWORD not in proc.stdout + proc.stderr and KEY not in proc.stdout + proc.stderr
    assert not (builtin.root / "runs").exists() or not any((builtin.root / "runs").iterdir())


def test_harness_config_json_holds_the_url_masked_and_the_harness_takes_it_from_its_environment(tmp_path: Path):
    real = f"http://alice:{PASSWORD}@gw:8000/v1"
    config = HarnessConfig(model=tmp_path, dataset=tmp_path, scenario="Offline", mode="performance",
                           user_conf=tmp_path / "user.conf", output=tmp_path, endpoint=EndpointSettings(url=real))
    written = config.to_json()
    assert PASSWORD not in written and "http://alice:***@gw:8000/v1" in written
    read = HarnessConfig.from_json(written)
    env = endpoint_environment(config.endpoint, KEY)
    assert env == {API_KEY_ENV: KEY, URL_ENV: real}
    assert read.endpoint is not None and endpoint_url(read.endpoint, env) == real
    # a URL of another server in the environment is not taken for this one
    assert endpoint_url(read.endpoint, {URL_ENV: f"http://alice:{PASSWORD}@other:8000/v1"}) == read.endpoint.url
    assert endpoint_environment(EndpointSettings(url="http://gw:8000/v1")) == {}


def test_the_harness_log_gets_what_the_process_prints_redacted_tracebacks_included(tmp_path: Path):
    env = {API_KEY_ENV: KEY, URL_ENV: f"http://alice:{PASSWORD}@gw/v1"}
    script = (f"import sys; print('answer: Bearer {KEY}', flush=True); "
              f"raise RuntimeError('failed http://alice:{PASSWORD}@gw/v1')")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    log = tmp_path / "harness.log"
    with log.open("w", encoding="utf-8") as out:
        copy_redacted(proc, out, harness_redactor(env)).join(30)
    proc.wait()
    text = log.read_text()
    assert "answer: Bearer ********" in text and "RuntimeError: failed http://alice:***@gw/v1" in text
    assert KEY not in text and PASSWORD not in text


@pytest.mark.parametrize("value", [KEY, PASSWORD])
def test_the_harness_redactor_knows_the_key_and_the_url_password_it_was_given(value: str):
    redactor = harness_redactor({API_KEY_ENV: KEY, URL_ENV: f"http://alice:{PASSWORD}@gw/v1"})
    assert value not in redactor.redact(f"HTTP 500: {value}")


def test_cmx_docker_print_run_and_plan_show_a_url_password_as_stars(builtin: Home):
    url = f"http://alice:{PASSWORD}@127.0.0.1:9/x.bin"
    shown = [builtin.cmx(*verb, "download file", "--input", f"url={url}")
             for verb in (("docker", "--print-run"), ("plan", "-v"), ("plan", "--json"), ("lock",))]
    assert [p.returncode for p in shown] == [0, 0, 0, 0], [p.stderr for p in shown]
    assert all(PASSWORD not in p.stdout + p.stderr for p in shown)
    assert "http://alice:***@127.0.0.1:9/x.bin" in shown[0].stdout and "alice:***@" in shown[1].stdout
