"""Tune probes on real LoadGen (cmx/mlperf/tune/probe.py, process.search) and the bad requests `cmx tune` refuses.

The probes run in this process on a fake streaming Backend of cmx's own protocol with a finite capacity (one
worker serving one request every 2 ms, so about 500 queries/s), with the Server limits scaled down to
TTFT 100 ms / TPOT 50 ms so that each probe lasts about a second. TestSettings are set in code: no
FromConfig runs here (the confirm run, which calls it, is covered by the e2e test through the CLI).
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from cmx.api import Settings, tune
from cmx.mlperf.backends.base import GenRequest, GenResult, StartInfo, StreamSink
from cmx.mlperf.loadgen.harness_config import HarnessConfig
from cmx.mlperf.loadgen.log import read_loadgen_run
from cmx.mlperf.rounds import LatencyLimits, load_round
from cmx.mlperf.tune.probe import Length, ProbeSpec, probe_settings
from cmx.mlperf.tune.process import TuneConfig, TuneError, search
from cmx.mlperf.tune.search import Policy, answer
from tests.conftest import REPO
from tests.mlperf.prompts import Prompts

LOG = logging.getLogger("test-tune")
V60 = load_round("v6.0")
BENCH = V60.benchmark("llama2-70b-99")
needs_loadgen = pytest.mark.skipif(importlib.util.find_spec("mlperf_loadgen") is None,
                                   reason="mlperf_loadgen is not installed")


class QueueBackend:
    """A streaming backend with one worker: each request takes `service_s`, so capacity is 1 / service_s."""

    def __init__(self, service_s: float) -> None:
        self.service_s = service_s
        self._pending: list[tuple[GenRequest, StreamSink] | None] = []
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None

    def start(self) -> StartInfo:
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        return StartInfo(engines=({},), start_seconds=0.0, warmup_requests=0, warmup_seconds=0.0)

    def submit(self, request: GenRequest, sink: StreamSink) -> None:
        with self._ready:
            self._pending.append((request, sink))
            self._ready.notify()

    def stop(self) -> None:
        with self._ready:
            self._pending.append(None)
            self._ready.notify()
        if self._thread is not None:
            self._thread.join()

    def _serve(self) -> None:
        while True:
            with self._ready:
                self._ready.wait_for(lambda: self._pending)
                item = self._pending.pop(0)
            if item is None:
                return
            request, sink = item
            time.sleep(self.service_s)  # overshoots a little: the capacity is a bit under 1 / service_s
            sink.on_first_token(request.id, 5)
            sink.on_done(GenResult(id=request.id, token_ids=[5, 7, 2]))


def spec(length: Length) -> ProbeSpec:
    rules = replace(BENCH.scenario("Server"), latency=LatencyLimits(ttft_p99_ms=100, tpot_p99_ms=50))
    return ProbeSpec(round=V60, bench=BENCH, rules=rules, length=length, target=length, max_tokens=16)


def tune_config(tmp_path: Path, start: float, length: Length, policy: Policy) -> TuneConfig:
    harness = HarnessConfig(model=tmp_path, dataset=tmp_path, scenario="Server", mode="performance",
                            user_conf=tmp_path / "user.conf", output=tmp_path / "tune")
    return TuneConfig(harness=harness, start_qps=start, probe=length, target=length, short=None, policy=policy)


@needs_loadgen
def test_probes_on_real_loadgen_bracket_the_capacity_of_the_engine(tmp_path: Path):
    import mlperf_loadgen as lg

    length = Length(min_duration_ms=300, min_queries=480, samples=20)
    config = tune_config(tmp_path, 250.0, length, Policy(tolerance=0.06, max_probes=8))
    backend = QueueBackend(service_s=0.002)
    backend.start()
    try:
        probes = search(lg, spec(length), backend, Prompts(20), config, LOG, tmp_path / "probes.jsonl")
    finally:
        backend.stop()
    best = answer(probes)
    assert best is not None and best.passed and best.validity == "VALID" and best.early_stopping_met
    assert 250 <= best.qps <= 1500  # capacity 500/s; a 1 s probe with a 100 ms limit passes somewhat above it
    assert any(not p.passed for p in probes)  # the search found where it fails too
    assert len(probes) <= 8
    assert len((tmp_path / "probes.jsonl").read_text().splitlines()) == len(probes)
    for p in probes:  # every probe has LoadGen's own logs, written without a conf file
        run = read_loadgen_run(next((tmp_path / "tune").glob(f"probe-*-qps-{p.qps:g}")))
        assert run.settings.target_qps == pytest.approx(p.qps)
        assert run.settings.seeds == V60.seeds  # the round's schedule, as the real run has it
        assert not run.multiple_conf_files and run.errors == ()
        assert p.passed == (run.results.validity == "VALID")


@needs_loadgen
def test_probe_settings_carry_the_rounds_limits_and_the_benchmarks_token_settings():
    import mlperf_loadgen as lg

    interactive = BENCH.scenario("Interactive")
    s = probe_settings(lg, ProbeSpec(V60, BENCH, interactive, Length(4000, 480, 64), Length(4000, 480, 64), 16),
                       37.5, 64)
    assert (s.server_target_qps, s.ttft_latency, s.tpot_latency) == (37.5, 450_000_000, 40_000_000)
    assert s.use_token_latencies and s.sample_concatenate_permutation
    assert (s.min_duration_ms, s.min_query_count, s.performance_sample_count_override) == (4000, 480, 64)


# --- bad requests, refused before any step runs -------------------------------------------------------------

@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(registry=REPO / "registry.yaml", cache=tmp_path / "cache", runs=tmp_path / "runs")


def refused(settings: Settings, query: str, scenario: str, **kw: object) -> TuneError:
    with pytest.raises(TuneError) as err:
        tune(query, scenario=scenario, settings=settings, **kw)
    assert not settings.runs.exists()  # refused before a run record, a dep or an engine
    return err.value


def test_a_query_without_a_device_is_refused(settings: Settings):
    err = refused(settings, "app mlperf inference llama2 _tiny _short", "Server")
    assert "names no device" in err.message and "_cpu" in err.hint


def test_a_scenario_the_benchmark_has_no_rules_for_is_refused(settings: Settings):
    err = refused(settings, "app mlperf inference mixtral _cpu _tiny", "Interactive")
    assert "mixtral-8x7b has no Interactive scenario in round v6.0" in err.message
    assert "Offline, Server" in err.hint


def test_a_recipe_that_is_no_benchmark_app_is_refused(settings: Settings):
    err = refused(settings, "detect system", "Server")
    assert "not an MLPerf benchmark app" in err.message


def test_a_server_search_with_no_start_measures_it_and_a_start_below_zero_is_refused():
    from cmx.mlperf.tune.target import scenario_target

    target = scenario_target("llama2-70b", "llama2-70b-99", "v6.0", "Server", None)
    assert target.start_qps is None and target.has_limits  # tune_step then measures the Offline rate first
    with pytest.raises(TuneError, match="above 0"):
        scenario_target("llama2-70b", "llama2-70b-99", "v6.0", "Server", -1.0)


def test_the_cli_prints_a_refusal_as_a_sentence_or_as_json_and_exits_1(home):
    import json

    (home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                             encoding="utf-8")
    text = home.cmx("tune", "app mlperf inference llama2 _tiny _short", "--scenario", "server")
    assert text.returncode == 1 and text.stderr.startswith("error: the query names no device")
    assert "hint: add one of _cpu, _cuda, _rocm" in text.stderr
    as_json = home.cmx("tune", "app mlperf inference llama2 _tiny _short", "--scenario", "Server", "--json")
    data = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and data["ok"] is False and "names no device" in data["error"]
    usage = home.cmx("tune", "app mlperf inference llama2 _cpu _tiny", "--scenario", "Batch")
    assert usage.returncode == 2 and "Batch" in usage.stderr


def test_probes_are_the_short_profile_with_short_and_30_s_of_a_600_s_run_without():
    from types import SimpleNamespace

    from cmx.mlperf.tune.target import TuneRequest, TuneTarget, lengths

    server = TuneTarget(family="llama2-70b", benchmark="llama2-70b-99", round="v6.0", scenario="Server",
                        input_name="target_qps_server", start_qps=20.0, has_limits=True)
    probe, full, short = lengths(SimpleNamespace(short=True, rows=None), server, TuneRequest("Server"))
    assert probe == full == Length(4000, 480, 64) and short is not None and short.min_query_count == 480
    probe, full, short = lengths(SimpleNamespace(short=False, rows=None), server, TuneRequest("Server"))
    assert (probe.min_duration_ms, probe.min_queries) == (30_000, 480) and short is None
    assert (full.min_duration_ms, full.samples) == (600_000, 24576)
    offline = replace(server, scenario="Offline", input_name="target_qps_offline", has_limits=False)
    probe, full, _ = lengths(SimpleNamespace(short=False, rows=None), offline, TuneRequest("Offline"))
    assert (probe.min_duration_ms, probe.min_queries, full.min_queries) == (30_000, 480, 24576)


def test_a_probe_inside_the_limits_fails_a_search_that_keeps_headroom():
    from cmx.mlperf.tune.probe import over_headroom

    limits = LatencyLimits(ttft_p99_ms=2000, tpot_p99_ms=200)
    assert over_headroom(900.0, 150.0, limits, 1.0) is None  # cmx tune: the limits themselves
    assert over_headroom(900.0, 90.0, limits, 0.5) is None
    assert over_headroom(900.0, 150.0, limits, 0.5) == (
        "TPOT p99 150 ms is over 50% of its 200 ms limit (the headroom find-performance keeps)")
    assert over_headroom(1500.0, None, limits, 0.5).startswith("TTFT p99 1500 ms is over 50% of its 2000 ms")
