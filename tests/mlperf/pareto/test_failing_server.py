"""A curve against a server that fails: the endpoint backend over real HTTP to servers on 127.0.0.1 that answer the
warm-up and then answer 500 or stall. A run no request of which was answered stops the curve with the server's own
error (its HTTP status, its message truncated, the API key not in it); a stalled server is stopped by the first-token
deadline, with progress meanwhile; 0 tokens/s against 0 is never a gain that doubles the probes on."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from cmx.mlperf.backends.endpoint import EndpointBackend
from cmx.mlperf.backends.endpoint_client import EndpointConfig
from cmx.mlperf.pareto.record import Probe
from cmx.mlperf.pareto.runner import PointFailed, PointProgress, PointRun, request_builder, run_point
from cmx.mlperf.pareto.step import ERROR_CHARS, ParetoError, knee, require_answers
from cmx.secrets import Redactor, Secret
from tests.mlperf.pareto.broken_servers import Answers500, Stalls

KEY = "sk-pareto-test-0123456789abcdef"


class Prompts:
    def __len__(self) -> int:
        return 8

    def prompt_ids(self, row: int) -> list[int]:
        return [row + 11, 12, 13, 14]


BUILD = request_builder(Prompts(), max_tokens=4)


@contextmanager
def started(url: str) -> Iterator[EndpointBackend]:
    backend = EndpointBackend(EndpointConfig(url=url, model="own", api_key=Secret(KEY), warmup_requests=1))
    backend.start()
    try:
        yield backend
    finally:
        backend.stop()


def test_a_run_whose_every_request_got_a_500_stops_the_curve_naming_the_servers_error() -> None:
    with Answers500() as server, started(server.url) as backend:
        answers = run_point(backend, PointRun(4, 0.3, rows=8, whole_passes=False), BUILD)
    # once a whole round (4) has failed with none answered the point stops issuing, though it had 0.3 s to run (the
    # requests sent while the first 4 failures came back are all the more it sent)
    assert 4 <= len(answers) < 8 and all(a.record.error for a in answers) and server.broken_requests == len(answers)
    with pytest.raises(ParetoError) as caught:
        require_answers(answers, "the probe at concurrency 4", Redactor([KEY]))
    message = caught.value.message
    assert message.startswith(f"the probe at concurrency 4: {len(answers)} of {len(answers)} requests failed")
    assert "HTTP 500" in message and "engine core died: CUDA error" in message
    assert len(message) < ERROR_CHARS + 200 and "\n" not in message  # one line, the server's 20 KB body cut short
    assert KEY not in caught.value.render()


def test_a_run_with_one_answer_with_tokens_goes_on() -> None:
    from cmx.mlperf.pareto.metrics import RequestRecord
    from cmx.mlperf.pareto.runner import Answer

    failed = Answer(RequestRecord(0, 0.0, None, None, 0, error="HTTP 500"), None)
    answered = Answer(RequestRecord(1, 0.0, 0.1, 0.2, 3), None)
    require_answers([failed, answered], "a point")  # partly failed: its figures say how many, the curve goes on
    with pytest.raises(ParetoError, match="answered 1 requests with no tokens"):
        require_answers([Answer(RequestRecord(1, 0.0, 0.1, 0.2, 0), None)], "a point")


def test_a_server_that_sends_headers_and_stalls_is_stopped_by_the_first_token_deadline_with_progress() -> None:
    heard: list[PointProgress] = []
    with Stalls() as server, started(server.url) as backend:
        began = time.monotonic()
        with pytest.raises(PointFailed) as caught:
            run_point(backend, PointRun(3, 60.0, rows=8, first_token_s=1.5), BUILD, on_progress=heard.append)
        took = time.monotonic() - began
    assert 1.5 <= took < 6, took  # the deadline, not the 600 s request timeout
    assert "the server sent no token for 2 s at concurrency 3: 3 requests wait for their first token" in \
        caught.value.message and "--first-token-timeout" in (caught.value.hint or "")
    assert heard and heard[-1].issued == 3 and heard[-1].answered == 0 and heard[-1].waiting_s > 1.0
    assert [p.waiting_s for p in heard] == sorted(p.waiting_s for p in heard)  # the wait shows as it grows


def test_a_dead_probe_is_no_gain_so_zero_against_zero_does_not_double_on() -> None:
    dead = [Probe(32, 0.0, None, 1.5), Probe(64, 0.0, None, 1.5), Probe(128, 0.0, None, 1.5)]
    assert knee(dead) == 64  # the floor: no doubling gained
    live = [Probe(32, 100.0, 5.0, 1.5), Probe(64, 150.0, 5.0, 1.5), Probe(128, 151.0, 6.0, 1.5)]
    assert knee(live) == 64
