"""The loop thread the streaming backends share: real threads, a real asyncio loop, no mocks."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Iterator

import pytest

from cmx.mlperf.backends.base import BackendError
from cmx.mlperf.backends.loop_thread import LoopClosedError, LoopThread, LoopThreadError, event_loop_factory, run

NAME = "cmx-test-loop"


def alive() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == NAME]


@pytest.fixture
def lt() -> Iterator[LoopThread]:
    loop_thread = LoopThread(NAME, cancel_timeout_s=2.0, close_timeout_s=2.0, join_timeout_s=2.0)
    loop_thread.start()
    yield loop_thread
    loop_thread.close()
    assert alive() == []


async def forever(events: list[str], label: str, started: threading.Event | None = None) -> None:
    if started is not None:
        started.set()
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        events.append(f"{label} cancelled")
        raise


def test_close_stops_accepting_cancels_tasks_runs_hooks_last_first_then_ends_the_thread(lt: LoopThread):
    events: list[str] = []
    started = threading.Event()

    async def request() -> None:
        asyncio.get_running_loop().create_task(forever(events, "leftover"))  # not the loop thread's own task
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            try:
                lt.spawn(asyncio.sleep(0))
            except LoopClosedError:
                events.append("refused new work")
            events.append("request cancelled")
            raise

    async def close_session() -> None:
        await asyncio.sleep(0)  # the loop still runs while the hooks do
        events.append("async hook")

    lt.on_close(close_session)
    lt.on_close(lambda: events.append("sync hook"))
    lt.spawn(request())
    assert started.wait(5)
    lt.close()
    assert events == ["refused new work", "request cancelled", "sync hook", "async hook", "leftover cancelled"]
    assert alive() == []
    assert not lt.running


def test_close_cancels_work_in_flight_and_its_futures(lt: LoopThread):
    events: list[str] = []
    started = threading.Event()
    future = lt.submit(forever(events, "submitted", started))
    assert started.wait(5)
    began = time.monotonic()
    lt.close()
    assert time.monotonic() - began < 2
    assert future.cancelled()
    assert events == ["submitted cancelled"]


def test_a_call_waiting_when_the_loop_closes_is_told_so(lt: LoopThread):
    started = threading.Event()
    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            lt.call(forever([], "waited", started))
        except BaseException as exc:  # noqa: BLE001 - the test looks at what the waiter got
            outcome.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert started.wait(5)
    lt.close()
    waiter.join(5)
    assert len(outcome) == 1 and isinstance(outcome[0], LoopClosedError)
    assert "closed while a call waited" in str(outcome[0])


def test_close_twice_or_from_two_threads_at_once_ends_it_once(lt: LoopThread):
    calls: list[str] = []
    lt.on_close(lambda: calls.append("hook"))
    lt.spawn(forever([], "request"))
    closers = [threading.Thread(target=lt.close) for _ in range(3)]
    for closer in closers:
        closer.start()
    for closer in closers:
        closer.join(10)
    lt.close()
    assert calls == ["hook"]
    assert alive() == []


def test_a_loop_thread_never_started_closes_and_refuses_work():
    loop_thread = LoopThread(NAME)
    coro = asyncio.sleep(0)
    with pytest.raises(LoopClosedError, match="is new"):
        loop_thread.submit(coro)
    assert coro.cr_frame is None  # closed, so it never warns "was never awaited"
    loop_thread.close()
    loop_thread.close()
    assert alive() == []


def test_exceptions_reach_the_caller_or_are_logged_when_no_one_waits(lt: LoopThread, caplog: pytest.LogCaptureFixture):
    async def fail(message: str) -> None:
        raise ValueError(message)

    with pytest.raises(ValueError, match="called"):
        lt.call(fail("called"))
    assert isinstance(lt.submit(fail("submitted")).exception(5), ValueError)
    assert lt.first_error is None  # those went to their callers
    with caplog.at_level(logging.ERROR, logger="cmx.mlperf.backends.loop_thread"):
        lt.spawn(fail("spawned"))
        lt.call(asyncio.sleep(0.05))  # the spawned task has run by the time this returns
    assert isinstance(lt.first_error, ValueError) and str(lt.first_error) == "spawned"
    assert "a task on the cmx-test-loop loop failed: ValueError: spawned" in caplog.text


def test_results_come_back_and_no_thread_is_left_after_close():
    async def add(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return a + b

    with LoopThread(NAME) as loop_thread:
        assert alive() == [NAME]
        assert loop_thread.call(add(2, 3), timeout=5) == 5
        assert loop_thread.submit(add(1, 1)).result(5) == 2
    assert alive() == []


def test_work_handed_over_after_close_is_refused_with_a_clear_error(lt: LoopThread):
    lt.close()
    coro = asyncio.sleep(0)
    with pytest.raises(LoopClosedError, match="loop thread is closed: it takes no more work") as refused:
        lt.spawn(coro)
    assert refused.value.hint == "the backend was stopped; start a new one"
    assert coro.cr_frame is None
    with pytest.raises(LoopClosedError):
        lt.call(asyncio.sleep(0))
    with pytest.raises(LoopThreadError, match="started already"):
        lt.start()


def test_close_or_call_on_the_loops_own_thread_is_refused_and_the_loop_goes_on(lt: LoopThread):
    async def close_from_inside() -> None:
        lt.close()

    async def call_from_inside() -> None:
        lt.call(asyncio.sleep(0))

    with pytest.raises(LoopThreadError, match="close\\(\\) on the cmx-test-loop loop's own thread"):
        lt.call(close_from_inside(), timeout=5)
    with pytest.raises(LoopThreadError, match="call\\(\\) on the cmx-test-loop loop's own thread"):
        lt.call(call_from_inside(), timeout=5)
    assert lt.running
    assert lt.call(asyncio.sleep(0, result="still running"), timeout=5) == "still running"


def test_a_call_past_its_timeout_cancels_its_task(lt: LoopThread):
    events: list[str] = []
    with pytest.raises(concurrent.futures.TimeoutError):
        lt.call(forever(events, "slow"), timeout=0.1)
    lt.call(asyncio.sleep(0.05))
    assert events == ["slow cancelled"]


def test_cancelling_a_submitted_future_cancels_its_task(lt: LoopThread):
    events: list[str] = []
    started = threading.Event()
    future = lt.submit(forever(events, "submitted", started))
    assert started.wait(5)
    assert future.cancel()
    lt.call(asyncio.sleep(0.05))
    assert events == ["submitted cancelled"]


def test_a_failing_hook_does_not_stop_the_others_and_close_raises_it_after_ending_the_thread(lt: LoopThread):
    events: list[str] = []

    def broken() -> None:
        raise RuntimeError("the engine would not shut down")

    lt.on_close(lambda: events.append("first registered"))
    lt.on_close(broken)
    with pytest.raises(RuntimeError, match="would not shut down"):
        lt.close()
    assert events == ["first registered"]
    assert alive() == []


def test_a_hook_that_blocks_the_thread_past_the_time_allowed_is_reported_and_the_thread_ends_later():
    loop_thread = LoopThread(NAME, cancel_timeout_s=0.1, close_timeout_s=0.1, join_timeout_s=0.1)
    loop_thread.start()
    loop_thread.on_close(lambda: time.sleep(1.0))
    with pytest.raises(LoopThreadError, match=r"did not stop within 0.1 s"):
        loop_thread.close()
    for thread in threading.enumerate():
        if thread.name == NAME:
            thread.join(5)
    assert alive() == []



async def _loop_class() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_a_loop_thread_and_run_take_the_event_loop_asked_for():
    pytest.importorskip("uvloop")
    for kind, module in (("uvloop", "uvloop"), ("auto", "uvloop"), ("asyncio", "asyncio.unix_events")):
        with LoopThread("kinds", loop_factory=event_loop_factory(kind)) as lt:
            assert lt.call(_loop_class(), timeout=5) == module
        assert run(_loop_class(), kind) == module
    with pytest.raises(BackendError, match="unknown event loop 'trio'") as caught:
        event_loop_factory("trio")
    assert caught.value.hint == "auto or uvloop or asyncio"
