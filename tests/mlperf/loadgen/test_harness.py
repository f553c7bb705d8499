"""The LoadGen SUT/QSL (cmx/mlperf/loadgen/sut.py) and the one-test-per-process harness (cmx/mlperf/loadgen/harness.py).

Unit tests drive real LoadGen in this process with a fake Backend (a test double of cmx's own
protocol, not of vLLM or LoadGen), setting TestSettings by hand: FromConfig is never called
here, so running several tests in this process cannot log "Multiple conf files are used".

The e2e tests run the harness as separate processes (real LoadGen, real vLLM on the CPU) on the
tiny random Llama and a tiny OpenOrca, with cmx's short user.conf profile and 16 output tokens:
Offline performance, Offline accuracy, Server performance and TEST06 on Server. An engine start
costs about 25 s here, so there are four processes, each run once for the whole module.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cmx.mlperf.backends.base import (
    Audio,
    BackendDead,
    ChatPrompt,
    GenRequest,
    GenResult,
    Sampling,
    StartInfo,
    StreamSink,
)
from cmx.mlperf.loadgen.accuracy_log import read_accuracy_log
from cmx.mlperf.loadgen.harness import (
    build_backend,
    check_one_scenario,
    evaluate_accuracy,
    judge,
    parse_args,
    run_in_process,
    run_tests,
    this_test,
    verify_test06,
)
from cmx.mlperf.loadgen.harness_config import (
    EndpointSettings,
    EngineSettings,
    HarnessConfig,
    HarnessError,
    HarnessResult,
)
from cmx.mlperf.loadgen.log import read_loadgen_run
from cmx.mlperf.loadgen.progress import SAMPLES_CSV, RunProgress
from cmx.mlperf.loadgen.sut import (
    QSL,
    STOP_GRACE_S,
    LoadgenTest,
    OfflineSUT,
    Sample,
    SampleError,
    ServerSUT,
    SutError,
    int32_tokens,
    make_sut,
    text_answer,
)
from cmx.mlperf.loadgen.test06 import verify_accuracy_txt_passes
from cmx.mlperf.rounds import load_round
from cmx.mlperf.samples import ResponseEncoder
from cmx.mlperf.scoring.accuracy_txt import read_accuracy_txt
from tests.conftest import DATA, needs_vllm
from tests.mlperf.loadgen_session import run_test
from tests.mlperf.prompts import Prompts

LOG = logging.getLogger("test-harness")
V60 = load_round("v6.0")
BENCH = "llama2-70b-99"
LOADGEN_LOGS = DATA / "loadgen"


# --- a fake Backend of our own protocol -------------------------------------------------------------

def answer(request: GenRequest) -> list[int]:
    """What the fake engine writes for a prompt: deterministic, at least 2 tokens, ending in EOS."""
    n = 2 + request.prompt_ids[0] % 5
    return [100 + request.prompt_ids[0]] + [7] * (n - 2) + [2]


class FakeBackend:
    """Answers at once (Offline) or from a thread of its own started in start() (streaming).
    Requests whose first prompt id is in `fail` fail."""

    def __init__(self, fail: frozenset[int] = frozenset()) -> None:
        self.fail = fail
        self.batches: list[int] = []
        self._pending: list[tuple[GenRequest, StreamSink] | None] = []
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None

    def start(self) -> StartInfo:
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        return StartInfo(engines=({},), start_seconds=0.0, warmup_requests=0, warmup_seconds=0.0)

    def generate(self, requests: Sequence[GenRequest]) -> Iterator[GenResult]:
        self.batches.append(len(requests))
        for request in reversed(requests):  # any order
            if request.prompt_ids[0] in self.fail:
                raise RuntimeError(f"engine failed on {request.id}")
            yield GenResult(id=request.id, token_ids=answer(request))

    def submit(self, request: GenRequest, sink: StreamSink) -> None:
        with self._ready:
            self._pending.append((request, sink))
            self._ready.notify()

    def stop(self) -> None:
        if self._thread is not None:
            with self._ready:
                self._pending.append(None)
                self._ready.notify()
            self._thread.join()
            self._thread = None

    def _take(self) -> tuple[GenRequest, StreamSink] | None:
        """The next submitted request and its sink, once there is one (None: stop serving)."""
        with self._ready:
            self._ready.wait_for(lambda: self._pending)
            return self._pending.pop(0)

    def _serve(self) -> None:
        while (item := self._take()) is not None:
            request, sink = item
            if request.prompt_ids[0] in self.fail:
                sink.on_error(request.id, RuntimeError("engine failed"))
                continue
            tokens = answer(request)
            sink.on_first_token(request.id, tokens[0])
            sink.on_done(GenResult(id=request.id, token_ids=tokens))


class Clips(Prompts):
    """A MediaSource: prompt i as Prompts has it, with clip i (i samples of silence at 16 kHz)."""

    def media(self, i: int) -> tuple[Audio, ...]:
        return (Audio(np.zeros(i, dtype=np.float32), 16000),)


class Unreadable(Prompts):
    """Prompts whose sample 3 cannot be read (as an image that does not decode)."""

    def prompt_ids(self, i: int) -> list[int]:
        if i == 3:
            raise ValueError("row 3's image cannot be decoded")
        return super().prompt_ids(i)


def run_loadgen(tmp_path: Path, scenario: str, mode: str, backend: FakeBackend, samples: int = 20,
                encode: ResponseEncoder | None = None, source: Prompts | None = None):
    """One real LoadGen test of the SUT on the fake backend, settings set by hand (no FromConfig)."""
    import mlperf_loadgen as lg

    settings = lg.TestSettings()
    settings.scenario = lg.TestScenario.Offline if scenario == "Offline" else lg.TestScenario.Server
    settings.mode = lg.TestMode.AccuracyOnly if mode == "accuracy" else lg.TestMode.PerformanceOnly
    settings.use_token_latencies = True
    settings.min_duration_ms = 200
    settings.min_query_count = 100
    settings.offline_expected_qps = 1000
    settings.server_target_qps = 500
    settings.ttft_latency = 2_000_000_000
    settings.tpot_latency = 200_000_000
    qsl = QSL(source or Prompts(samples), samples, LOG)
    backend.start()
    try:
        sut = make_sut(scenario, lg, backend, qsl, max_tokens=16, logger=LOG, encode=encode)
        run_test(lg, sut, qsl, settings, tmp_path)
    finally:
        backend.stop()
    return sut, read_loadgen_run(tmp_path)


needs_loadgen = pytest.mark.skipif(importlib.util.find_spec("mlperf_loadgen") is None,
                                   reason="mlperf_loadgen is not installed")


# --- unit: SUT plumbing on real LoadGen ------------------------------------------------------------

def test_token_ids_become_a_contiguous_int32_array():
    array = int32_tokens([5, 2**31 - 1, 2])
    assert array.dtype.name == "int32" and array.flags["C_CONTIGUOUS"] and array.nbytes == 12


def test_the_qsl_never_claims_more_performance_samples_than_it_holds():
    qsl = QSL(Prompts(10), 24576)
    assert (qsl.total_count, qsl.performance_sample_count) == (10, 10)
    qsl.load_samples([3, 4])
    assert qsl.prompt(3) == [3, 11, 12] and qsl.prompt(9) == [9, 11, 12]
    qsl.unload_samples([3])
    assert qsl.prompt(3) == [3, 11, 12]


def test_a_media_sources_clips_reach_the_backend_with_their_prompts():
    qsl = QSL(Clips(4), 4)
    qsl.load_samples([2])
    sample = qsl.sample(2)
    ids, media = sample.prompt_ids, sample.media
    assert ids == [2, 11, 12] and len(media) == 1 and media[0].samples.shape == (2,) and media[0].sample_rate == 16000
    request = make_sut("Offline", None, FakeBackend(), qsl, 16).request(query_id=7, index=3)
    assert request.prompt_ids == [3, 11, 12] and request.media[0].samples.shape == (3,)
    assert QSL(Prompts(2), 2).sample(1) == Sample([1, 11, 12])  # a PromptSource carries none


class Chats:
    def __init__(self, n: int) -> None:
        self.n, self.built = n, 0

    def __len__(self) -> int:
        return self.n

    def chat(self, i: int) -> ChatPrompt:
        self.built += 1
        return ChatPrompt(({"role": "user", "content": f"product {i}"},))


def test_a_chat_sources_conversations_are_built_once_when_loaded_and_sent_without_token_ids():
    source = Chats(4)
    qsl = QSL(source, 4)
    qsl.load_samples([1, 2])
    sut = make_sut("Server", None, FakeBackend(), qsl, 16)
    request = sut.request(query_id=9, index=2)
    assert request.chat is not None and request.chat.messages[0]["content"] == "product 2"
    assert request.prompt_ids == [] and request.media == ()
    sut.request(query_id=10, index=2)
    assert source.built == 2  # built when LoadGen loaded samples 1 and 2, not per query


def test_a_text_answer_is_its_utf8_bytes_and_token_ids_are_refused():
    array = text_answer(GenResult(id=1, token_ids=[], text='{"brand": "café"}', count=7))
    assert array.dtype == np.uint8 and bytes(array).decode("utf-8") == '{"brand": "café"}'
    assert text_answer(GenResult(id=2, token_ids=[], text="", count=0)).nbytes == 0  # a failed reply, answered empty
    with pytest.raises(SutError, match="answered with token ids"):
        text_answer(GenResult(id=3, token_ids=[5, 6]))


def test_make_sut_picks_the_streaming_sut_for_server_and_interactive():
    qsl = QSL(Prompts(2), 2)
    assert isinstance(make_sut("Offline", None, FakeBackend(), qsl, 16), OfflineSUT)
    assert isinstance(make_sut("Interactive", None, FakeBackend(), qsl, 16), ServerSUT)


@needs_loadgen
def test_offline_hands_the_whole_query_to_the_backend_and_logs_int32_tokens_with_n_tokens(tmp_path: Path):
    backend = FakeBackend()
    sut, run = run_loadgen(tmp_path, "Offline", "accuracy", backend)
    assert backend.batches == [20]  # one generate call, not chunks
    assert run.errors == () and sut.errors == []
    records = read_accuracy_log(tmp_path / "mlperf_log_accuracy.json")
    assert sorted(r.qsl_idx for r in records) == list(range(20))
    for record in records:
        expected = answer(GenRequest(id=0, prompt_ids=[record.qsl_idx, 11, 12]))
        assert record.tokens == expected
        assert record.token_count == len(expected)
        assert record.token_data is None  # Offline sends no first token


@needs_loadgen
@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_a_sample_that_cannot_be_loaded_fails_alone_and_names_why(tmp_path: Path, scenario: str):
    sut, _ = run_loadgen(tmp_path, scenario, "accuracy", FakeBackend(), source=Unreadable(20))
    assert [e.message for e in sut.errors] == ["row 3's image cannot be decoded"]
    assert sut.completed == 20  # LoadGen heard of every sample, the unreadable one answered empty
    records = {r.qsl_idx: r for r in read_accuracy_log(tmp_path / "mlperf_log_accuracy.json")}
    assert records[3].data == b"" and records[4].tokens == answer(GenRequest(id=0, prompt_ids=[4, 11, 12]))


@needs_loadgen
def test_a_failed_server_sample_gets_an_empty_first_token_so_loadgen_can_log_its_accuracy(tmp_path: Path):
    # LoadGen's accuracy log reads every Server sample's first-token record when it measures token latencies:
    # a failed sample without one crashed it (a segfault)
    sut, run = run_loadgen(tmp_path, "Server", "accuracy", FakeBackend(fail=frozenset({3})))
    assert [(e.sample, e.message) for e in sut.errors] == [(3, "sample 3: engine failed")]  # by index, not query id
    assert [e.value for e in run.errors] == ["n_tokens argument missing or attempted to record 0 as number of tokens"]
    records = {r.qsl_idx: r for r in read_accuracy_log(tmp_path / "mlperf_log_accuracy.json")}
    assert records[3].data == b"" and records[3].token_data == b""


@needs_loadgen
def test_a_benchmarks_encoder_answers_loadgen_and_n_tokens_stays_the_generated_count(tmp_path: Path):
    def as_int64_text(result: GenResult) -> np.ndarray:  # Whisper-like: something else than the token ids
        return np.asarray([t % 7 for t in result.token_ids[:-1]], dtype="<i8")

    sut, run = run_loadgen(tmp_path, "Offline", "accuracy", FakeBackend(), encode=as_int64_text)
    assert run.errors == () and sut.errors == []
    for record in read_accuracy_log(tmp_path / "mlperf_log_accuracy.json"):
        expected = answer(GenRequest(id=0, prompt_ids=[record.qsl_idx, 11, 12]))
        assert record.data == as_int64_text(GenResult(0, expected)).tobytes()
        assert record.token_count == len(expected)  # what LoadGen counts as tokens: the model's, not the array's


@needs_loadgen
def test_server_sends_the_first_token_before_completion_and_counts_tokens(tmp_path: Path):
    sut, run = run_loadgen(tmp_path, "Server", "performance", FakeBackend(), samples=20)
    assert run.errors == () and sut.errors == []
    assert run.results.ttft is not None and run.results.ttft.p99_ns is not None
    assert run.results.tokens_per_second and run.results.tokens_per_second > 0
    assert sut.completed == run.results.query_count


@needs_loadgen
def test_server_accuracy_log_has_the_first_token_and_the_token_count(tmp_path: Path):
    _, run = run_loadgen(tmp_path, "Server", "accuracy", FakeBackend())
    assert run.errors == ()
    records = read_accuracy_log(tmp_path / "mlperf_log_accuracy.json")
    assert len(records) == 20
    for record in records:
        assert record.token_count == record.n_tokens >= 2
        assert record.first_tokens == record.tokens[:1]


@needs_loadgen
@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_a_failed_request_completes_its_sample_and_is_recorded(tmp_path: Path, scenario: str):
    sut, run = run_loadgen(tmp_path, scenario, "accuracy", FakeBackend(fail=frozenset({3})))
    assert sut.errors, "the failure must be recorded"
    assert sut.completed == 20  # LoadGen returned: nothing left waiting
    assert run.errors, "the empty response makes LoadGen log an error, so the run reads as failed"


# --- unit: a backend that dies stops a Server test at once ----------------------------------------------

class DyingBackend(FakeBackend):
    """Streams answers until `answered` samples are done; then holds the next request unanswered (a stream
    in flight) and fails every later one with BackendDead, as a dead server's backend does."""

    def __init__(self, answered: int) -> None:
        super().__init__()
        self.answered = answered
        self.held: list[int] = []
        self.after_death = 0  # requests submitted after the backend said it was dead
        self.died_at: float | None = None

    def submit(self, request: GenRequest, sink: StreamSink) -> None:
        if self.died_at is not None:
            self.after_death += 1
        super().submit(request, sink)

    def _serve(self) -> None:
        served = 0
        while (item := self._take()) is not None:
            request, sink = item
            served += 1
            if served <= self.answered:
                tokens = answer(request)
                sink.on_first_token(request.id, tokens[0])
                sink.on_done(GenResult(id=request.id, token_ids=tokens))
            elif not self.held:
                self.held.append(request.id)
            elif self.died_at is None:
                sink.on_error(request.id, BackendDead("the server at http://127.0.0.1:9/v1 stopped answering "
                                                      "(connection refused)"))
                self.died_at = time.monotonic()  # the SUT has heard: nothing may be submitted from here on


def start_loadgen_test(tmp_path: Path, scenario: str, backend: FakeBackend, min_duration_ms: int):
    """A real LoadGen test of the SUT on `backend` through LoadgenTest (settings by hand, no FromConfig)."""
    import mlperf_loadgen as lg

    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, scenario)
    settings.mode = lg.TestMode.PerformanceOnly
    settings.min_duration_ms = min_duration_ms
    settings.min_query_count = 1
    settings.server_target_qps = 100
    settings.offline_expected_qps = 100
    log = lg.LogSettings()
    tmp_path.mkdir(parents=True, exist_ok=True)
    log.log_output.outdir = str(tmp_path)
    log.enable_trace = False
    qsl = QSL(Prompts(20), 20, LOG)
    backend.start()
    sut = make_sut(scenario, lg, backend, qsl, max_tokens=16, logger=LOG)
    sut.start()
    qsl.construct(lg)
    sut.construct()
    test = LoadgenTest(lambda: lg.StartTestWithLogSettings(sut.handle, qsl.handle, settings, log,
                                                           str(tmp_path / "no-audit.config")))

    def finish() -> None:
        assert test.join(30), "LoadGen never returned"
        sut.stop()
        sut.destroy()
        qsl.destroy(lg)
        backend.stop()
    return sut, test, finish


@needs_loadgen
def test_a_dead_backend_stops_a_server_test_long_before_loadgens_schedule_ends(tmp_path: Path):
    backend = DyingBackend(answered=5)
    sut, test, finish = start_loadgen_test(tmp_path, "Server", backend, min_duration_ms=3000)
    try:
        assert test.run(sut) is False  # the SUT stopped it: LoadGen still sleeps through its 3 s schedule
        returned = time.monotonic()
        assert test.running and backend.died_at is not None
        assert returned - backend.died_at < STOP_GRACE_S + 1.0
        assert sut.stopped.is_set() and backend.held[0] not in sut._in_flight  # the stream in flight is completed
        line = sut.dead_line()
        assert line is not None and line.startswith("the server at http://127.0.0.1:9/v1 stopped answering "
                                                    "(connection refused) after 5 samples; ")
    finally:
        finish()
    assert backend.after_death == 0  # LoadGen's later samples were failed in the SUT, never sent
    assert sut.wait_idle(0) and len(sut.errors) == sut.completed - 5  # every issued sample completed, once
    assert f"{len(sut.errors)} samples lost" in (sut.dead_line() or "")


@needs_loadgen
def test_an_ordinary_failure_or_an_offline_death_lets_loadgen_end_the_test_itself(tmp_path: Path):
    sut, test, finish = start_loadgen_test(tmp_path / "s", "Server", FakeBackend(fail=frozenset(range(10))), 300)
    try:
        assert test.run(sut) is True and not test.running
    finally:
        finish()
    assert sut.errors and sut.dead is None and not sut.stopped.is_set()

    class DyingOffline(FakeBackend):
        def generate(self, requests: Sequence[GenRequest]) -> Iterator[GenResult]:
            yield GenResult(id=requests[0].id, token_ids=answer(requests[0]))
            raise BackendDead("every replica has died")

    sut, test, finish = start_loadgen_test(tmp_path / "o", "Offline", DyingOffline(), 300)
    try:
        assert test.run(sut) is True  # Offline's one query is complete once the backend fails: LoadGen returns
    finally:
        finish()
    assert sut.dead_line() == f"every replica has died after 1 samples; {sut.completed - 1} samples lost"

    class DeadServerOffline(FakeBackend):  # the endpoint's batch error counts its samples itself: said once
        def generate(self, requests: Sequence[GenRequest]) -> Iterator[GenResult]:
            from cmx.mlperf.backends.endpoint_client import batch_failure

            yield GenResult(id=requests[0].id, token_ids=answer(requests[0]))
            raise batch_failure(BackendDead("the server at http://h/v1 stopped answering (connection refused)"),
                                done=1, sent=3, total=len(requests))

    sut, test, finish = start_loadgen_test(tmp_path / "e", "Offline", DeadServerOffline(), 300)
    try:
        assert test.run(sut) is True
    finally:
        finish()
    total = sut.completed
    assert sut.dead_line() == ("the server at http://h/v1 stopped answering (connection refused); 1 of "
                               f"{total} samples completed, 2 in flight were lost, {total - 3} not sent")


def harness_config(tmp_path: Path, **kw: object) -> HarnessConfig:
    base: dict[str, object] = {"model": tmp_path / "model", "dataset": tmp_path / "orca.pkl", "scenario": "Server",
                               "mode": "test06", "user_conf": tmp_path / "user.conf", "output": tmp_path / "out"}
    return HarnessConfig(**{**base, **kw})


def test_a_harness_config_survives_the_command_line(tmp_path: Path):
    config = harness_config(tmp_path, rows=64, max_tokens=16,
                            engine=EngineSettings(max_model_len=2048, max_num_seqs=8, precision="bf16"),
                            endpoint=EndpointSettings(url="http://127.0.0.1:9/v1", model="m", max_concurrency=4),
                            sampling=Sampling(temperature=1.0, top_k=-1))
    tmp_path.joinpath("out").mkdir()
    argv = config.argv(tmp_path / "out" / "harness_config.json")
    assert argv == ["--config", str(tmp_path / "out" / "harness_config.json")]
    assert parse_args(argv) == [config] and parse_args(argv)[0].sampling == Sampling(temperature=1.0, top_k=-1)
    assert "key" not in (tmp_path / "out" / "harness_config.json").read_text()  # the API key travels in the environment
    with pytest.raises(HarnessError, match="unknown mode"):
        harness_config(tmp_path, mode="TEST06")


def test_the_harness_hands_the_tests_sampling_to_either_backend(tmp_path: Path):
    sampling = Sampling(temperature=1.0, top_p=0.9, top_k=-1, seed=5)
    vllm = build_backend(harness_config(tmp_path, sampling=sampling), logging.getLogger("t"))
    endpoint = build_backend(harness_config(tmp_path, sampling=sampling,
                                            endpoint=EndpointSettings(url="http://127.0.0.1:9/v1")),
                             logging.getLogger("t"))
    assert vllm.config.sampling == sampling and vllm.config.streaming  # Server streams
    assert endpoint.config.sampling == sampling


def test_one_harness_process_runs_only_tests_that_share_its_scenario_user_conf_and_backend(tmp_path: Path):
    perf, acc = harness_config(tmp_path, mode="performance"), harness_config(tmp_path, mode="accuracy")
    perf, acc = (replace(c, output=tmp_path / c.mode) for c in (perf, acc))
    check_one_scenario([perf, acc])  # the app's shape: one scenario, its own folder per test
    with pytest.raises(HarnessError, match="must share scenario"):
        check_one_scenario([perf, replace(acc, scenario="Offline")])
    with pytest.raises(HarnessError, match="must share user_conf"):
        check_one_scenario([perf, replace(acc, user_conf=tmp_path / "other.conf")])
    with pytest.raises(HarnessError, match="same folder"):
        check_one_scenario([perf, replace(acc, output=perf.output)])
    with pytest.raises(HarnessError, match="no test"):
        check_one_scenario([])


def test_a_later_tests_counts_on_a_shared_backend_are_its_own():
    before = {"replicas": [{"index": 0, "samples": 10, "tokens": 100, "alive": True}]}
    after = {"replicas": [{"index": 0, "samples": 14, "tokens": 150, "alive": True}], "url": "u"}
    assert this_test(before, after) == {"replicas": [{"index": 0, "samples": 4, "tokens": 50, "alive": True}],
                                        "url": "u"}
    assert this_test({}, {"url": "u"}) == {"url": "u"}


@needs_loadgen
def test_the_harness_refuses_to_run_beside_a_stray_audit_config(tmp_path: Path):
    config = harness_config(tmp_path, mode="performance")
    config.output.mkdir()
    (config.output / "audit.config").write_text("*.*.mode = 2\n")
    with pytest.raises(HarnessError, match="stray"):
        run_in_process([config], LOG)


@pytest.mark.parametrize(("folder", "scenario", "mode", "expected"), [
    ("server-perf", "Server", "performance", None),
    ("invalid", "Server", "performance", "INVALID"),
    ("error", "Offline", "accuracy", "n_tokens"),
])
def test_the_verdict_comes_from_loadgens_logs_and_sample_failures(folder: str, scenario: str, mode: str,
                                                                    expected: str | None, tmp_path: Path):
    config = harness_config(tmp_path, output=LOADGEN_LOGS / folder, scenario=scenario, mode=mode)
    result = judge(config, [], 16, 1.0, 2.0, {})
    assert result.ok == (expected is None), result.problems
    if expected:
        assert expected in "\n".join(result.problems)
    failed = judge(config, [SampleError(7, "engine died")], 16, 1.0, 2.0, {})
    assert not failed.ok and failed.failed_samples == 1
    assert failed.problems[0] == "engine died (1 of 16 samples failed in the backend and were answered empty)"
    assert failed.validity == "FAILED" and failed.loadgen_validity == result.loadgen_validity


def test_a_harness_result_round_trips_through_result_json_and_fails_on_any_problem(tmp_path: Path):
    result = HarnessResult(scenario="Server", mode="performance", validity="INVALID", problems=["too slow"],
                           samples_per_second=1.0, tokens_per_second=2.0, ttft_p99_ms=3.0, tpot_p99_ms=4.0,
                           completed_samples=5, failed_samples=0, start_seconds=1.0, test_seconds=2.0)
    assert HarnessResult.read(result.write(tmp_path / "result.json")) == result
    assert not result.ok and "too slow" in result.verdict()


# --- e2e: the harness, real vLLM on the CPU, real LoadGen ---------------------------------------------

ROWS = 256
MAX_TOKENS = 16
SAMPLES = 64  # the short profile's performance sample count
RUN_TIMEOUT_S = 300


class Tiny:
    """The tiny model and dataset, and a folder per harness process (a scenario's tests, one engine)."""

    def __init__(self, root: Path) -> None:
        from cmx.mlperf.benchmarks.llama2_70b.tiny import (
            make_tiny_llama,
            make_tiny_openorca,
        )

        self.root = root
        self.progress: dict[str, list[RunProgress]] = {}  # what on_progress heard, per test ("Server performance")
        self.model = make_tiny_llama(root / "model", seed=0).path
        self.dataset = make_tiny_openorca(root / "orca.pkl", self.model, rows=ROWS, seed=0).path

    def run(self, scenario: str, modes: tuple[str, ...], target_qps: float,
            **short: int) -> dict[str, tuple[HarnessResult, Path]]:
        """The scenario's tests in one harness process, as the app runs them: each mode's result and folder."""
        from cmx.mlperf.loadgen.userconf import ShortProfile, user_conf

        profile = ShortProfile(samples=SAMPLES, **short)
        conf = user_conf(V60, BENCH, scenario, target_qps=target_qps, short=profile)
        conf = conf.write(self.root / f"{scenario}.conf")
        configs = [HarnessConfig(model=self.model, dataset=self.dataset, scenario=scenario, mode=mode, user_conf=conf,
                                 output=self.root / scenario / mode, device="cpu", max_tokens=MAX_TOKENS, rows=ROWS,
                                 engine=EngineSettings(max_model_len=2048)) for mode in modes]

        def heard(progress: RunProgress) -> None:
            self.progress.setdefault(f"{progress.scenario} {progress.mode}", []).append(progress)

        results = run_tests(configs, timeout=RUN_TIMEOUT_S, logger=LOG, on_progress=heard)
        return {c.mode: (r, c.output) for c, r in zip(configs, results, strict=True)}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Tiny:
    return Tiny(tmp_path_factory.mktemp("harness"))


# Offline does about 150 samples/s here and 350/s where the CPU has native bf16: asking for 500
# (LoadGen issues 1.1 x 500 x 2 s = 1,100 samples) makes the query outlast min_duration on both
@pytest.fixture(scope="module")
def offline(tiny: Tiny) -> dict[str, tuple[HarnessResult, Path]]:
    return tiny.run("Offline", ("performance", "accuracy"), 500, min_duration_ms=2000, min_query_count=SAMPLES)


@pytest.fixture(scope="module")
def offline_perf(offline: dict[str, tuple[HarnessResult, Path]]) -> tuple[HarnessResult, Path]:
    return offline["performance"]


@pytest.fixture(scope="module")
def offline_accuracy(offline: dict[str, tuple[HarnessResult, Path]]) -> tuple[HarnessResult, Path]:
    return offline["accuracy"]


# Server: 512 queries (over the 459 early stopping needs) at 40/s, about half of what a 2-core AVX2
# machine serves (~77 samples/s in float32; ~150/s where the CPU has native bf16); TEST06 after the
# performance run, on the same engine
@pytest.fixture(scope="module")
def server(tiny: Tiny) -> dict[str, tuple[HarnessResult, Path]]:
    return tiny.run("Server", ("performance", "test06"), 40, min_duration_ms=4000, min_query_count=480)


@pytest.fixture(scope="module")
def server_perf(server: dict[str, tuple[HarnessResult, Path]]) -> tuple[HarnessResult, Path]:
    return server["performance"]


@pytest.fixture(scope="module")
def server_test06(server: dict[str, tuple[HarnessResult, Path]]) -> tuple[HarnessResult, Path]:
    return server["test06"]


def assert_clean_logs(out: Path) -> None:
    run = read_loadgen_run(out)
    assert run.errors == (), [e.value for e in run.errors]
    assert not (out / "audit.config").exists()
    assert not (out / "mlperf_log_trace.json").exists()  # tracing off, and no empty file left behind
    assert (out / "result.json").is_file()


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_offline_performance_is_valid_with_tokens_per_second(offline_perf: tuple[HarnessResult, Path]):
    result, out = offline_perf
    assert result.ok, result.verdict()
    assert result.validity == "VALID" and result.tokens_per_second and result.tokens_per_second > 0
    assert result.failed_samples == 0
    assert_clean_logs(out)


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_an_offline_test_reports_samples_tokens_per_second_and_eta_as_they_finish(
        offline_perf: tuple[HarnessResult, Path], tiny: Tiny):
    result, _ = offline_perf
    seen = tiny.progress["Offline performance"]
    # the engine answers each sample as it finishes, not the whole query at its end
    partial = [p for p in seen if p.state == "running" and p.expected and 0 < p.completed < p.expected]
    assert partial, [(p.state, p.completed, p.expected) for p in seen]
    assert all(p.tokens_per_s and p.eta_s is not None for p in partial)
    assert seen[-1].completed == result.completed_samples == seen[-1].expected


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_offline_accuracy_writes_a_parseable_accuracy_txt(offline_accuracy: tuple[HarnessResult, Path],
                                                            tiny: Tiny):
    result, out = offline_accuracy
    assert result.ok, result.verdict()
    assert_clean_logs(out)  # LoadGen read the user.conf once: no "Multiple conf files" error in the second test
    # the second test of the process ran on the engine the first started, with its own log of its own lines
    assert result.details["engine_reused"] is True and result.start_seconds == 0.0
    own = (out / "harness.log").read_text(encoding="utf-8")
    assert "on the engine it started" in own and "Offline accuracy" in own and "vLLM engine" not in own
    records = read_accuracy_log(out / "mlperf_log_accuracy.json")
    assert sorted({r.qsl_idx for r in records}) == list(range(ROWS))
    assert all(2 <= r.n_tokens <= MAX_TOKENS for r in records)
    assert all(r.token_count == r.n_tokens for r in records)
    vocab = json.loads((tiny.model / "config.json").read_text())["vocab_size"]
    assert all(0 <= i < vocab for r in records for i in r.tokens)  # the tiny model's own ids, from vLLM
    values = read_accuracy_txt(evaluate_accuracy(out, tiny.dataset, tiny.model, rows=ROWS))
    for key in ("rouge1", "rouge2", "rougeL", "tokens_per_sample"):
        assert isinstance(values[key], float)
    assert 2 <= values["tokens_per_sample"] <= MAX_TOKENS
    assert len(str(values["hash"])) == 64


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_server_performance_is_valid_within_the_v6_0_latency_limits(server_perf: tuple[HarnessResult, Path]):
    result, out = server_perf
    assert result.ok, result.verdict()
    assert result.validity == "VALID"
    assert result.ttft_p99_ms is not None and result.ttft_p99_ms < 2000
    assert result.tpot_p99_ms is not None and result.tpot_p99_ms < 200
    assert result.completed_samples >= 459
    assert_clean_logs(out)


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_a_server_test_reports_live_progress_and_writes_each_samples_times(server_perf: tuple[HarnessResult, Path],
                                                                           tiny: Tiny):
    result, out = server_perf
    seen = tiny.progress["Server performance"]
    assert seen[0].state == "starting" and seen[-1].state == "done"
    running = [p for p in seen if p.state == "running" and p.completed]
    assert running, "no progress while LoadGen ran"
    # 480 queries by the settings (more when LoadGen issues more, for early stopping)
    assert all((p.ttft_limit_ms, p.tpot_limit_ms) == (2000.0, 200.0) and p.expected >= 480 for p in running)
    assert seen[-1].expected == max(480, seen[-1].issued)
    assert all(p.tokens_per_s and p.ttft_p99_ms is not None and p.eta_s is not None for p in running)
    final = seen[-1]
    assert final.completed == result.completed_samples and final.failed == 0
    # the SUT times from when LoadGen handed it the sample, LoadGen from its schedule: never later
    assert final.ttft_p99_ms is not None and result.ttft_p99_ms is not None
    assert final.ttft_p99_ms <= result.ttft_p99_ms * 1.05
    rows = (out / SAMPLES_CSV).read_text(encoding="utf-8").splitlines()
    assert len(rows) == result.completed_samples + 1


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_test06_on_server_passes_every_check_and_removes_its_audit_config(
        server_test06: tuple[HarnessResult, Path]):
    result, out = server_test06
    assert result.ok, result.verdict()
    assert read_loadgen_run(out).audit_config_used
    assert_clean_logs(out)
    records = read_accuracy_log(out / "mlperf_log_accuracy.json")
    assert records and all(r.n_tokens >= 2 and r.token_count == r.n_tokens for r in records)
    text = verify_test06(out, "Server").read_text(encoding="utf-8")
    assert "First token check pass: True" in text
    assert "EOS check pass: True" in text
    assert "Sample length check pass: True" in text
    assert verify_accuracy_txt_passes(text)
