"""LoadGen's System Under Test and Query Sample Library over a cmx Backend (Offline, Server, Interactive).

What LoadGen needs, and how these classes give it (see /work/shared/mlperf-rules.md and the
Backend contract in cmx.mlperf.backends.base):

- `issue_queries` runs on LoadGen's issue thread, holds the GIL, and latency counts from
  LoadGen's scheduled time: it only hands work on. Offline puts the whole query on a queue for
  the worker thread, which gives it to `Backend.generate` in one call (the engine's scheduler
  batches, not the harness). Server and Interactive call `Backend.submit` per sample, which
  returns at once.
- Every response is an int32 array of the output token ids with `n_tokens` = all of them
  (LoadGen needs >= 2 for TPOT); the array lives until `QuerySamplesComplete` returns (LoadGen
  copies it there when it logs accuracy). Server sends `FirstTokenComplete` with the first token
  (n_tokens 1) before the completion.
- A failed request is still completed (with no tokens), so LoadGen never waits forever; the
  error is recorded in `errors` and the harness reports the run failed.

Nothing starts in a constructor: `start()` starts the Offline worker, `construct()` hands the
callbacks to LoadGen, `wait_idle()` waits for outstanding work, `stop()` ends the worker and
`destroy()` frees LoadGen's handles. LoadGen's module is passed in (`lg`), never imported here.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from cmx.errors import CmxError
from cmx.mlperf.backends.base import Backend, GenRequest, GenResult
from cmx.mlperf.loadgen.progress import SampleClock


class SutError(CmxError):
    """A SUT was used out of order (issued before start, constructed twice, ...)."""


class PromptSource(Protocol):
    """What the QSL reads: sample i's prompt as token ids (cmx.mlperf.benchmarks.llama2_70b.dataset.OpenOrca is one)."""

    def __len__(self) -> int: ...

    def prompt_ids(self, i: int) -> list[int]: ...


@dataclass(frozen=True)
class SampleError:
    """One sample that failed: LoadGen got an empty response for it."""

    query_id: int
    message: str


def int32_tokens(token_ids: Sequence[int]) -> np.ndarray:
    """Token ids as the contiguous int32 array LoadGen logs (what accuracy and TEST06 read)."""
    return np.ascontiguousarray(np.asarray(token_ids, dtype=np.int32))


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


class QSL:
    """LoadGen's QSL over a PromptSource. `load_samples` caches the prompts of the samples LoadGen
    will issue (before its timed window), so `issue_queries` only looks them up."""

    def __init__(self, source: PromptSource, performance_sample_count: int,
                 logger: logging.Logger | None = None) -> None:
        if performance_sample_count < 1:
            raise SutError(f"performance_sample_count must be at least 1, not {performance_sample_count}")
        self.source = source
        self.total_count = len(source)
        self.performance_sample_count = min(performance_sample_count, self.total_count)
        self.log = logger or logging.getLogger(__name__)
        self._prompts: dict[int, list[int]] = {}
        self.handle: Any = None

    def load_samples(self, indices: Sequence[int]) -> None:
        for i in indices:
            if i not in self._prompts:
                self._prompts[i] = list(self.source.prompt_ids(i))
        self.log.debug("QSL loaded %d samples (%d cached)", len(indices), len(self._prompts))

    def unload_samples(self, indices: Sequence[int]) -> None:
        for i in indices:
            self._prompts.pop(i, None)

    def prompt(self, index: int) -> list[int]:
        """Sample `index`'s prompt ids; read from the source if LoadGen did not load it."""
        cached = self._prompts.get(index)
        return cached if cached is not None else list(self.source.prompt_ids(index))

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
    """What both SUTs share: LoadGen's handle, the outstanding-sample count, the error record, the sample clock."""

    def __init__(self, lg: Any, backend: Backend, qsl: QSL, max_tokens: int,
                 logger: logging.Logger | None = None, clock: SampleClock | None = None) -> None:
        self.lg = lg
        self.clock = clock or SampleClock()
        self.backend = backend
        self.qsl = qsl
        self.max_tokens = max_tokens
        self.log = logger or logging.getLogger(__name__)
        self.handle: Any = None
        self.errors: list[SampleError] = []
        self.completed = 0
        self._outstanding = 0
        self._idle = threading.Condition()

    def request(self, query_id: int, index: int) -> GenRequest:
        return GenRequest(id=query_id, prompt_ids=self.qsl.prompt(index), max_tokens=self.max_tokens)

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
            return self._idle.wait_for(lambda: self._outstanding == 0, timeout)

    def _issued(self, count: int) -> None:
        with self._idle:
            self._outstanding += count

    def _finished(self, count: int) -> None:
        with self._idle:
            self._outstanding -= count
            self.completed += count
            if self._outstanding <= 0:
                self._idle.notify_all()

    def _complete(self, query_id: int, token_ids: Sequence[int]) -> None:
        tokens = int32_tokens(token_ids)
        response = self.lg.QuerySampleResponse(query_id, _address(tokens), tokens.nbytes, len(tokens))
        self.lg.QuerySamplesComplete([response])
        self.clock.completed(query_id, len(tokens))
        self._finished(1)

    def _fail(self, query_id: int, error: BaseException | str) -> None:
        """Complete the sample empty (LoadGen must not wait for it) and record why."""
        self.log.error("sample %#x failed: %s", query_id, error)
        self.errors.append(SampleError(query_id, str(error)))
        self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(query_id, 0, 0, 0)])
        self.clock.failed(query_id)
        self._finished(1)


class OfflineSUT(_BaseSUT):
    """Offline: the whole query goes to `Backend.generate` at once, on a worker thread."""

    def __init__(self, lg: Any, backend: Backend, qsl: QSL, max_tokens: int,
                 logger: logging.Logger | None = None, clock: SampleClock | None = None) -> None:
        super().__init__(lg, backend, qsl, max_tokens, logger, clock)
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
        self._issued(len(batch))
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
        try:
            requests = [self.request(query_id, index) for query_id, index in batch]
            self.log.info("Offline: %d samples to the backend", len(requests))
            for result in self.backend.generate(requests):
                self._answer(result, pending)
        except Exception as exc:  # noqa: BLE001 - LoadGen must hear of every sample, whatever failed
            for query_id in sorted(pending):
                self._fail(query_id, exc)
            return
        for query_id in sorted(pending):
            self._fail(query_id, "the backend returned no result for it")

    def _answer(self, result: GenResult, pending: set[int]) -> None:
        if result.id not in pending:
            self.log.error("the backend returned an unknown or repeated id %#x", result.id)
            return
        pending.discard(result.id)
        self._complete(result.id, result.token_ids)


class ServerSUT(_BaseSUT):
    """Server and Interactive: each sample to `Backend.submit` at once; this object is the sink."""

    def start(self) -> None:
        """Nothing to start: the streaming backend owns the thread the callbacks run on."""

    def stop(self) -> None:
        """Nothing to stop (the backend is stopped by its owner)."""

    def issue_queries(self, samples: Sequence[Any]) -> None:
        self.clock.issued(s.id for s in samples)
        self._issued(len(samples))
        for s in samples:
            try:
                self.backend.submit(self.request(s.id, s.index), self)
            except Exception as exc:  # noqa: BLE001 - a sample LoadGen issued must be completed
                self._fail(s.id, exc)

    def on_first_token(self, request_id: int, token_id: int) -> None:
        self.clock.first_token(request_id)
        first = int32_tokens([token_id])
        self.lg.FirstTokenComplete([self.lg.QuerySampleResponse(request_id, _address(first), first.nbytes, 1)])

    def on_done(self, result: GenResult) -> None:
        self._complete(result.id, result.token_ids)

    def on_error(self, request_id: int, error: BaseException) -> None:
        self._fail(request_id, error)


def make_sut(scenario: str, lg: Any, backend: Backend, qsl: QSL, max_tokens: int,
             logger: logging.Logger | None = None, clock: SampleClock | None = None) -> OfflineSUT | ServerSUT:
    """The SUT for a benchmark scenario (Offline; Server and Interactive stream)."""
    if scenario == "Offline":
        return OfflineSUT(lg, backend, qsl, max_tokens, logger, clock)
    if scenario in ("Server", "Interactive"):
        return ServerSUT(lg, backend, qsl, max_tokens, logger, clock)
    raise SutError(f"unknown scenario {scenario!r}", hint="Offline, Server or Interactive")
