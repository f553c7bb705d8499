"""The endpoint backend's worker processes: HTTP and parsing off the LoadGen process, so one client can drive a rack.

One Python process that parses every streamed token tops out at tens of thousands of tokens a second
(bench/endpoint_ceiling.py); a rack serves millions. With `EndpointConfig.workers` N > 0, the endpoint
backend starts N worker processes (`WorkerPool`) after its own start-up (probe and warm-up, which settle
the model and where token ids come from). Each worker runs its own asyncio loop with one aiohttp
session, and posts through the same client as the in-process path (`endpoint_client.EndpointClient.post`), so
request bodies, parsing, checks, messages and the dead-server probe are the same code.

What crosses the process boundary, over one socket pair per worker (multiprocessing's framing: a
4-byte length, then a pickle), is small and batched:

- to a worker: lists of `Job` (a request's key, id, prompt ids, lengths, and whether to stream) and
  `Cancel` (keys whose samples are no longer wanted); None asks it to stop;
- from a worker: lists of `Event`, at most one write per turn of its event loop: a streamed request's
  first token (`FIRST`, for LoadGen's TTFT) and each request's end (`DONE` with its GenResult, or
  `FAILED` with the BackendError the in-process path would raise). Nothing per token.

The LoadGen process keeps issue and complete: `submit()` sends one Job to the next worker in turn (a
few microseconds on LoadGen's issue thread); one receiver thread reads every worker's events and calls
the sinks (the thread the base contract says sinks run on). Offline keeps `max_concurrency` requests in
flight across the workers, longest prompt first: each finished request frees its worker a slot, which
the next prompt fills.

Failures are the in-process path's: never retried; a failed request fails its sample; Offline stops the
batch at the first failure and cancels the rest; a worker that finds the server gone fails its requests
with BackendDead, so the SUT stops the test. A worker that dies fails its requests in flight with
BackendDead too (the client can no longer answer them). Workers ignore SIGINT (Ctrl-C reaches the whole
process group): the LoadGen process decides when they stop, and `stop()` asks each to stop, then
terminates and at last kills any still there, and joins every one; a worker whose parent died sees its
socket close and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import multiprocessing.connection
import os
import pickle
import queue
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from cmx.mlperf.backends import loop_thread
from cmx.mlperf.backends.base import BackendDead, BackendError, GenRequest, GenResult, StreamSink, request_name
from cmx.mlperf.backends.batching import longest_first, token_list
from cmx.mlperf.backends.endpoint_client import EndpointClient, EndpointConfig, batch_failure
from cmx.mlperf.backends.openai_api import TextTokens
from cmx.mlperf.backends.routes import route_for
from cmx.secrets import Secret

START_TIMEOUT_S = 60.0  # a worker's start: a fresh interpreter importing aiohttp and cmx
STOP_TIMEOUT_S = 5.0  # for each step of stopping: asked, terminated, killed

FIRST, DONE, FAILED, READY = "first", "done", "failed", "ready"


class Job(NamedTuple):
    """One request for a worker: `key` is the pool's own number for it (unique while the pool runs)."""

    key: int
    id: int
    prompt_ids: list[int]
    max_tokens: int
    min_tokens: int
    stream: bool
    sample: int | None = None  # the LoadGen sample index, which messages name (GenRequest.sample)


class Cancel(NamedTuple):
    """Requests whose samples are no longer wanted (a failed Offline batch, a caller that stopped reading)."""

    keys: tuple[int, ...]


class Event(NamedTuple):
    """What a worker reports: FIRST (value: the first token id), DONE (a GenResult), FAILED (a BackendError);
    READY (key -1) once its session is open."""

    kind: str
    key: int
    value: Any


@dataclass(frozen=True)
class WorkerSetup:
    """What a worker needs: the backend's config (without its API key, which follows as a message of its own:
    a Secret is never pickled), the served model, and the tokenizer folder where ids come from re-tokenizing."""

    config: EndpointConfig
    model: str
    tokenizer: Path | None
    index: int


class _Stream(NamedTuple):
    sink: StreamSink
    request_id: int
    sample: int | None = None


@dataclass
class _Batch:
    """One generate() call across the workers (touched under the pool's lock)."""

    total: int
    pending: Iterator[GenRequest]
    sent: int = 0
    done: int = 0
    failed: BackendError | None = None
    ended: bool = False
    in_flight: set[int] = field(default_factory=set)
    results: queue.SimpleQueue[GenResult | None] = field(default_factory=queue.SimpleQueue)  # None: it ended


class _Owner(NamedTuple):
    """Who hears of a key's events, and which worker runs it."""

    of: _Stream | _Batch
    worker: int


# --- in the LoadGen process ----------------------------------------------------------------------------


class WorkerPool:
    """N worker processes doing the endpoint backend's HTTP; see the module docstring. `start()` spawns them
    and waits until each has its session; `stop()` leaves none behind."""

    def __init__(self, setup: WorkerSetup, api_key: str | None, workers: int, logger: logging.Logger) -> None:
        self.setup = setup
        self.workers = workers
        self.log = logger
        self._api_key = api_key
        self._processes: list[subprocess.Popen[bytes]] = []
        self._conns: list[multiprocessing.connection.Connection] = []
        self._send_locks: list[threading.Lock] = []
        self._lock = threading.Lock()  # the owners and the batches' counts
        self._owners: dict[int, _Owner] = {}
        self._keys = itertools.count()
        self._receiver: threading.Thread | None = None
        self._closing = False

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._processes]

    def start(self) -> WorkerPool:
        # a fresh interpreter each (`python -m` this module), not multiprocessing: the LoadGen process has threads
        # (no fork), and spawn would run the user's main module again and leave a resource tracker process behind
        try:
            for i in range(self.workers):
                ours, theirs = socket.socketpair()
                with ours, theirs:
                    process = subprocess.Popen([sys.executable, "-m", __name__, str(theirs.fileno())],
                                               pass_fds=(theirs.fileno(),))
                    conn = multiprocessing.connection.Connection(os.dup(ours.fileno()))
                self._processes.append(process)
                self._conns.append(conn)
                self._send_locks.append(threading.Lock())
                conn.send_bytes(pickle.dumps(replace(self.setup, index=i)))
                conn.send_bytes((self._api_key or "").encode())
            for i, conn in enumerate(self._conns):
                self._await_ready(i, conn)
        except BaseException:
            self.stop()
            raise
        self._receiver = threading.Thread(target=self._receive, name="cmx-endpoint-workers", daemon=True)
        self._receiver.start()
        return self

    def _await_ready(self, i: int, conn: multiprocessing.connection.Connection) -> None:
        if not conn.poll(START_TIMEOUT_S):
            raise BackendError(f"endpoint client worker {i} did not start within {START_TIMEOUT_S:.0f} s",
                               hint="see the log above for its error; or run with client_workers=0 (in-process)")
        try:
            kind, _, value = pickle.loads(conn.recv_bytes())[0]
        except (EOFError, OSError):
            code = self._processes[i].poll()
            raise BackendError(f"endpoint client worker {i} exited while starting (exit code {code})",
                               hint="see the log above for its error; or run with client_workers=0 "
                                    "(in-process)") from None
        if kind != READY:
            raise value

    # -- issue ------------------------------------------------------------------------------------------

    def submit(self, request: GenRequest, sink: StreamSink) -> None:
        """One streaming request to the next worker in turn; returns at once."""
        key = next(self._keys)
        worker = key % self.workers
        with self._lock:
            self._owners[key] = _Owner(_Stream(sink, request.id, request.sample), worker)
        self._send(worker, [job(key, request, stream=True)])

    def generate(self, requests: Sequence[GenRequest], max_concurrency: int) -> Iterator[GenResult]:
        """Every request's result as it finishes, `max_concurrency` in flight across the workers, longest prompt
        first; the first failure stops the batch with a BackendError that counts the samples, as in-process."""
        batch = _Batch(total=len(requests), pending=iter(longest_first(requests)))
        slots = min(max_concurrency, len(requests))
        with self._lock:
            jobs = self._take(batch, Counter({w: slots // self.workers + (w < slots % self.workers)
                                              for w in range(self.workers)}))
        self._send_jobs(jobs)
        return self._results(batch)

    def _results(self, batch: _Batch) -> Iterator[GenResult]:
        try:
            while (item := batch.results.get()) is not None:
                yield item
        finally:
            self._end(batch)  # the caller stopped reading: cancel what is still in flight
        if batch.failed is not None:
            raise batch_failure(batch.failed, done=batch.done, sent=batch.sent, total=batch.total)

    def _take(self, batch: _Batch, slots: Counter[int]) -> dict[int, list[Job]]:
        """The batch's next requests for each worker's free `slots` (under the lock)."""
        jobs: dict[int, list[Job]] = {}
        for worker, free in slots.items():
            for request in itertools.islice(batch.pending, free):
                key = next(self._keys)
                self._owners[key] = _Owner(batch, worker)
                batch.in_flight.add(key)
                batch.sent += 1
                jobs.setdefault(worker, []).append(job(key, request, stream=False))
        return jobs

    def _end(self, batch: _Batch) -> None:
        """The batch takes no more results: cancel its requests in flight."""
        with self._lock:
            if batch.ended:
                return
            batch.ended = True
            cancelled: dict[int, list[int]] = {}
            for key in batch.in_flight:
                owner = self._owners.pop(key, None)
                if owner is not None:
                    cancelled.setdefault(owner.worker, []).append(key)
            batch.in_flight.clear()
        batch.results.put(None)
        if not self._closing:
            for worker, keys in cancelled.items():
                self._send(worker, [Cancel(tuple(keys))])

    def _send_jobs(self, jobs: dict[int, list[Job]]) -> None:
        for worker, batch in jobs.items():
            self._send(worker, batch)

    def _send(self, worker: int, message: list[Job] | list[Cancel] | None) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            with self._send_locks[worker]:
                self._conns[worker].send_bytes(data)
        except OSError as exc:  # the worker is gone: the receiver thread fails its requests
            if not self._closing:
                self.log.error("endpoint client worker %d cannot take requests: %s", worker, exc)

    # -- complete -----------------------------------------------------------------------------------------

    def _receive(self) -> None:
        """The receiver thread: every worker's events to their sinks and batches, until every worker is gone."""
        alive = {conn: i for i, conn in enumerate(self._conns)}
        while alive:
            for conn in multiprocessing.connection.wait(list(alive)):
                assert isinstance(conn, multiprocessing.connection.Connection)
                worker = alive[conn]
                try:
                    events = pickle.loads(conn.recv_bytes())
                except (EOFError, OSError):
                    del alive[conn]
                    if not self._closing:
                        self._worker_lost(worker)
                    continue
                self._dispatch(worker, events)

    def _dispatch(self, worker: int, events: list[Event]) -> None:
        """`events` from `worker` to their sinks and batches; each finished Offline request frees its worker a slot,
        which the batch's next prompt fills. The sinks are called outside the lock."""
        calls: list[tuple[_Stream, str, Any]] = []
        failed: list[_Batch] = []
        freed: dict[int, tuple[_Batch, Counter[int]]] = {}
        with self._lock:
            for kind, key, value in events:
                owner = self._owners.get(key) if kind == FIRST else self._owners.pop(key, None)
                if owner is None:
                    continue  # cancelled
                of = owner.of
                if isinstance(of, _Stream):
                    calls.append((of, kind, value))
                    continue
                of.in_flight.discard(key)
                if kind == FAILED:
                    of.failed = of.failed or value
                    failed.append(of)
                    continue
                of.done += 1
                of.results.put(value)
                freed.setdefault(id(of), (of, Counter()))[1][worker] += 1
                if of.done == of.total:
                    of.ended = True
                    of.results.put(None)
            jobs: dict[int, list[Job]] = {}
            for batch, slots in freed.values():
                if batch.failed is None and not batch.ended:
                    for w, more in self._take(batch, slots).items():
                        jobs.setdefault(w, []).extend(more)
        self._send_jobs(jobs)
        for batch in failed:
            self._end(batch)
        for stream, kind, value in calls:
            self._call(stream, kind, value)

    def _call(self, stream: _Stream, kind: str, value: Any) -> None:
        try:
            if kind == FIRST:
                stream.sink.on_first_token(stream.request_id, value)
            elif kind == DONE:
                stream.sink.on_done(value)
            else:
                self.log.error("%s", value.message)
                stream.sink.on_error(stream.request_id, value)
        except Exception:  # a sink's own failure must not end the thread that serves every sample
            self.log.exception("the sink of %s failed on its %s event", request_name(stream.request_id, stream.sample),
                               kind)

    def _worker_lost(self, worker: int) -> None:
        """A worker ended on its own: every request it had fails (it can no longer be answered)."""
        process = self._processes[worker]
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(STOP_TIMEOUT_S)
        error = BackendDead(f"endpoint client worker {worker} (pid {process.pid}) exited with code "
                            f"{process.returncode} while the test ran",
                            hint="see the log above for why; or run with client_workers=0 (in-process)")
        with self._lock:
            keys = [key for key, owner in self._owners.items() if owner.worker == worker]
        self._dispatch(worker, [Event(FAILED, key, error) for key in keys])

    # -- stop ---------------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask every worker to stop, terminate any left, then kill; join them all and the receiver thread (which
        ends when the last worker's socket closes). A generate() still being read ends; no sink hears more."""
        self._closing = True
        for worker in range(len(self._conns)):
            self._send(worker, None)
        for process in self._processes:
            for end in (None, process.terminate, process.kill):
                if end is not None and process.poll() is None:
                    end()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(STOP_TIMEOUT_S)
        if self._receiver is not None and self._receiver is not threading.current_thread():
            self._receiver.join(STOP_TIMEOUT_S)
        for conn in self._conns:
            conn.close()
        with self._lock:
            batches = {id(o.of): o.of for o in self._owners.values() if isinstance(o.of, _Batch)}
            self._owners.clear()
        for batch in batches.values():
            batch.failed = batch.failed or BackendError("the endpoint backend stopped while the batch ran")
            batch.results.put(None)
        self._processes, self._conns = [], []


def job(key: int, request: GenRequest, *, stream: bool) -> Job:
    return Job(key, request.id, token_list(request.prompt_ids), request.max_tokens, request.min_tokens, stream,
               request.sample)


# --- in a worker process ---------------------------------------------------------------------------------


def worker_main(fd: int) -> None:
    """A worker process: its setup and API key from the socket `fd`, then jobs until it is asked to stop or the
    socket closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the process group: the LoadGen process decides
    conn = multiprocessing.connection.Connection(os.dup(fd))
    setup: WorkerSetup = pickle.loads(conn.recv_bytes())
    key = conn.recv_bytes().decode()
    conn.close()
    loop_thread.run(_Worker(setup, key).serve(socket.socket(fileno=fd)), setup.config.event_loop)


class _FirstToken:
    """The sink a worker's stream reports its first token to; the end goes back as the request's result."""

    def __init__(self, worker: _Worker, key: int) -> None:
        self.worker, self.key = worker, key

    def on_first_token(self, request_id: int, token_id: int) -> None:
        self.worker.emit(Event(FIRST, self.key, token_id))

    def on_done(self, result: GenResult) -> None:
        pass

    def on_error(self, request_id: int, error: BaseException) -> None:
        pass


class _Worker:
    def __init__(self, setup: WorkerSetup, api_key: str) -> None:
        self.setup = setup
        self.log = logging.getLogger(f"{__name__}.{setup.index}")
        config = replace(setup.config, api_key=Secret(api_key) if api_key else None)
        self.client = EndpointClient(config, self.log)
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.out: list[Event] = []
        self.writer: asyncio.StreamWriter | None = None

    async def serve(self, sock: socket.socket) -> None:
        reader, self.writer = await asyncio.open_connection(sock=sock)
        try:
            # what the started backend found: the model, and the tokenizer where ids are re-tokenized
            self.client.model = self.setup.model
            self.client.tokens = TextTokens(self.setup.tokenizer) if self.setup.tokenizer is not None else None
            await self.client.open()
        except BackendError as exc:
            self.emit(Event(FAILED, -1, exc))
        else:
            self.emit(Event(READY, -1, None))
            try:
                while (message := await read_message(reader)) is not None:
                    for item in message:
                        if isinstance(item, Cancel):
                            for key in item.keys:
                                if (task := self.tasks.get(key)) is not None:
                                    task.cancel()
                        else:
                            self.tasks[item.key] = asyncio.create_task(self.run(item))
            except (asyncio.IncompleteReadError, ConnectionError):
                pass  # the LoadGen process is gone
            for task in self.tasks.values():
                task.cancel()
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)
            await self.client.close()
        self.flush()
        await self.writer.drain()
        self.writer.close()

    async def run(self, item: Job) -> None:
        request = GenRequest(id=item.id, prompt_ids=item.prompt_ids, max_tokens=item.max_tokens,
                             min_tokens=item.min_tokens, sample=item.sample)
        try:
            result = await self.client.post(route_for(request, streamed=item.stream), request,
                                            _FirstToken(self, item.key) if item.stream else None)
        except BackendError as exc:
            self.emit(Event(FAILED, item.key, exc))
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the sample, which must hear of it
            what = f"{'streaming ' if item.stream else ''}{request.name}"
            self.emit(Event(FAILED, item.key, BackendError(f"{what} failed: {type(exc).__name__}: {exc}")))
        else:
            self.emit(Event(DONE, item.key, result))
        finally:
            self.tasks.pop(item.key, None)

    def emit(self, event: Event) -> None:
        """Queue `event`; everything queued in one turn of the loop goes in one message."""
        if not self.out:
            asyncio.get_running_loop().call_soon(self.flush)
        self.out.append(event)

    def flush(self) -> None:
        if self.out and self.writer is not None and not self.writer.is_closing():
            data = pickle.dumps(self.out, protocol=pickle.HIGHEST_PROTOCOL)
            self.writer.write(struct.pack("!i", len(data)) + data)
        self.out = []


async def read_message(reader: asyncio.StreamReader) -> Any:
    """One message in multiprocessing's framing (what Connection.send_bytes wrote), unpickled."""
    (size,) = struct.unpack("!i", await reader.readexactly(4))
    if size == -1:
        (size,) = struct.unpack("!Q", await reader.readexactly(8))
    return pickle.loads(await reader.readexactly(size))


if __name__ == "__main__":  # the module by its own name, so that what it pickles names it, not __main__
    from cmx.mlperf.backends import endpoint_workers

    endpoint_workers.worker_main(int(sys.argv[1]))
