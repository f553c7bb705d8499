"""The endpoint backend with worker processes (EndpointConfig.workers): the same answers and failures as in-process,
and no process left behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from cmx.mlperf.backends.base import BackendDead, BackendError, GenRequest
from cmx.mlperf.backends.endpoint import EndpointBackend
from cmx.mlperf.backends.endpoint_client import EndpointConfig
from tests.conftest import interruptible
from tests.fake_openai import FakeOpenAIServer
from tests.mlperf.backends.test_endpoint import SLOW_TOKEN, CollectingSink, killable_server

FAIL_TOKEN = 4244  # a prompt starting with it gets a 500


class EchoServer(FakeOpenAIServer):
    """Output ids made from the prompt and the position, so that every sample's answer is its own; a prompt
    starting with FAIL_TOKEN gets an HTTP 500."""

    async def complete(self, request):
        from aiohttp import web

        body = await request.json()
        prompt, n = body["prompt"], body["max_tokens"]
        if prompt[0] == FAIL_TOKEN:
            return web.json_response({"error": {"message": "engine step failed"}}, status=500)
        ids = [(prompt[0] * 31 + len(prompt) + i) % 4000 for i in range(n)]
        choice = {"text": "x", "token_ids": ids, "finish_reason": "length"}
        return await self.stream_or_json(request, body, [choice], {"usage": {"completion_tokens": n}})


def samples(count: int = 40) -> list[GenRequest]:
    return [GenRequest(id=i, prompt_ids=[100 + i] * (1 + i % 7), max_tokens=2 + i % 5) for i in range(count)]


def answers(url: str, workers: int, requests: list[GenRequest]) -> tuple[dict, dict, dict]:
    """Offline results, streamed results and first tokens, each by request id."""
    with EndpointBackend(EndpointConfig(url=url, workers=workers, max_concurrency=8, warmup_requests=1)) as backend:
        offline = {r.id: r.token_ids for r in backend.generate(requests)}
        sink = CollectingSink(len(requests))
        for request in requests:
            backend.submit(request, sink)
        assert sink.finished.wait(30)
    assert not sink.errors
    return offline, sink.done, sink.first


def test_worker_processes_answer_every_sample_as_the_in_process_path_does():
    requests = samples()
    with EchoServer() as server:
        in_process = answers(server.url, 0, requests)
        in_workers = answers(server.url, 2, requests)
    assert in_workers == in_process
    offline, streamed, first = in_workers
    assert sorted(offline) == [r.id for r in requests]
    assert all(first[i] == streamed[i][0] for i in streamed)  # each stream's first token was reported


def test_a_failing_request_fails_only_its_sample():
    requests = [*samples(6), GenRequest(id=99, prompt_ids=[FAIL_TOKEN, 5], max_tokens=4)]
    with EchoServer() as server, EndpointBackend(EndpointConfig(url=server.url, workers=2,
                                                                warmup_requests=1)) as backend:
        sink = CollectingSink(len(requests))
        for request in requests:
            backend.submit(request, sink)
        assert sink.finished.wait(30)
    assert sorted(sink.done) == list(range(6))
    error = sink.errors[99]
    assert isinstance(error, BackendError) and not isinstance(error, BackendDead)
    assert "engine step failed" in error.message


def test_an_offline_failure_stops_the_batch_and_counts_its_samples():
    requests = [*samples(20), GenRequest(id=99, prompt_ids=[FAIL_TOKEN] * 50, max_tokens=4)]  # longest: sent first
    with EchoServer() as server, EndpointBackend(EndpointConfig(url=server.url, workers=2, max_concurrency=2,
                                                                warmup_requests=1)) as backend:
        with pytest.raises(BackendError) as caught:
            list(backend.generate(requests))
        assert len(list(backend.generate(samples(5)))) == 5  # the next batch runs as before
    assert "engine step failed" in caught.value.message
    assert re.search(r"; \d+ of 21 samples completed, \d+ in flight were lost, \d+ not sent", caught.value.message)


def test_a_killed_server_is_dead_for_every_stream_in_every_worker(tmp_path: Path):
    with (killable_server(tmp_path) as (server, url),
          EndpointBackend(EndpointConfig(url=url, warmup_requests=1, workers=2)) as backend):
        sink = CollectingSink(4)
        for i in range(4):  # two in each worker
            backend.submit(GenRequest(id=i, prompt_ids=[SLOW_TOKEN, 5], max_tokens=8), sink)
        deadline = time.monotonic() + 20
        while len(sink.first) < 4:
            assert time.monotonic() < deadline, sink.errors
            time.sleep(0.02)
        server.kill()
        assert sink.finished.wait(20)
    assert sorted(sink.errors) == [0, 1, 2, 3]
    for error in sink.errors.values():
        assert isinstance(error, BackendDead), error
        # each worker probes on its own; one that probes while the kernel tears the socket down sees a reset
        assert re.fullmatch(rf"the server at {url} stopped answering \(connection (refused|reset)\)", error.message)


def test_a_worker_that_dies_fails_its_requests_as_a_dead_backend(tmp_path: Path):
    with (killable_server(tmp_path) as (_, url),
          EndpointBackend(EndpointConfig(url=url, warmup_requests=1, workers=1)) as backend):
        sink = CollectingSink(1)
        backend.submit(GenRequest(id=7, prompt_ids=[SLOW_TOKEN, 5], max_tokens=8), sink)
        deadline = time.monotonic() + 20
        while not sink.first:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert backend._pool is not None
        psutil.Process(backend._pool.pids[0]).kill()
        assert sink.finished.wait(20)
    assert isinstance(sink.errors[7], BackendDead)
    assert "endpoint client worker 0" in sink.errors[7].message


def test_stop_leaves_no_worker_process():
    with EchoServer() as server:
        backend = EndpointBackend(EndpointConfig(url=server.url, workers=2, warmup_requests=1))
        backend.start()
        assert backend._pool is not None
        pids = backend._pool.pids
        assert len(pids) == 2 and all(psutil.pid_exists(p) for p in pids)
        backend.stop()
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not psutil.Process().children()


HOLDER = r"""
import sys, time
from cmx.mlperf.backends.endpoint import EndpointBackend, EndpointConfig

if __name__ == "__main__":
    with EndpointBackend(EndpointConfig(url=sys.argv[1], workers=2, warmup_requests=1)) as backend:
        print(" ".join(str(p) for p in backend._pool.pids), flush=True)
        time.sleep(120)
"""


def test_ctrl_c_leaves_no_worker_process(tmp_path: Path):
    (tmp_path / "holder.py").write_text(HOLDER)
    with EchoServer() as server:
        holder = subprocess.Popen([sys.executable, str(tmp_path / "holder.py"), server.url], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, preexec_fn=interruptible,
                                  start_new_session=True)
        try:
            assert holder.stdout is not None
            pids = [int(p) for p in holder.stdout.readline().split()]
            assert len(pids) == 2
            # Ctrl-C in a terminal: SIGINT to the whole process group, the workers included
            os.killpg(holder.pid, signal.SIGINT)
            holder.wait(30)
        finally:
            holder.kill()
            holder.wait()
    assert holder.returncode != 0 and "KeyboardInterrupt" in (holder.stderr.read() if holder.stderr else "")
    assert not [p for p in pids if psutil.pid_exists(p)]


def test_a_negative_number_of_workers_is_refused():
    with pytest.raises(BackendError, match="workers must be 0"):
        EndpointConfig(url="http://127.0.0.1:1/v1", workers=-1)


def test_the_harness_gives_the_endpoint_backend_its_client_workers(tmp_path: Path):
    import logging

    from cmx.mlperf.loadgen.harness import build_backend
    from cmx.mlperf.loadgen.harness_config import EndpointSettings, HarnessConfig

    config = HarnessConfig(model=tmp_path, dataset=tmp_path / "orca.pkl", scenario="Server", mode="performance",
                           user_conf=tmp_path / "user.conf", output=tmp_path / "out",
                           endpoint=EndpointSettings(url="http://127.0.0.1:9/v1", workers=3))
    backend = build_backend(config, logging.getLogger("t"))
    assert isinstance(backend, EndpointBackend) and backend.config.workers == 3
    assert HarnessConfig.from_json(config.to_json()).endpoint == config.endpoint
