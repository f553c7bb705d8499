"""A point's closed loop and its figures (cmx.mlperf.pareto.runner, cmx.mlperf.pareto.metrics), on a backend of
threads that answers after a fixed time, and on made-up requests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from cmx.mlperf.backends.base import BackendDead, GenRequest, GenResult, StreamSink
from cmx.mlperf.pareto.metrics import RequestRecord, figures, percentile_lower
from cmx.mlperf.pareto.runner import PointFailed, PointRun, request_builder, run_offline, run_point


class Prompts:
    def __len__(self) -> int:
        return 10

    def prompt_ids(self, row: int) -> list[int]:
        return [row + 1, 2, 3]


class TimedBackend:
    """Answers each streamed request with `tokens` tokens after `delay` s; counts what is in flight at once."""

    def __init__(self, delay: float = 0.01, tokens: int = 5, fail: set[int] | None = None,
                 dead_after: int | None = None) -> None:
        self.delay, self.tokens, self.fail, self.dead_after = delay, tokens, fail or set(), dead_after
        self.lock = threading.Lock()
        self.in_flight = self.most = self.submitted = 0
        self.rows: list[int] = []

    def submit(self, request: GenRequest, sink: StreamSink) -> None:
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.submitted += 1
            self.rows.append(request.prompt_ids[0] - 1)
            n = self.submitted
        threading.Thread(target=self._answer, args=(request, sink, n), daemon=True).start()

    def _answer(self, request: GenRequest, sink: StreamSink, n: int) -> None:
        time.sleep(self.delay / 2)
        sink.on_first_token(request.id, 7)
        time.sleep(self.delay / 2)
        with self.lock:
            self.in_flight -= 1
        if self.dead_after is not None and n > self.dead_after:
            sink.on_error(request.id, BackendDead("the server is gone"))
        elif request.id in self.fail:
            sink.on_error(request.id, RuntimeError("HTTP 500"))
        else:
            sink.on_done(GenResult(request.id, [7] * self.tokens))

    def generate(self, requests: Sequence[GenRequest]) -> Iterator[GenResult]:
        for r in requests:
            yield GenResult(r.id, [7] * self.tokens)

    def details(self) -> dict[str, Any]:
        return {}


BUILD = request_builder(Prompts(), max_tokens=8)


def test_the_loop_keeps_exactly_the_concurrency_in_flight_and_issues_whole_passes() -> None:
    backend = TimedBackend()
    answers = run_point(backend, PointRun(concurrency=4, seconds=0.1, rows=10), BUILD)  # type: ignore[arg-type]
    assert backend.most == 4
    assert len(answers) == backend.submitted and len(answers) % 10 == 0 and len(answers) >= 10
    records = [a.record for a in answers]
    assert all(r.first_token is not None and r.done is not None and r.first_token <= r.done for r in records)
    assert all(r.output_tokens == 5 for r in records)


def test_a_smoke_point_stops_at_its_seconds_without_whole_passes() -> None:
    backend = TimedBackend(delay=0.02)
    answers = run_point(backend, PointRun(1, 0.05, rows=10, whole_passes=False), BUILD)  # type: ignore[arg-type]
    assert 1 <= len(answers) < 10


def test_an_accuracy_run_issues_every_row_once_in_order() -> None:
    backend = TimedBackend()
    answers = run_point(backend, PointRun(3, 0.0, rows=10, accuracy=True), BUILD)  # type: ignore[arg-type]
    assert backend.rows == list(range(10)) and sorted(a.record.index for a in answers) == list(range(10))


def test_a_failed_request_is_recorded_and_the_loop_goes_on() -> None:
    answers = run_point(TimedBackend(fail={2}), PointRun(2, 0.0, rows=10, accuracy=True), BUILD)  # type: ignore[arg-type]
    failed = [a.record for a in answers if a.record.error]
    assert len(answers) == 10 and len(failed) == 1 and "HTTP 500" in (failed[0].error or "")
    assert figures([a.record for a in answers]).failed == 1


def test_a_dead_server_fails_the_point() -> None:
    with pytest.raises(PointFailed, match="the server died"):
        run_point(TimedBackend(dead_after=3), PointRun(2, 5.0, rows=10), BUILD)  # type: ignore[arg-type]


def test_offline_hands_whole_passes_at_once() -> None:
    answers = run_offline(TimedBackend(), 10, 0.0, BUILD)  # type: ignore[arg-type]
    assert sorted(a.record.index for a in answers) == list(range(10))
    assert all(a.record.issued == 0.0 or a.record.issued < 0.01 for a in answers)


def rec(issued: float, first: float, done: float, tokens: int = 11) -> RequestRecord:
    return RequestRecord(index=0, issued=issued, first_token=first, done=done, output_tokens=tokens)


def test_the_window_runs_from_the_first_completion_to_the_last_issue() -> None:
    # two requests at t=0 (the ramp), then one issued at each completion
    records = [rec(0, 0.1, 1.0), rec(0, 0.1, 1.5), rec(1.0, 1.1, 2.0), rec(1.5, 1.6, 2.5), rec(2.0, 2.1, 3.0)]
    f = figures(records)
    assert f.window_s == pytest.approx(1.0)       # issues at 1.0, 1.5, 2.0
    assert f.output_tokens == 33 and f.system_tps == pytest.approx(33.0)
    assert f.duration_s == pytest.approx(3.0) and f.whole_run_tps == pytest.approx(55 / 3)


def test_tokens_per_user_is_1000_over_the_tpot_p90_in_ms() -> None:
    records = [rec(i * 0.1, i * 0.1 + 0.05, i * 0.1 + 0.05 + 10 * (0.01 + i * 0.001)) for i in range(20)]
    f = figures(records)
    tpots = sorted(10 * (0.01 + i * 0.001) / 10 for i in range(20))
    assert f.tpot_p90_ms == pytest.approx(tpots[int(0.9 * 19)] * 1000)
    assert f.tps_per_user == pytest.approx(1000 / f.tpot_p90_ms)


def test_offline_figures_are_whole_run_totals_without_token_latencies() -> None:
    f = figures([rec(0, 0.0, 2.0), rec(0, 0.0, 4.0)], streamed=False)
    assert f.system_tps == pytest.approx(22 / 4) and f.tpot_p90_ms is None and f.tps_per_user is None


def test_percentiles_are_the_lower_nearest_rank() -> None:
    assert percentile_lower([5.0, 1.0, 3.0, 2.0, 4.0], 90) == 4.0
    assert percentile_lower([], 90) is None
