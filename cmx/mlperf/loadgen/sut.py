"""LoadGen's System Under Test and Query Sample Library over a cmx Backend (Offline, Server, Interactive,
SingleStream).

What LoadGen needs, and how these classes give it (see /work/shared/mlperf-rules.md and the
Backend contract in cmx.mlperf.backends.base):

- `issue_queries` runs on LoadGen's issue thread, holds the GIL, and latency counts from
  LoadGen's scheduled time: it only hands work on. Offline puts the whole query on a queue for
  the worker thread, which gives it to `Backend.generate` in one call (the engine's scheduler
  batches, not the harness) and completes each sample as the backend yields it. Server and
  Interactive call `Backend.submit` per sample, which returns at once. So does SingleStream, through
  the same SUT: LoadGen issues its next query only when the last one completed, so one sample is in
  flight at a time, and its latency (first token included, where LoadGen measures token latencies)
  is measured as a Server sample's.
- Every response is what the benchmark's `ResponseEncoder` makes of a result's output (an int32
  array of its token ids, unless the benchmark answers otherwise: Whisper sends its transcript's
  labels as int64) with `n_tokens` = all the generated tokens (LoadGen needs >= 2 for TPOT); the array lives
  until `QuerySamplesComplete` returns (LoadGen copies it there when it logs accuracy). Server
  sends `FirstTokenComplete` with the first token (n_tokens 1) before the completion.
- A failed request is still completed (with no tokens), so LoadGen never waits forever; the
  error is recorded in `errors` and the harness reports the run failed. A sample is completed
  once: a callback for one already completed (failed when the backend died) is dropped.
- Messages name a sample by its index (the dataset row, `GenRequest.sample`), never by LoadGen's
  query id (an address). The first MAX_LOGGED_FAILURES failures are logged one by one, the rest
  counted; samples failed together (a batch the backend gave up on, a dead backend's) are completed
  in one LoadGen call and logged in one line, so a dead server costs neither minutes nor gigabytes
  of log.
- A backend that dies (`BackendDead`: its server stopped answering, its last replica died) stops
  a Server or Interactive test at once: every sample in flight, and every one LoadGen issues
  after, is completed empty without reaching the backend, and `stopped` is set. Completing them
  does not end LoadGen's test: its Server scenario issues each query at its scheduled time
  whatever the SUT answers (it sleeps until then), and has no call to end a test early. So the
  harness runs the test through `LoadgenTest`, which stops waiting for LoadGen once `stopped` is
  set; `dead_line()` is the failure's first line. Offline needs none of this: its one query is
  completed as soon as the backend fails, and LoadGen returns; but LoadGen writes an error line
  (about 320 bytes) into its detail log for each sample answered empty, so an Offline query that
  lost more than MAX_EMPTY_ANSWERS samples is stopped the same way instead (a full run's 396,000
  lost samples made 127 MB of log, more than cmx reads, and 3 s of LoadGen calls).

Nothing starts in a constructor: `start()` starts the Offline worker, `construct()` hands the
callbacks to LoadGen, `wait_idle()` waits for outstanding work, `stop()` ends the worker and
`destroy()` frees LoadGen's handles (never while `LoadgenTest.running`: LoadGen still holds them).
LoadGen's module is passed in (`lg`), never imported here.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from cmx.errors import CmxError
from cmx.mlperf.backends.base import Backend, BackendDead, ChatPrompt, GenRequest, GenResult, Media, VideoPrompt
from cmx.mlperf.loadgen.progress import SampleClock
from cmx.mlperf.samples import ChatSource, PromptSource, ResponseEncoder, VideoSource

# Once the backend is dead, LoadGen gets this long to return by itself (it does when its schedule had
# ended, or for Offline) before the harness stops waiting for it
STOP_GRACE_S = 1.0
MAX_LOGGED_FAILURES = 20  # failed samples logged one by one; the harness's result counts them all
MAX_EMPTY_ANSWERS = 10_000  # lost Offline samples answered empty (about 3 MB of LoadGen's log); more stop the test
STREAMED_SCENARIOS = ("Server", "Interactive", "SingleStream")  # each sample to Backend.submit (ServerSUT)


class SutError(CmxError):
    """A SUT was used out of order (issued before start, constructed twice, ...)."""


@dataclass(frozen=True)
class Sample:
    """One loaded sample as the SUT sends it: token ids and media, or a chat, or a text-to-video prompt."""

    prompt_ids: list[int]
    media: tuple[Media, ...] = ()
    chat: ChatPrompt | None = None
    video: VideoPrompt | None = None


@dataclass(frozen=True)
class SampleError:
    """One sample that failed: LoadGen got an empty response for it. `sample` is its index (None when unknown)."""

    query_id: int
    message: str
    sample: int | None = None


def int32_tokens(token_ids: Sequence[int]) -> np.ndarray:
    """Token ids as the contiguous int32 array LoadGen logs (what accuracy and TEST06 read)."""
    return np.ascontiguousarray(np.asarray(token_ids, dtype=np.int32))


def token_answer(result: GenResult) -> np.ndarray:
    """The default ResponseEncoder: the result's token ids as int32."""
    if result.text is not None and not result.token_ids:
        raise SutError("answered with text only, and this benchmark answers LoadGen with token ids",
                       hint="use an engine that returns token ids for this benchmark")
    return int32_tokens(result.token_ids)


def text_answer(result: GenResult) -> np.ndarray:
    """A ResponseEncoder for a benchmark answered with text (Qwen3-VL's reply): its UTF-8 bytes, which the
    evaluator reads back with `bytes.fromhex(data).decode("utf-8")`."""
    if result.text is None:
        raise SutError("answered with token ids, and this benchmark answers LoadGen with the reply's text",
                       hint="run it through an endpoint's chat route (_endpoint)")
    return np.frombuffer(result.text.encode("utf-8"), dtype=np.uint8)


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


class QSL:
    """LoadGen's QSL over a PromptSource (or a ChatSource, or a VideoSource). `load_samples` caches the prompts (and
    media, for a MediaSource; the chats, for a ChatSource; the video prompts, for a VideoSource) of the samples
    LoadGen will issue (before its timed window), so `issue_queries` only looks them up."""

    def __init__(self, source: PromptSource | ChatSource | VideoSource, performance_sample_count: int,
                 logger: logging.Logger | None = None) -> None:
        if performance_sample_count < 1:
            raise SutError(f"performance_sample_count must be at least 1, not {performance_sample_count}")
        self.source = source
        self.total_count = len(source)
        self.performance_sample_count = min(performance_sample_count, self.total_count)
        self.log = logger or logging.getLogger(__name__)
        self._prompts: dict[int, Sample] = {}
        self._media: Callable[[int], Sequence[Media]] | None = getattr(source, "media", None)  # a MediaSource's
        self._chat: Callable[[int], ChatPrompt] | None = getattr(source, "chat", None)  # a ChatSource's
        self._video: Callable[[int], VideoPrompt] | None = getattr(source, "video", None)  # a VideoSource's
        self.handle: Any = None

    def load_samples(self, indices: Sequence[int]) -> None:
        """Cache the samples. One that cannot be read (an image that does not decode) is not cached and is logged
        here, since this runs inside LoadGen, where an exception must not escape; building its request reads it
        again and fails that sample with the reason."""
        unreadable = 0
        for i in indices:
            if i not in self._prompts:
                try:
                    self._prompts[i] = self._read(i)
                except Exception as exc:  # noqa: BLE001 - LoadGen's callback; the SUT's request raises it again
                    if not unreadable:
                        self.log.error("sample %d cannot be loaded: %s", i, exc)
                    unreadable += 1
        if unreadable:
            self.log.error("%d of %d samples could not be loaded; each fails when LoadGen issues it", unreadable,
                           len(indices))
        self.log.debug("QSL loaded %d samples (%d cached)", len(indices), len(self._prompts))

    def unload_samples(self, indices: Sequence[int]) -> None:
        for i in indices:
            self._prompts.pop(i, None)

    def prompt(self, index: int) -> list[int]:
        """Sample `index`'s prompt ids; read from the source if LoadGen did not load it."""
        return self.sample(index).prompt_ids

    def sample(self, index: int) -> Sample:
        """Sample `index`'s prompt ids and media, or its chat; read from the source if LoadGen did not load it."""
        cached = self._prompts.get(index)
        return cached if cached is not None else self._read(index)

    def _read(self, index: int) -> Sample:
        if self._chat is not None:
            return Sample([], chat=self._chat(index))
        if self._video is not None:
            return Sample([], video=self._video(index))
        source: Any = self.source  # a PromptSource: it has no chat
        return Sample(list(source.prompt_ids(index)), tuple(self._media(index)) if self._media is not None else ())

    def construct(self, lg: Any) -> Any:
        if self.handle is not None:
            raise SutError("the QSL is already constructed")
        self.handle = lg.ConstructQSL(self.total_count, self.performance_sample_count,
                                      self.load_samples, self.unload_samples)
        return self.handle

    def destroy(self, lg: Any) -> None:
        handle, self.handle = self.handle, None
        if handle is not None:
            lg.DestroyQSL(handle)


class _BaseSUT:
    """What both SUTs share: LoadGen's handle, the samples in flight, the error record, the sample clock, and
    whether the backend died (`dead`, `stopped`)."""

    def __init__(self, lg: Any, backend: Backend, qsl: QSL, max_tokens: int,
                 logger: logging.Logger | None = None, clock: SampleClock | None = None,
                 encode: ResponseEncoder | None = None, videos: Path | None = None) -> None:
        self.lg = lg
        self.videos = videos  # the test's videos folder, which each video request names (None: the backend's)
        self.clock = clock or SampleClock()
        self.backend = backend
        self.qsl = qsl
        self.max_tokens = max_tokens
        self.encode: ResponseEncoder = encode or token_answer
        self.log = logger or logging.getLogger(__name__)
        self.handle: Any = None
        self.errors: list[SampleError] = []
        self.completed = 0
        self.dead: BackendDead | None = None  # the backend's death, as it first reported it
        self.gave_up: str | None = None  # Offline: why the backend gave up on a query too large to answer empty
        self.stopped = threading.Event()  # set when the test must end now (Server: the backend died)
        # issued and not completed, with each one's sample index; LoadGen hears of each id once
        self._in_flight: dict[int, int] = {}
        self._logged_failures = 0
        self._idle = threading.Condition()

    def request(self, query_id: int, index: int) -> GenRequest:
        sample = self.qsl.sample(index)
        video = sample.video
        if video is not None and self.videos is not None:
            video = replace(video, folder=self.videos)
        return GenRequest(id=query_id, prompt_ids=sample.prompt_ids, max_tokens=self.max_tokens, media=sample.media,
                          chat=sample.chat, video=video, sample=index)

    def construct(self) -> Any:
        if self.handle is not None:
            raise SutError("the SUT is already constructed")
        self.handle = self.lg.ConstructSUT(self.issue_queries, self.flush_queries)
        return self.handle

    def destroy(self) -> None:
        handle, self.handle = self.handle, None
        if handle is not None:
            self.lg.DestroySUT(handle)

    def issue_queries(self, samples: Sequence[Any]) -> None:
        raise NotImplementedError

    def flush_queries(self) -> None:
        """LoadGen calls this when it has issued everything; the SUT has nothing buffered."""

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every issued sample is completed; False if `timeout` passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._in_flight, timeout)

    def dead_line(self) -> str | None:
        """The test's failure when the backend died, as its first line: what died, how, and the samples
        answered and lost by now; None while the backend lives."""
        if self.dead is None:
            return self.gave_up
        if self.dead.counted:  # an Offline batch's error, which counted its samples itself
            return self.dead.message
        lost = len(self.errors)
        return f"{self.dead.message} after {self.completed - lost} samples; {lost} samples lost"

    def _issued(self, samples: Sequence[tuple[int, int]]) -> None:
        """(query id, sample index) pairs LoadGen issued."""
        with self._idle:
            self._in_flight.update(samples)

    def _take(self, query_id: int) -> int | None:
        """The sample index of `query_id` if it was still in flight (it is not any more), else None; call with the
        lock held."""
        index = self._in_flight.pop(query_id, None)
        if index is None:
            self.log.debug("a result for a sample already completed was dropped (query id %#x)", query_id)
            return None
        self.completed += 1
        if not self._in_flight:
            self._idle.notify_all()
        return index

    def _complete(self, result: GenResult) -> None:
        try:
            data = np.ascontiguousarray(self.encode(result))
        except SutError as exc:  # this sample's answer cannot be given to LoadGen: it fails alone
            self._fail(result.id, exc)
            return
        with self._idle:  # the clock too, before wait_idle() can see the sample done
            if self._take(result.id) is None:
                return
            response = self.lg.QuerySampleResponse(result.id, _address(data), data.nbytes, result.n_tokens)
            self.lg.QuerySamplesComplete([response])
            self.clock.completed(result.id, result.n_tokens)

    def _fail(self, query_id: int, error: BaseException | str) -> None:
        """Complete the sample empty (LoadGen must not wait for it) and record why, naming its sample index."""
        with self._idle:
            index = self._take(query_id)
            if index is None:
                return
            text = str(error)
            if not re.search(rf"\b(sample|row) {index}\b", text):  # the message may name it already (a dataset row)
                text = f"sample {index}: {text}"
            self.errors.append(SampleError(query_id, text, index))
            self._answer_empty([query_id])
            log = self._failure_log()
        log("%s", text)

    def _fail_many(self, query_ids: Sequence[int], error: BaseException | str) -> None:
        """`_fail` for samples that failed together, for one reason (the batch the backend gave up on, a dead
        backend): one LoadGen call, one log line, one message for all."""
        text = str(error)
        with self._idle:
            taken = [(q, i) for q in query_ids if (i := self._take(q)) is not None]
            if not taken:
                return
            self.errors.extend(SampleError(q, text, i) for q, i in taken)
            self._answer_empty([q for q, _ in taken])
            log = self.log.debug if self.dead is not None else self.log.error
        indices = sorted(i for _, i in taken)
        indices = sorted(set(indices))  # a performance run issues each sample many times
        shown = ", ".join(map(str, indices[:10])) + (", ..." if len(indices) > 10 else "")
        log("%d samples failed (samples %s): %s", len(taken), shown, text)

    def _answer_empty(self, query_ids: Sequence[int]) -> None:
        """LoadGen's empty answers to failed samples, in one call (with the lock held)."""
        self._before_empty_answer(query_ids)
        self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(q, 0, 0, 0) for q in query_ids])
        for query_id in query_ids:
            self.clock.failed(query_id)

    def _failure_log(self) -> Callable[..., None]:
        """Where one more failed sample is logged (with the lock held): an error line for the first
        MAX_LOGGED_FAILURES while the backend lives, then (and after it died, when each sample fails the same way,
        as its own line said once) only at debug level."""
        if self.dead is not None:
            return self.log.debug
        self._logged_failures += 1
        if self._logged_failures > MAX_LOGGED_FAILURES:
            return self.log.debug
        if self._logged_failures == MAX_LOGGED_FAILURES:
            self.log.error("%d samples failed: later failures are counted in the result, not logged one by one",
                           MAX_LOGGED_FAILURES)
        return self.log.error

    def _before_empty_answer(self, query_ids: Sequence[int]) -> None:
        """What LoadGen needs before failed samples' empty answers (with the lock held): nothing, but for Server."""

    def _backend_died(self, error: BackendDead) -> bool:
        """Record the backend's death (the first report of it); whether this was the first."""
        with self._idle:
            first, self.dead = self.dead is None, self.dead or error
        if first:
            self.log.error("the backend is dead: %s", error.message)
        return first


class OfflineSUT(_BaseSUT):
    """Offline: the whole query goes to `Backend.generate` at once, on a worker thread."""

    def __init__(self, lg: Any, backend: Backend, qsl: QSL, max_tokens: int,
                 logger: logging.Logger | None = None, clock: SampleClock | None = None,
                 encode: ResponseEncoder | None = None, videos: Path | None = None) -> None:
        super().__init__(lg, backend, qsl, max_tokens, logger, clock, encode, videos)
        self._queue: queue.SimpleQueue[list[tuple[int, int]] | None] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None

    def start(self) -> None:
        if self._worker is not None:
            raise SutError("the Offline SUT is already started")
        self._worker = threading.Thread(target=self._work, name="cmx-offline-sut", daemon=True)
        self._worker.start()

    def issue_queries(self, samples: Sequence[Any]) -> None:
        if self._worker is None:
            raise SutError("issue_queries before start()")
        batch = [(s.id, s.index) for s in samples]
        self.clock.issued(query_id for query_id, _ in batch)
        self._issued(batch)
        self._queue.put(batch)

    def stop(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            self._queue.put(None)
            worker.join()

    def _work(self) -> None:
        while (batch := self._queue.get()) is not None:
            self._run(batch)

    def _run(self, batch: list[tuple[int, int]]) -> None:
        pending = {query_id for query_id, _ in batch}
        requests = []
        for query_id, index in batch:  # a sample that cannot be read (its image does not decode) fails alone
            try:
                requests.append(self.request(query_id, index))
            except Exception as exc:  # noqa: BLE001 - LoadGen must hear of every sample
                pending.discard(query_id)
                self._fail(query_id, exc)
        try:
            self.log.info("Offline: %d samples to the backend", len(requests))
            for result in self.backend.generate(requests):
                self._answer(result, pending)
        except Exception as exc:  # noqa: BLE001 - LoadGen must hear of every sample, whatever failed
            if isinstance(exc, BackendDead):  # only recorded: the failures below end LoadGen's one query
                self._backend_died(exc)
            if len(pending) > MAX_EMPTY_ANSWERS:
                self._stop_query(sorted(pending), exc)
            else:
                self._fail_many(sorted(pending), exc)
            return
        self._fail_many(sorted(pending), "the backend returned no result for it")

    def _stop_query(self, query_ids: Sequence[int], error: BaseException) -> None:
        """The backend gave up on a query too large to answer empty: record its samples as failed, unanswered, and
        tell the harness to stop waiting for LoadGen (as for a dead backend's Server test)."""
        text = str(error)
        with self._idle:
            self.errors.extend(SampleError(q, text, self._in_flight.get(q)) for q in query_ids)
            self.gave_up = self.gave_up or text.splitlines()[0]  # the failure's first line; its hint is in the log
        self.log.error("%d samples were lost (more than the %d cmx answers empty), so the test stops: %s",
                       len(query_ids), MAX_EMPTY_ANSWERS, text)
        self.stopped.set()

    def _answer(self, result: GenResult, pending: set[int]) -> None:
        if result.id not in pending:
            self.log.error("the backend returned an unknown or repeated query id %#x", result.id)
            return
        pending.discard(result.id)
        self._complete(result)


class ServerSUT(_BaseSUT):
    """Server, Interactive and SingleStream: each sample to `Backend.submit` at once; this object is the sink.
    Once the backend is dead, samples are failed here and never reach it.

    `first_tokens`: LoadGen measures token latencies (use_token_latencies). Then every sample needs its
    FirstTokenComplete before its completion, a failed one too: an accuracy run's log reads each sample's
    first-token record, and LoadGen crashes (a segfault) on one that was never given. A failed sample is
    given an empty one. A benchmark judged on whole answers (Qwen3-VL) sends none."""

    def __init__(self, lg: Any, backend: Backend, qsl: QSL, max_tokens: int,
                 logger: logging.Logger | None = None, clock: SampleClock | None = None,
                 encode: ResponseEncoder | None = None, videos: Path | None = None, *,
                 first_tokens: bool = True) -> None:
        super().__init__(lg, backend, qsl, max_tokens, logger, clock, encode, videos)
        self.first_tokens = first_tokens
        self._first_sent: set[int] = set()  # in flight, with their first token given to LoadGen (under the lock)

    def start(self) -> None:
        """Nothing to start: the streaming backend owns the thread the callbacks run on."""

    def stop(self) -> None:
        """Nothing to stop (the backend is stopped by its owner)."""

    def issue_queries(self, samples: Sequence[Any]) -> None:
        self.clock.issued(s.id for s in samples)
        self._issued([(s.id, s.index) for s in samples])
        for s in samples:
            if self.dead is not None:
                self._fail(s.id, self.dead)
                continue
            try:
                self.backend.submit(self.request(s.id, s.index), self)
            except Exception as exc:  # noqa: BLE001 - a sample LoadGen issued must be completed
                self._fail(s.id, exc)

    def on_first_token(self, request_id: int, token_id: int) -> None:
        first = int32_tokens([token_id])
        with self._idle:
            if request_id not in self._in_flight:  # failed already (the backend died): LoadGen is done with it
                return
            self.lg.FirstTokenComplete([self.lg.QuerySampleResponse(request_id, _address(first), first.nbytes, 1)])
            self._first_sent.add(request_id)
            self.clock.first_token(request_id)

    def on_done(self, result: GenResult) -> None:
        self._complete(result)
        with self._idle:
            self._first_sent.discard(result.id)

    def _before_empty_answer(self, query_ids: Sequence[int]) -> None:
        if self.first_tokens:
            firsts = [self.lg.QuerySampleResponse(q, 0, 0, 0) for q in query_ids if q not in self._first_sent]
            if firsts:
                self.lg.FirstTokenComplete(firsts)
        self._first_sent.difference_update(query_ids)

    def on_error(self, request_id: int, error: BaseException) -> None:
        if isinstance(error, BackendDead) and self._backend_died(error):
            self._stop_test()
        self._fail(request_id, error)

    def _stop_test(self) -> None:
        """Fail every sample in flight (the backend will answer none of them) and tell the harness to stop."""
        with self._idle:
            in_flight = sorted(self._in_flight)
        self._fail_many(in_flight, self.dead or "the backend died")
        self.stopped.set()


class LoadgenTest:
    """LoadGen's test (`start_test`: a StartTestWithLogSettings call) on a thread of its own, so that the harness
    can stop waiting for it when the SUT says the backend died (`_BaseSUT.stopped`).

    LoadGen has no call that ends a test early, and its Server scenario sleeps until each query's
    scheduled time, so a stopped test's thread lives on in LoadGen until its schedule ends (up to
    the whole min_duration): `running` says so, and the harness's process must then end with
    os._exit, after writing its result, instead of waiting for it.
    """

    def __init__(self, start_test: Callable[[], object]) -> None:
        self._start_test = start_test
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """LoadGen's test is still inside LoadGen (it holds the SUT and the QSL: destroy neither)."""
        return self._thread is not None and not self._done.is_set()

    def run(self, sut: _BaseSUT, poll_s: float = 0.05) -> bool:
        """Run the test; True once LoadGen returned, False when the SUT stopped it and LoadGen did not
        return within STOP_GRACE_S."""
        if self._thread is not None:
            raise SutError("a LoadGen test runs once")
        self._thread = threading.Thread(target=self._run, name="cmx-loadgen-test", daemon=True)
        self._thread.start()
        while not self._done.wait(poll_s):
            if sut.stopped.is_set():
                if not self._done.wait(STOP_GRACE_S):
                    return False
                break
        if self._error is not None:
            raise self._error
        return True

    def join(self, timeout: float | None = None) -> bool:
        """Wait for LoadGen to return, even from a stopped test; whether it did within `timeout` (a process that
        goes on using LoadGen must, before it starts another test or destroys the SUT)."""
        return self._done.wait(timeout)

    def _run(self) -> None:
        try:
            self._start_test()
        except BaseException as exc:  # noqa: BLE001 - handed to the thread that waits in run()
            self._error = exc
        finally:
            self._done.set()


def make_sut(scenario: str, lg: Any, backend: Backend, qsl: QSL, max_tokens: int,
             logger: logging.Logger | None = None, clock: SampleClock | None = None,
             encode: ResponseEncoder | None = None, *, first_tokens: bool = True,
             videos: Path | None = None) -> OfflineSUT | ServerSUT:
    """The SUT for a benchmark scenario (Offline; Server, Interactive and SingleStream stream, SingleStream one
    sample at a time as LoadGen issues it); `encode` is the benchmark's answer to LoadGen (int32 token ids unless
    it says otherwise); `first_tokens`: LoadGen measures token latencies (ServerSUT); `videos`: the test's videos
    folder, which its video requests name."""
    if scenario == "Offline":
        return OfflineSUT(lg, backend, qsl, max_tokens, logger, clock, encode, videos)
    if scenario in STREAMED_SCENARIOS:
        return ServerSUT(lg, backend, qsl, max_tokens, logger, clock, encode, videos, first_tokens=first_tokens)
    raise SutError(f"unknown scenario {scenario!r}", hint="Offline, Server, Interactive or SingleStream")
