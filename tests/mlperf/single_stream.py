"""What the SingleStream tests share: round files that give benchmarks a SingleStream scenario (no benchmark of cmx's
rounds lists one yet), and a real LoadGen SingleStream test of cmx's SUT on a backend of the tests' own.

The rounds are cmx's own files, copied, with a SingleStream scenario added as the round data of a benchmark that
has one will hold it (wan-2.2-t2v-a14b's, reported in seconds); `use_rounds` points cmx.mlperf.rounds at the copy
for one test. The backend answers each request from a thread of its own after `delay_s` and counts how many
requests it held at once: LoadGen's SingleStream issues the next query only when the last one completed.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from cmx.mlperf import rounds
from cmx.mlperf.backends.base import GenRequest, GenResult, StartInfo, StreamSink
from cmx.mlperf.loadgen.harness import remove_empty_trace
from cmx.mlperf.loadgen.log import LoadgenRun, read_loadgen_run
from cmx.mlperf.loadgen.sut import QSL, ServerSUT, make_sut
from tests.mlperf.loadgen_session import run_test
from tests.mlperf.prompts import Prompts

LOG = logging.getLogger("test-single-stream")
# (round, benchmark) -> the SingleStream scenario the copy adds: llama2 as an LLM with token latencies, in ms;
# Qwen3-VL as a benchmark judged on whole answers, in s (as constants.py SPECIAL_UNIT_DICT has wan-2.2-t2v-a14b)
QWEN = "qwen3-vl-235b-a22b"
ADDED = {
    ("v6.1", "llama2-70b-99.9"): {"loadgen_model": "llama2-70b", "loadgen_scenario": "SingleStream",
                                  "min_duration_ms": 600000},
    ("v6.1", QWEN): {"loadgen_model": QWEN, "loadgen_scenario": "SingleStream", "min_duration_ms": 600000,
                     "latency_unit": "s"},
}


def single_stream_rounds(folder: Path, added: dict[tuple[str, str], dict[str, Any]] | None = None) -> Path:
    """cmx's round files in `folder`, with a SingleStream scenario added to each benchmark of `added`."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in rounds.ROUNDS_DIR.glob("*.yaml"):
        shutil.copyfile(path, folder / path.name)
    for (name, benchmark), scenario in (ADDED if added is None else added).items():
        path = folder / f"{name}.yaml"
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        data["benchmarks"][benchmark]["scenarios"]["SingleStream"] = dict(scenario)
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return folder


def use_rounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make this test read its rounds from a copy that gives llama2-70b-99.9 and Qwen3-VL (v6.1) a SingleStream
    (each test module's fixture calls this)."""
    folder = single_stream_rounds(tmp_path / "rounds")
    monkeypatch.setattr(rounds, "ROUNDS_DIR", folder)
    return folder


class OneAtATime:
    """A backend answering each request from a thread of its own after `delay_s`: its first token, then
    `tokens` tokens. `most_at_once` is the most requests it held at the same time."""

    def __init__(self, delay_s: float = 0.002, tokens: int = 4) -> None:
        self.delay_s, self.tokens = delay_s, tokens
        self.most_at_once = 0
        self.requests = 0
        self._held = 0
        self._lock = threading.Lock()

    def start(self) -> StartInfo:
        return StartInfo(engines=({},), start_seconds=0.0, warmup_requests=0, warmup_seconds=0.0)

    def generate(self, requests: Sequence[GenRequest]) -> Iterator[GenResult]:
        for request in requests:
            yield GenResult(id=request.id, token_ids=self._answer(request))

    def submit(self, request: GenRequest, sink: StreamSink) -> None:
        with self._lock:
            self._held += 1
            self.requests += 1
            self.most_at_once = max(self.most_at_once, self._held)
        threading.Thread(target=self._serve, args=(request, sink), daemon=True).start()

    def details(self) -> dict[str, Any]:
        return {}

    def stop(self) -> None:
        pass

    def _answer(self, request: GenRequest) -> list[int]:
        return [100 + request.prompt_ids[0]] + [7] * (self.tokens - 2) + [2]

    def _serve(self, request: GenRequest, sink: StreamSink) -> None:
        time.sleep(self.delay_s)
        tokens = self._answer(request)
        sink.on_first_token(request.id, tokens[0])
        with self._lock:
            self._held -= 1
        sink.on_done(GenResult(id=request.id, token_ids=tokens))


def run_single_stream(out: Path, backend: OneAtATime, *, round_name: str = "v6.1", mode: str = "performance",
                      samples: int = 16, min_query_count: int = 100, min_duration_ms: int = 100,
                      token_latencies: bool = True, audit: Path | None = None) -> tuple[ServerSUT, LoadgenRun]:
    """One real LoadGen SingleStream test of make_sut's SUT on `backend`, the settings set by hand (FromConfig reads
    a conf once per process; the harness tests read theirs in a process of their own) with the round's seeds."""
    import mlperf_loadgen as lg

    seeds = rounds.load_round(round_name).seeds
    settings = lg.TestSettings()
    settings.scenario = lg.TestScenario.SingleStream
    settings.mode = lg.TestMode.AccuracyOnly if mode == "accuracy" else lg.TestMode.PerformanceOnly
    settings.use_token_latencies = token_latencies
    settings.min_duration_ms = min_duration_ms
    settings.min_query_count = min_query_count
    settings.single_stream_expected_latency_ns = 1_000_000
    settings.qsl_rng_seed, settings.sample_index_rng_seed = seeds.qsl_rng_seed, seeds.sample_index_rng_seed
    settings.schedule_rng_seed = seeds.schedule_rng_seed
    out.mkdir(parents=True, exist_ok=True)
    qsl = QSL(Prompts(samples), samples, LOG)
    sut = make_sut("SingleStream", lg, backend, qsl, max_tokens=16, logger=LOG, first_tokens=token_latencies)
    assert isinstance(sut, ServerSUT)
    run_test(lg, sut, qsl, settings, out, audit)
    remove_empty_trace(out)
    return sut, read_loadgen_run(out)
