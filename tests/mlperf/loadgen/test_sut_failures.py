"""How the SUT reports failed samples (cmx/mlperf/loadgen/sut.py): by their sample index, never by LoadGen's query
id (an address such as 140056669056704); samples that fail together in one LoadGen call and one log line; only
the first MAX_LOGGED_FAILURES logged one by one. Real LoadGen in this process, with test_harness's fake Backend (a
double of cmx's own protocol) whose errors name requests as the real backends do (GenRequest.name)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from cmx.mlperf.backends.base import BackendError, GenRequest, GenResult, request_name
from cmx.mlperf.loadgen.sut import MAX_LOGGED_FAILURES
from tests.mlperf.loadgen.test_harness import LOG, FakeBackend, answer, needs_loadgen, run_loadgen

QUERY_ID = re.compile(r"\d{9,}|0x[0-9a-f]{6,}")  # LoadGen's query ids are addresses


class NamingBackend(FakeBackend):
    """Fails the requests whose prompt starts with an id in `fail` with a BackendError naming the request as the
    endpoint backend does; Offline: the first failure ends the batch, as the endpoint backend's does."""

    def generate(self, requests: Sequence[GenRequest]) -> Iterator[GenResult]:
        self.batches.append(len(requests))
        for request in requests:
            if request.prompt_ids[0] in self.fail:
                raise BackendError(f"http://h/v1/completions: the connection to the server was lost during "
                                   f"{request.name}")
            yield GenResult(id=request.id, token_ids=answer(request))

    def _serve(self) -> None:
        while (item := self._take()) is not None:
            request, sink = item
            if request.prompt_ids[0] in self.fail:
                sink.on_error(request.id, BackendError(f"{request.name}: the server returned 1 output tokens"))
                continue
            tokens = answer(request)
            sink.on_first_token(request.id, tokens[0])
            sink.on_done(GenResult(id=request.id, token_ids=tokens))


def test_a_request_is_named_by_its_sample_index_and_a_warm_up_by_its_number():
    assert GenRequest(id=140056669056704, prompt_ids=[1], sample=7).name == "sample 7"
    assert (request_name(-2), request_name(17), request_name(17, 3)) == ("warm-up request 2", "request 17", "sample 3")


@needs_loadgen
@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_a_failed_sample_is_named_by_its_index_never_by_loadgens_query_id(tmp_path: Path, scenario: str,
                                                                          caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.DEBUG, logger=LOG.name)
    sut, _ = run_loadgen(tmp_path, scenario, "accuracy", NamingBackend(fail=frozenset({3})))
    first = sut.errors[0]
    assert "sample 3" in first.message and not QUERY_ID.search(first.message), first.message
    if scenario == "Server":  # it fails alone
        assert [(e.sample, e.message) for e in sut.errors] == [(3, "sample 3: the server returned 1 output tokens")]
    lines = [r.getMessage() for r in caplog.records if r.name == LOG.name and r.levelno >= logging.ERROR]
    assert lines and not any(QUERY_ID.search(line) for line in lines), lines


@needs_loadgen
def test_samples_an_offline_batch_lost_together_are_one_log_line(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger=LOG.name)
    sut, _ = run_loadgen(tmp_path, "Offline", "accuracy", NamingBackend(fail=frozenset(range(200))),
                         samples=200)
    assert len(sut.errors) == 200 and sut.completed == 200  # LoadGen heard of every sample
    errors = [r.getMessage() for r in caplog.records if r.name == LOG.name and r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    assert re.match(r"200 samples failed \(samples 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, \.\.\.\): http://h/v1/completions: "
                    r"the connection to the server was lost during sample \d+$", errors[0]), errors[0]


@needs_loadgen
def test_only_the_first_failures_are_logged_one_by_one(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger=LOG.name)
    sut, _ = run_loadgen(tmp_path, "Server", "accuracy", NamingBackend(fail=frozenset(range(100))), samples=100)
    assert len(sut.errors) == 100 and {e.sample for e in sut.errors} == set(range(100))
    errors = [r.getMessage() for r in caplog.records if r.name == LOG.name and r.levelno >= logging.ERROR]
    assert len(errors) == MAX_LOGGED_FAILURES + 1, errors
    assert f"{MAX_LOGGED_FAILURES} samples failed: later failures are counted" in errors[-2]


@needs_loadgen
def test_an_offline_query_too_large_to_answer_empty_stops_the_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from cmx.mlperf.loadgen import sut as sut_module
    from tests.mlperf.loadgen.test_harness import start_loadgen_test

    monkeypatch.setattr(sut_module, "MAX_EMPTY_ANSWERS", 50)  # LoadGen would log an error line for each
    # 2 s at 100 samples/s expected: a query of 220 samples, all lost when the first request fails
    sut, test, finish = start_loadgen_test(tmp_path, "Offline", NamingBackend(fail=frozenset(range(20))), 2000)
    try:
        assert test.run(sut) is False  # the harness stops waiting for LoadGen, as for a dead backend's Server test
        assert len(sut.errors) == 220 and sut.completed == 0  # none was answered empty
        assert sut.dead_line() == "http://h/v1/completions: the connection to the server was lost during sample " \
                                  f"{sut.errors[0].sample}"
    finally:
        sut._fail_many(sorted(sut._in_flight), "the test is over")  # so that LoadGen returns and can be freed
        finish()
