"""One point of a curve on a started backend: a closed loop at fixed concurrency, or the Offline point.

Fixed concurrency (the rules' `concurrency` load pattern): `concurrency` streaming requests are issued
at once, and each one that ends issues the next, so that exactly that many are in flight until the
point stops issuing. It stops once it has run `seconds` and issued a whole number of dataset passes
(the rules: at least one pass, a multiple of the dataset size; a smoke test stops at `seconds`).
Performance samples are drawn with replacement from a seeded generator; an accuracy run issues every
row once, in order. Each request's issue, first streamed token and end are taken on the caller's
clock; its output tokens are the token ids the endpoint streams back (vLLM's return_token_ids;
otherwise re-tokenized client-side by the endpoint backend with the model's tokenizer).

The Offline point issues whole passes at once (the backend's own batching; non-streaming) and times
each answer as it arrives.

A backend that dies fails the point (PointFailed); a request that fails is recorded with its error and
the loop issues the next one, so a point's figures say how many failed. Once a whole round of requests
(`concurrency` of them) has failed with none answered, the point issues no more: a server that fails everything
would otherwise get thousands of requests a second for the point's whole length.

A server that has sent no token for `first_token_s` (default FIRST_TOKEN_S) while a request waits for its first
one fails the point too: one that accepted the requests (sent its headers) and then stalls would otherwise hold
the point until each request's own timeout (the endpoint's 600 s). The clock restarts at every first token or
answer the point gets, so a loaded server whose queue keeps moving is not stalled, however long its last
requests wait.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from cmx.errors import CmxError
from cmx.mlperf.backends.base import Backend, BackendDead, GenRequest, GenResult
from cmx.mlperf.pareto.metrics import RequestRecord

Clock = Callable[[], float]
FIRST_TOKEN_S = 120.0   # no token for this long while a request waits for its first: the server has stalled


class PointFailed(CmxError):
    """A point could not run to its end: the backend died, or the loop waited too long for an answer."""


@dataclass(frozen=True)
class PointRun:
    concurrency: int
    seconds: float                 # issue new requests until then (and a whole number of passes)
    rows: int                      # the dataset's size: a pass
    accuracy: bool = False         # every row once, in order, one pass
    whole_passes: bool = True      # stop only after a whole number of passes (the rules; not in a smoke test)
    seed: int = 0
    stall_s: float = 600.0         # no answer for this long: the backend is stuck
    first_token_s: float = FIRST_TOKEN_S  # no first token nor answer for this long while a request waits for one


class PointProgress(NamedTuple):
    """What a running point has done so far, for a progress line (every second at most)."""

    issued: int
    answered: int
    failed: int
    waiting_s: float    # how long the point has waited for a first token (0: none waits, or tokens keep coming)


@dataclass(frozen=True)
class Answer:
    record: RequestRecord
    result: GenResult | None


class _Loop:
    """The closed loop's state, shared by the issuing thread and the backend's callbacks."""

    def __init__(self, backend: Backend, run: PointRun, build: Callable[[int, int], GenRequest], clock: Clock) -> None:
        self.backend, self.run, self.build, self.clock = backend, run, build, clock
        self.rng = random.Random(run.seed)
        self.cond = threading.Condition()
        self.issued = 0
        self.in_flight: dict[int, tuple[int, float, float | None]] = {}   # request id -> (row, issued, first)
        self.answers: list[Answer] = []
        self.dead: BaseException | None = None
        self.start = clock()
        self.last_event = self.start
        self.last_token = self.start      # the last first token or answer (an error is no sign of a working server)
        self.failed = 0
        self.succeeded = 0

    def next_row(self) -> int | None:
        run, n = self.run, self.issued
        if self.succeeded == 0 and self.failed >= run.concurrency:  # a whole round failed: the server answers none
            return None
        if run.accuracy:
            return n if n < run.rows else None
        elapsed = self.clock() - self.start
        passes_done = not run.whole_passes or (n >= run.rows and n % run.rows == 0)
        if passes_done and elapsed >= run.seconds:
            return None
        return self.rng.randrange(run.rows)

    def issue(self) -> bool:
        """Issue one more request, if the point still issues; called with the lock held."""
        if self.dead is not None:
            return False
        row = self.next_row()
        if row is None:
            return False
        request_id = self.issued
        self.issued += 1
        self.in_flight[request_id] = (row, self.clock() - self.start, None)
        self.cond.release()
        try:
            self.backend.submit(self.build(request_id, row), self)
        except BackendDead:
            raise
        except Exception as exc:  # noqa: BLE001 - a request that cannot be sent fails alone, as one that fails later
            self._end(request_id, None, exc)  # the lock is released here, as on the backend's thread
        finally:
            self.cond.acquire()
        return True

    # --- StreamSink, on the backend's thread ---------------------------------------------------------
    def on_first_token(self, request_id: int, token_id: int) -> None:
        with self.cond:
            row, issued, _ = self.in_flight.get(request_id, (0, 0.0, None))
            if request_id in self.in_flight:
                self.in_flight[request_id] = (row, issued, self.clock() - self.start)
                self.last_token = self.clock()

    def on_done(self, result: GenResult) -> None:
        self._end(result.id, result, None)

    def on_error(self, request_id: int, error: BaseException) -> None:
        self._end(request_id, None, error)

    def _end(self, request_id: int, result: GenResult | None, error: BaseException | None) -> None:
        with self.cond:
            row, issued, first = self.in_flight.pop(request_id, (0, 0.0, None))
            now = self.clock() - self.start
            self.last_event = self.clock()
            if error is None:
                self.last_token = self.last_event
                self.succeeded += 1
            else:
                self.failed += 1
            self.answers.append(Answer(RequestRecord(
                index=row, issued=issued, first_token=first, done=now if error is None else None,
                output_tokens=result.n_tokens if result is not None else 0,
                error=None if error is None else str(error)), result))
            if isinstance(error, BackendDead):
                self.dead = error
            self.cond.notify_all()

    def waiting_s(self) -> float:
        """How long the point has waited for a first token: since the later of the last token and the issue of the
        oldest request still without one; 0 when none waits. Called with the lock held."""
        issued = [self.start + at for _, at, first in self.in_flight.values() if first is None]
        if not issued:
            return 0.0
        return max(0.0, self.clock() - max(min(issued), self.last_token))


def run_point(backend: Backend, run: PointRun, build: Callable[[int, int], GenRequest], *,
              clock: Clock = time.monotonic,
              on_progress: Callable[[PointProgress], None] | None = None) -> list[Answer]:
    """The fixed-concurrency loop; every request's record (and result), in the order they ended."""
    loop = _Loop(backend, run, build, clock)
    tick = min(1.0, run.first_token_s / 4)
    with loop.cond:
        for _ in range(run.concurrency):
            if not loop.issue():
                break
        while loop.in_flight:
            loop.cond.wait(timeout=tick)
            if loop.dead is not None:
                raise PointFailed(f"the server died during the point at concurrency {run.concurrency}: {loop.dead}",
                                  hint="see the server's log; the curve stops at the first point that cannot run")
            while len(loop.in_flight) < run.concurrency and loop.issue():  # each answer frees a slot
                pass
            waiting = loop.waiting_s()
            if on_progress is not None:
                on_progress(PointProgress(loop.issued, len(loop.answers), loop.failed, waiting))
            if waiting > run.first_token_s:
                waited = sum(1 for _, _, first in loop.in_flight.values() if first is None)
                raise PointFailed(f"the server sent no token for {waiting:.0f} s at concurrency {run.concurrency}: "
                                  f"{waited} requests wait for their first token (the first-token deadline is "
                                  f"{run.first_token_s:g} s)",
                                  hint="the server accepts requests and then stalls: see its log; for a server that "
                                       "is only slow to answer, give --first-token-timeout SECONDS")
            if clock() - loop.last_event > run.stall_s:
                raise PointFailed(f"no answer for {run.stall_s:.0f} s at concurrency {run.concurrency} with "
                                  f"{len(loop.in_flight)} requests in flight", hint="the server is stuck: see its log")
    return loop.answers


def run_offline(backend: Backend, rows: int, seconds: float, build: Callable[[int, int], GenRequest], *,
                clock: Clock = time.monotonic) -> list[Answer]:
    """The Offline point: whole passes over the dataset, each handed to the backend at once, until `seconds` have
    passed (one pass at least)."""
    answers: list[Answer] = []
    start = clock()
    p = 0
    while p == 0 or clock() - start < seconds:
        requests = [build(p * rows + row, row) for row in range(rows)]
        p += 1
        issued = clock() - start
        for result in backend.generate(requests):
            answers.append(Answer(RequestRecord(index=result.id % rows, issued=issued, first_token=None,
                                                done=clock() - start, output_tokens=result.n_tokens), result))
    return answers


def request_builder(source: Any, max_tokens: int) -> Callable[[int, int], GenRequest]:
    """GenRequests from a benchmark's prompt source (token ids per row; a chat benchmark's conversations), at
    most `max_tokens` out (and the least a request may ask: GenRequest's min_tokens)."""
    chat = getattr(source, "chat", None)

    def build(request_id: int, row: int) -> GenRequest:
        if chat is not None:
            return GenRequest(id=request_id, prompt_ids=[], chat=chat(row))
        return GenRequest(id=request_id, prompt_ids=list(source.prompt_ids(row)), max_tokens=max_tokens)
    return build

