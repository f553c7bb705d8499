"""Live progress of a LoadGen test: the SUT's sample clock, the progress file the harness writes, and following it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cmx.mlperf.backends.base import GenRequest
from cmx.mlperf.loadgen.progress import (
    PROGRESS_JSON,
    ProgressWriter,
    RunProgress,
    RunShape,
    SampleClock,
    follow,
    read_progress,
    run_shape,
    waiting_for,
)
from tests.mlperf.loadgen.test_harness import FakeBackend, answer, needs_loadgen, run_loadgen


class Ticks:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def server_clock() -> tuple[SampleClock, Ticks]:
    """100 queries issued one every 10 ms; query i's first token 50 ms after issue (the last one 300 ms),
    then 9 more tokens 20 ms apart (the last query's 40 ms apart); 80 of them completed."""
    ticks = Ticks()
    clock = SampleClock(ticks)
    for q in range(100):
        ticks.t = 100.0 + q * 0.01
        clock.issued([q])
    for q in range(80):
        ttft = 0.3 if q == 79 else 0.05
        tpot = 0.04 if q == 79 else 0.02
        ticks.t = 100.0 + q * 0.01 + ttft
        clock.first_token(q)
        ticks.t += 9 * tpot
        clock.completed(q, 10)
    ticks.t = 102.0  # two seconds after the first issue
    return clock, ticks


def test_progress_reports_counts_rates_p99s_against_the_limits_and_an_eta(tmp_path: Path):
    clock, _ = server_clock()
    shape = RunShape("Server", "performance", expected=200, min_duration_s=10.0, ttft_limit_ms=2000.0,
                     tpot_limit_ms=200.0)
    p = ProgressWriter(tmp_path / PROGRESS_JSON, clock, shape).progress()
    assert (p.state, p.issued, p.completed, p.tokens, p.elapsed_s) == ("running", 100, 80, 800, 2.0)
    assert p.tokens_per_s == pytest.approx(400.0)
    # 80 TTFTs of 50 ms and one of 300: numpy's p99 interpolates 0.21 of the way from 50 to 300
    assert p.ttft_p99_ms == pytest.approx(50 + 0.21 * 250, abs=0.1)
    assert p.tpot_p99_ms == pytest.approx(20 + 0.21 * 20, abs=0.1)
    # 120 samples left at 40/s is 3 s, but the test lasts at least 10 s: 8 s to go
    assert p.eta_s == pytest.approx(8.0)
    assert p.detail() == "80/200 samples, 400 tok/s, TTFT p99 102/2000 ms, TPOT p99 24/200 ms, 0:02 elapsed, ETA 0:08"


def test_a_test_judged_on_whole_answers_shows_end_to_end_p99_against_its_limit_not_ttft(tmp_path: Path):
    ticks = Ticks()
    clock = SampleClock(ticks)
    for q in range(10):  # unstreamed answers: no first token; the last takes 3 s, the others 1 s
        ticks.t = 100.0 + q
        clock.issued([q])
        ticks.t += 3.0 if q == 9 else 1.0
        clock.completed(q, 40)
    shape = RunShape("Server", "performance", expected=20, latency_limit_ms=12000.0)
    p = ProgressWriter(tmp_path / PROGRESS_JSON, clock, shape).progress()
    assert (p.ttft_p99_ms, p.tpot_p99_ms, p.latency_limit_ms) == (None, None, 12000.0)
    assert p.latency_p99_ms == pytest.approx(1000 + 0.91 * 2000, abs=0.1)  # p99 of nine 1 s and one 3 s
    assert "latency p99 2820/12000 ms" in p.detail() and "TTFT" not in p.detail()
    assert RunProgress.from_json(p.to_json()) == p


def test_each_completed_row_is_read_once_however_often_progress_is_asked(tmp_path: Path):
    clock, ticks = server_clock()
    writer = ProgressWriter(tmp_path / PROGRESS_JSON, clock, RunShape("Server", "performance"))
    first = writer.progress()
    ticks.t = 103.0
    clock.completed(80, 5)
    second = writer.progress()
    assert (first.completed, first.tokens) == (80, 800)
    assert (second.completed, second.tokens) == (81, 805)
    assert second.expected is None and second.eta_s is None
    assert second.detail().startswith("81 of 100 issued samples")


def test_offline_expects_its_whole_query_once_issued_and_shows_no_latencies(tmp_path: Path):
    ticks = Ticks()
    clock = SampleClock(ticks)
    writer = ProgressWriter(tmp_path / PROGRESS_JSON, clock, RunShape("Offline", "performance"))
    assert writer.progress().state == "starting" and writer.progress().detail() == "starting the engine"
    clock.issued(range(500))
    ticks.t += 5.0
    for q in range(100):
        clock.completed(q, 16)
    p = writer.progress()
    assert (p.expected, p.completed, p.ttft_p99_ms, p.tpot_p99_ms) == (500, 100, None, None)
    assert p.eta_s == pytest.approx(20.0)
    assert "TTFT" not in p.detail()


def test_the_file_is_replaced_whole_and_says_done_at_the_end(tmp_path: Path):
    clock, _ = server_clock()
    path = tmp_path / PROGRESS_JSON
    writer = ProgressWriter(path, clock, RunShape("Server", "accuracy", expected=100), interval=0.01).start()
    writer.stop()
    final = read_progress(path)
    assert final is not None and final.state == "done" and final.completed == 80
    assert not path.with_name(path.name + ".tmp").exists()
    assert read_progress(tmp_path / "absent.json") is None


def test_follow_reports_each_new_progress_of_a_real_process_until_it_exits(tmp_path: Path):
    path = tmp_path / PROGRESS_JSON
    states = [RunProgress("Server", "performance", s, float(i), i, i, 0, i * 10, 3, None, None, None, None, None)
              for i, s in enumerate(("starting", "running", "done"))]
    script = "import os, sys, time\n" + "".join(
        f"open(sys.argv[1] + '.tmp', 'w').write({p.to_json()!r}); os.replace(sys.argv[1] + '.tmp', sys.argv[1]); "
        f"time.sleep(0.3)\n" for p in states)
    proc = subprocess.Popen([sys.executable, "-c", script, str(path)])
    seen: list[RunProgress] = []
    follow(waiting_for(proc, timeout=30), path, seen.append, interval=0.05)
    assert [p.state for p in seen] == ["starting", "running", "done"]
    assert seen[-1] == states[-1]


def test_following_a_process_past_its_timeout_raises(tmp_path: Path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            follow(waiting_for(proc, timeout=0.3), tmp_path / PROGRESS_JSON, lambda p: None, interval=0.05)
    finally:
        proc.kill()
        proc.wait()


@needs_loadgen
def test_the_sut_stamps_every_sample_of_a_real_loadgen_server_run(tmp_path: Path):
    sut, run = run_loadgen(tmp_path, "Server", "performance", FakeBackend(), samples=20)
    rows = list(sut.clock.rows)
    assert len(rows) == sut.completed == run.results.query_count == sut.clock.issued_count
    assert all(issued <= first <= done for issued, first, done, _ in rows)
    expected_tokens = sorted(len(answer(GenRequest(id=0, prompt_ids=[i, 11, 12]))) for i in range(20))
    assert set(n for *_, n in rows) <= set(expected_tokens)
    csv = sut.clock.write_samples(tmp_path / "samples.csv").read_text().splitlines()
    assert csv[0] == "issued_s,first_token_s,completed_s,tokens" and len(csv) == len(rows) + 1


@needs_loadgen
def test_the_shape_comes_from_loadgens_settings():
    import mlperf_loadgen as lg

    settings = lg.TestSettings()  # set by hand: FromConfig may run once per process
    settings.use_token_latencies = True
    settings.min_duration_ms = 600_000
    settings.min_query_count = 24576
    settings.server_target_qps = 50.0
    settings.ttft_latency = 2_000_000_000
    settings.tpot_latency = 200_000_000
    server = run_shape(settings, "Server", "performance", total_samples=24576)
    assert (server.expected, server.min_duration_s, server.ttft_limit_ms, server.tpot_limit_ms) == \
        (30000, 600.0, 2000.0, 200.0)
    accuracy = run_shape(settings, "Offline", "accuracy", total_samples=24576)
    assert (accuracy.expected, accuracy.min_duration_s, accuracy.ttft_limit_ms) == (24576, None, None)
    assert run_shape(settings, "Offline", "performance", 24576).expected is None  # known once issued
    assert server.latency_limit_ms is None  # judged on TTFT and TPOT
    settings.use_token_latencies = False
    settings.server_target_latency_ns = 12_000_000_000
    whole = run_shape(settings, "Server", "performance", total_samples=48289)
    assert (whole.ttft_limit_ms, whole.tpot_limit_ms, whole.latency_limit_ms) == (None, None, 12000.0)
    assert run_shape(settings, "Offline", "performance", 48289).latency_limit_ms is None
