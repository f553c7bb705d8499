"""`cmx pareto` through the CLI, as docs/pareto.md shows it (`--input endpoint_url=URL`, no `_endpoint`: the URL
implies it), against servers on 127.0.0.1 that answer the warm-up and then fail: one answering 500 stops the curve
at its first probe with the server's error, one that stalls is stopped by the first-token deadline."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, Home
from tests.mlperf.pareto.broken_servers import Answers500, Stalls

QUERY = "app mlperf inference llama3.1-8b _cpu _tiny _short"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Home:
    """One home for the module: the tiny model, dataset and tokenizer are built once."""
    root = tmp_path_factory.mktemp("pareto") / "home"
    root.mkdir()
    (root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                        encoding="utf-8")
    return Home(root)


def pareto(home: Home, url: str, results: Path, *extra: str) -> tuple[int, str, float]:
    began = time.monotonic()
    proc = home.cmx("pareto", QUERY, "--input", "rows=16", "--input", f"endpoint_url={url}",
                    "--input", f"results_dir={results}", "--progress", "plain", *extra, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - began


@pytest.mark.e2e
def test_a_server_answering_500_stops_the_curve_at_its_first_probe_with_its_error(shared: Home,
                                                                                   tmp_path: Path) -> None:
    with Answers500() as server:
        code, out, _ = pareto(shared, server.url, tmp_path / "results")
    assert code == 1, out[-3000:]
    failed = re.search(r"the probe at concurrency 32: (\d+) of (\d+) requests failed and none was answered", out)
    assert failed and failed[1] == failed[2] and 32 <= int(failed[1]) < 64, out[-3000:]  # one round, not 1.5 s of them
    assert "HTTP 500" in out and "engine core died" in out
    assert "concurrency 64" not in out and "mlperf_log_accuracy" not in out
    assert "_endpoint" in out  # the re-run line names the backend the URL implied
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").rglob("cmx_pareto.json"))


@pytest.mark.e2e
def test_a_server_that_stalls_is_stopped_by_the_first_token_deadline(shared: Home, tmp_path: Path) -> None:
    with Stalls() as server:
        code, out, seconds = pareto(shared, server.url, tmp_path / "results", "--first-token-timeout", "14")
    assert code == 1, out[-3000:]
    assert seconds < 300  # the deps are cached by the test before: not the 600 s request timeout
    assert "the server sent no token for 14 s at concurrency 32: 32 requests wait for their first token" in out, \
        out[-3000:]
    assert "--first-token-timeout 14" in out  # the re-run line keeps the deadline given
    # the wait shows while it lasts (a plain line every 10 s), before the error
    assert "0 answered, 0 failed; no token for 1" in out.split("step failed")[0], out[-3000:]


@pytest.mark.e2e
def test_with_c_max_declared_the_first_point_a_server_answers_none_of_stops_the_curve(shared: Home,
                                                                                       tmp_path: Path) -> None:
    with Answers500() as server:
        code, out, _ = pareto(shared, server.url, tmp_path / "results", "--max-concurrency", "64")
    assert code == 1, out[-3000:]
    assert re.search(r"the point at concurrency 1: \d+ of \d+ requests failed and none was answered; the first: .*"
                     r"HTTP 500", out), out[-3000:]
    assert "mlperf_log_accuracy" not in out and "concurrency 2" not in out  # not the gate's empty log, no next point


@pytest.mark.e2e
def test_the_api_key_is_sent_and_kept_out_of_the_servers_error_it_echoes(shared: Home, tmp_path: Path) -> None:
    key = "sk-pareto-e2e-0123456789abcdef"
    with Answers500(key=key) as server:  # refuses a request without the key (401), echoes it in its 500s
        code, out, _ = pareto(shared, server.url, tmp_path / "results", "--input", f"endpoint_api_key={key}")
    assert code == 1, out[-3000:]
    assert server.broken_requests > 0, out[-3000:]  # the warm-up passed: the key was sent
    assert "HTTP 500: request with Authorization=Bearer ********: engine core died" in out, out[-3000:]
    assert key not in out
