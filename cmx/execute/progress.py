"""Progress reporting for a run: a live display on a terminal, plain lines otherwise, or nothing.

The runner calls a Reporter; it never prints itself.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Protocol, cast

from cmx.resolve.plan import Plan, Step

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


class Reporter(Protocol):
    def start(self, plan: Plan, to_run: int) -> None: ...
    def step_started(self, step: Step) -> None: ...
    def step_progress(self, step: Step, completed: int, total: int | None, description: str,
                      detail: str = "") -> None: ...
    def step_cached(self, step: Step) -> None: ...
    def step_done(self, step: Step, seconds: float) -> None: ...
    def step_failed(self, step: Step, seconds: float) -> None: ...
    def finish(self) -> None: ...


class NullReporter:
    def start(self, plan: Plan, to_run: int) -> None: pass
    def step_started(self, step: Step) -> None: pass
    def step_progress(self, step: Step, completed: int, total: int | None, description: str,
                      detail: str = "") -> None: pass
    def step_cached(self, step: Step) -> None: pass
    def step_done(self, step: Step, seconds: float) -> None: pass
    def step_failed(self, step: Step, seconds: float) -> None: pass
    def finish(self) -> None: pass


def _label(step: Step) -> str:
    return " ".join([step.id, *(f"_{v}" for v in step.variations)])


class PlainReporter:
    """One line per event; for logs and pipes."""

    HEARTBEAT_S = 10.0  # a long task with news prints at least this often

    def __init__(self, stream: IO[str] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream or sys.stderr
        self._lock = threading.Lock()
        self._clock = clock
        self._total = 0
        self._done = 0
        self._tenths: dict[tuple[str, str], int] = {}
        self._last: dict[tuple[str, str], float] = {}

    def _say(self, text: str) -> None:
        with self._lock:
            print(text, file=self.stream, flush=True)

    def start(self, plan: Plan, to_run: int) -> None:
        self._total = to_run

    def step_started(self, step: Step) -> None:
        self._say(f"  start  {_label(step)}")

    def step_progress(self, step: Step, completed: int, total: int | None, description: str,
                      detail: str = "") -> None:
        """A line at each tenth of a known total, and one at least every HEARTBEAT_S while a task with a
        detail (rates, latencies) runs; nothing for an unknown total without one."""
        key = (step.id, description)
        now = self._clock()
        tenth = min(10, completed * 10 // total) if total else -1
        new_tenth = tenth > self._tenths.get(key, -1)
        heartbeat = bool(detail) and now - self._last.get(key, now - self.HEARTBEAT_S) >= self.HEARTBEAT_S
        if not (new_tenth or heartbeat):
            return
        self._tenths[key] = max(tenth, self._tenths.get(key, -1))
        self._last[key] = now
        share = f" {tenth * 10}% ({completed}/{total})" if total else ""
        self._say(f"         {_label(step)}  {description}{share}" + (f": {detail}" if detail else ""))

    def step_cached(self, step: Step) -> None:
        self._say(f"  cached {_label(step)}")

    def step_done(self, step: Step, seconds: float) -> None:
        self._done += 1
        self._say(f"  done   {_label(step)}  {seconds:.1f}s  [{self._done}/{self._total}]")

    def step_failed(self, step: Step, seconds: float) -> None:
        self._done += 1
        self._say(f"  FAILED {_label(step)}  {seconds:.1f}s  [{self._done}/{self._total}]")

    def finish(self) -> None:
        pass


class LiveReporter:
    """A rich live display: an overall line with counts and one spinner line per running step."""

    def __init__(self) -> None:
        self.progress: Progress | None = None  # rich costs ~70 ms to import: only once something runs
        self._tasks: dict[str, TaskID] = {}
        self._overall = cast("TaskID", 0)  # rich's ids are ints; the real one comes in start()
        self._title = ""
        self._done = 0
        self._total = 0

    def start(self, plan: Plan, to_run: int) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self.progress = progress = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                            BarColumn(bar_width=None), TimeElapsedColumn(),
                                            console=Console(stderr=True), transient=False)
        self._title = plan.root
        self._total = to_run
        self._overall = progress.add_task(self._describe(), total=to_run)
        progress.start()

    @property
    def _shown(self) -> Progress:
        """The display; the runner reports steps only between start() and finish()."""
        assert self.progress is not None, "a step was reported before start()"
        return self.progress

    def _describe(self) -> str:
        return f"{self._title}: {self._done}/{self._total} steps"

    def step_started(self, step: Step) -> None:
        self._tasks[step.id] = self._shown.add_task(f"  {_label(step)}", total=None)

    def step_progress(self, step: Step, completed: int, total: int | None, description: str,
                      detail: str = "") -> None:
        task = self._tasks.get(step.id)
        if task is not None:
            text = f"  {_label(step)} {description}".rstrip() + (f": {detail}" if detail else "")
            self._shown.update(task, completed=completed, total=total, description=text)

    def _end(self, step: Step, mark: str) -> None:
        task = self._tasks.pop(step.id, None)
        if task is not None:
            self._shown.remove_task(task)
        self._done += 1
        self._shown.update(self._overall, advance=1, description=self._describe())
        self._shown.console.print(mark)

    def step_cached(self, step: Step) -> None:
        pass  # cache hits are found before the display starts

    def step_done(self, step: Step, seconds: float) -> None:
        self._end(step, f"  [green]done[/]   {_label(step)}  {seconds:.1f}s")

    def step_failed(self, step: Step, seconds: float) -> None:
        self._end(step, f"  [red]FAILED[/] {_label(step)}  {seconds:.1f}s")

    def finish(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def make_reporter(mode: str) -> Reporter:
    """mode: 'auto' (live on a terminal, plain otherwise), 'plain', 'live' or 'none'."""
    if mode == "none":
        return NullReporter()
    if mode == "live" or (mode == "auto" and sys.stderr.isatty()):
        return LiveReporter()
    return PlainReporter()
