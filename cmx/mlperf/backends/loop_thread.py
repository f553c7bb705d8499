"""An asyncio event loop on a daemon thread a backend owns: coroutines in from any thread, one shutdown order out.

The streaming backends (vLLM's AsyncLLM, the HTTP endpoint, the Ray replicas' driver) each run
their requests on one event loop in a thread of their own, so that `submit()` on LoadGen's issue
thread only hands work over (see base.py). `LoopThread` is that loop:

- `start()` makes a new event loop and runs it on a daemon thread (nothing starts in the
  constructor). `submit(coro)` schedules a coroutine from any thread and returns a
  `concurrent.futures.Future` of its result; `call(coro, timeout)` waits for it; `spawn(coro)`
  starts it and forgets it (a streaming request whose sink hears of the outcome). Every one of
  them runs as a task the loop thread keeps, so that closing can cancel it.
- An exception is never lost: a submitted coroutine's goes to its future (`call` raises it); a
  spawned one's, having no one to go to, is logged and kept as `first_error`.
- `on_close(hook)` registers what to end while the loop still runs (an aiohttp session's
  `close`, an engine's `shutdown`): a callable run on the loop's thread, awaited if it returns
  an awaitable.

`close()` ends it in this order, each wait bounded:

1. stop accepting: `submit`, `call` and `spawn` raise LoopClosedError from here on;
2. cancel every task it started (requests in flight; no sink hears of them);
3. wait up to `cancel_timeout_s` for them to finish cancelling;
4. run the close hooks, the last registered first (as an ExitStack), within `close_timeout_s`
   together; a failing hook does not stop the others, and the first failure is raised at the end;
5. cancel and wait for what else runs on the loop (tasks a library started on it, such as an
   engine's output handler), and close its async generators;
6. stop the loop and join the thread (up to `join_timeout_s`);
7. close the loop.

Which event loop: `loop_factory` makes it (asyncio's own by default); `event_loop_factory(kind)` gives uvloop's,
the stdlib's, or ("auto") uvloop's on Linux where it is installed. uvloop (which vLLM installs) runs the same
asyncio code with its loop, transports and timers in C: issue #42 measured about a fifth less CPU for MLCommons'
client, whose HTTP is a raw asyncio.Protocol as the endpoint's hot path now is. `run(coro, kind)` is asyncio.run
on such a loop, for a process's main coroutine (the endpoint's worker processes).

A second `close()` returns once the first has finished. `close()` (or `call()`) on the loop's own
thread is refused with a LoopThreadError: it would wait for itself; end the loop from the thread
that owns it. A hook or task that blocks the thread past these times leaves it alive: then
`close()` raises a LoopThreadError that says so, and the thread closes its loop itself when it ends.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from cmx.mlperf.backends.base import BackendError

T = TypeVar("T")

CloseHook = Callable[[], "Awaitable[Any] | None"]

_NEW, _RUNNING, _CLOSING, _CLOSED = "new", "running", "closing", "closed"
EVENT_LOOPS = ("auto", "uvloop", "asyncio")


def event_loop_factory(kind: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """What makes a loop of `kind` (EVENT_LOOPS): "uvloop" (a BackendError where it is not installed), "asyncio",
    or "auto", uvloop's on Linux where it imports and asyncio's elsewhere."""
    if kind not in EVENT_LOOPS:
        raise BackendError(f"unknown event loop {kind!r}", hint=" or ".join(EVENT_LOOPS))
    if kind == "asyncio" or (kind == "auto" and not sys.platform.startswith("linux")):
        return asyncio.new_event_loop
    try:
        import uvloop
    except ImportError:
        if kind == "auto":
            return asyncio.new_event_loop
        raise BackendError("the uvloop event loop was asked for, and uvloop is not installed",
                           hint="pip install uvloop (vLLM installs it), or ask for the asyncio or auto loop") from None
    return uvloop.new_event_loop


def run(coro: Coroutine[Any, Any, T], kind: str) -> T:
    """asyncio.run(`coro`) on a loop of `kind` (see event_loop_factory)."""
    loop = event_loop_factory(kind)()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coro)
    finally:
        try:
            _cancel_all(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left on `loop` and wait for it, as asyncio.run does before closing its loop."""
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


class LoopThreadError(BackendError):
    """The loop thread was used where it cannot work (on its own thread) or did not stop in time."""


class LoopClosedError(LoopThreadError):
    """Work was handed to a loop thread that is not running (not started, closing or closed)."""


class LoopThread:
    """An event loop on a daemon thread; see the module docstring for its use and its shutdown order."""

    def __init__(self, name: str, logger: logging.Logger | None = None, *, cancel_timeout_s: float = 10.0,
                 close_timeout_s: float = 60.0, join_timeout_s: float = 10.0,
                 loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop) -> None:
        self.name = name
        self.loop_factory = loop_factory
        self.log = logger or logging.getLogger(__name__)
        self.cancel_timeout_s = cancel_timeout_s
        self.close_timeout_s = close_timeout_s
        self.join_timeout_s = join_timeout_s
        self.first_error: BaseException | None = None  # the first spawned task's failure
        self._state = _NEW
        self._lock = threading.Lock()  # orders hand-overs against close()'s first step
        self._closed = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[Any]] = set()  # touched on the loop only; asyncio keeps weak references
        self._hooks: list[CloseHook] = []
        self._loop_ended = False  # run_forever has returned (set on the loop's thread)
        self._abandoned = False  # close() stopped waiting for the thread; it closes its loop itself

    def __enter__(self) -> LoopThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return self._state == _RUNNING

    def in_loop_thread(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread

    def start(self) -> None:
        with self._lock:
            if self._state != _NEW:
                raise LoopThreadError(f"the {self.name} loop thread was started already (it is {self._state})",
                                      hint="make a new LoopThread for each start")
            self._loop = self.loop_factory()
            self._thread = threading.Thread(target=self._run, args=(self._loop,), name=self.name, daemon=True)
            self._thread.start()
            self._state = _RUNNING

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            loop.run_forever()
        finally:
            with self._lock:
                self._loop_ended = True
                if self._abandoned:  # close() gave up waiting for this thread: end the loop here
                    loop.close()

    # --- handing work over -------------------------------------------------------------------------------------

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the loop; its result or exception comes back on the future. Cancelling the
        future cancels the task; closing the loop cancels the future."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._hand_over(coro, future)
        return future

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """`coro`'s result, waited for here (not on the loop's thread: it would wait for itself). Past
        `timeout` the task is cancelled and TimeoutError raised; a close meanwhile raises LoopClosedError."""
        if self.in_loop_thread():
            coro.close()
            raise LoopThreadError(f"call() on the {self.name} loop's own thread would wait for itself",
                                  hint="await the coroutine there instead")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise
        except concurrent.futures.CancelledError:
            if self._state != _RUNNING:
                raise LoopClosedError(f"the {self.name} loop thread was closed while a call waited",
                                      hint="stop() ends the work in flight; start again to go on") from None
            raise

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run `coro` on the loop and return at once; a failure is logged and kept as `first_error`."""
        self._hand_over(coro, None)

    def _hand_over(self, coro: Coroutine[Any, Any, Any], future: concurrent.futures.Future[Any] | None) -> None:
        with self._lock:  # so that no hand-over slips in after close() has begun cancelling
            if self._state != _RUNNING:
                coro.close()  # never to run: close it now rather than have it warn "never awaited"
                raise LoopClosedError(f"the {self.name} loop thread is {self._state}: it takes no more work",
                                      hint="start() the backend first" if self._state == _NEW
                                      else "the backend was stopped; start a new one")
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._start_task, coro, future)

    def _start_task(self, coro: Coroutine[Any, Any, Any], future: concurrent.futures.Future[Any] | None) -> None:
        """On the loop: the task for `coro`, kept until it ends, and tied to its future both ways."""
        if future is not None and future.cancelled():
            coro.close()
            return
        assert self._loop is not None
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._task_done(t, future))
        if future is not None:
            future.add_done_callback(lambda f: self._cancel_from_outside(f, task))

    def _cancel_from_outside(self, future: concurrent.futures.Future[Any], task: asyncio.Task[Any]) -> None:
        if future.cancelled() and self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed between the check and the call: the task is over
                self._loop.call_soon_threadsafe(task.cancel)

    def _task_done(self, task: asyncio.Task[Any], future: concurrent.futures.Future[Any] | None) -> None:
        self._tasks.discard(task)
        if future is not None:
            # the future stays pending until here (as run_coroutine_threadsafe's does), so that a
            # cancel from the caller's side can still reach the task
            if task.cancelled():
                future.cancel()
            elif future.set_running_or_notify_cancel():
                if (error := task.exception()) is not None:
                    future.set_exception(error)
                else:
                    future.set_result(task.result())
        elif not task.cancelled() and (error := task.exception()) is not None:
            if self.first_error is None:
                self.first_error = error
            self.log.error("a task on the %s loop failed: %s: %s", self.name, type(error).__name__, error,
                           exc_info=error)

    # --- shutting down -----------------------------------------------------------------------------------------

    def on_close(self, hook: CloseHook) -> None:
        """Run `hook` on the loop's thread when closing, after the tasks are cancelled (step 4)."""
        self._hooks.append(hook)

    def close(self) -> None:
        """End the loop in the module docstring's order. Idempotent; refused on the loop's own thread."""
        if self.in_loop_thread():
            raise LoopThreadError(f"close() on the {self.name} loop's own thread would wait for itself",
                                  hint="close the loop thread from the thread that started it")
        with self._lock:  # step 1: from here on, nothing new is handed over
            state, loop, thread = self._state, self._loop, self._thread
            if state == _RUNNING:
                self._state = _CLOSING
            elif state == _NEW:
                self._state = _CLOSED
                self._closed.set()
        if state == _CLOSING:  # another thread is closing it: return once that is done
            self._closed.wait()
        if state != _RUNNING:
            return
        assert loop is not None and thread is not None
        hook_error: BaseException | None = None
        try:
            hook_error = self._finish_on_loop(loop)
            loop.call_soon_threadsafe(loop.stop)  # step 6
            thread.join(self.join_timeout_s)
            with self._lock:
                if not self._loop_ended:
                    self._abandoned = True
                    raise LoopThreadError(f"the {self.name} loop thread did not stop within {self.join_timeout_s:g} s "
                                          "of being told to; its loop closes when it does",
                                          hint="a task or a close hook blocks the loop's thread")
            thread.join()  # only the thread's last lines are left
            loop.close()  # step 7
        finally:
            self._state = _CLOSED
            self._closed.set()
        if hook_error is not None:
            raise hook_error

    def _finish_on_loop(self, loop: asyncio.AbstractEventLoop) -> BaseException | None:
        """Steps 2 to 5 on the loop; the first close hook's failure, if any."""
        waited = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        try:
            return waited.result(self.cancel_timeout_s + self.close_timeout_s + self.join_timeout_s)
        except concurrent.futures.TimeoutError:
            self.log.warning("the %s loop did not finish closing in time; stopping it anyway", self.name)
            return None

    async def _shutdown(self) -> BaseException | None:
        await self._cancel_and_wait(set(self._tasks), "task")  # steps 2 and 3
        first: BaseException | None = None
        hooks, self._hooks = self._hooks[::-1], []
        deadline = asyncio.get_running_loop().time() + self.close_timeout_s
        for hook in hooks:  # step 4
            try:
                result = hook()
                if inspect.isawaitable(result):
                    await asyncio.wait_for(result, max(0.0, deadline - asyncio.get_running_loop().time()))
            except Exception as error:  # noqa: BLE001 - every hook runs; the first failure is raised by close()
                self.log.error("closing the %s loop: %s: %s", self.name, type(error).__name__, error)
                if first is None:
                    first = error
        current = asyncio.current_task()
        await self._cancel_and_wait({t for t in asyncio.all_tasks() if t is not current}, "leftover task")  # step 5
        await asyncio.get_running_loop().shutdown_asyncgens()
        return first

    async def _cancel_and_wait(self, tasks: set[asyncio.Task[Any]], what: str) -> None:
        for task in tasks:
            task.cancel()
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=self.cancel_timeout_s)
        if pending:
            self.log.warning("%d %s(s) on the %s loop did not end within %g s of being cancelled",
                             len(pending), what, self.name, self.cancel_timeout_s)
