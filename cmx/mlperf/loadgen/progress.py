"""Live progress of one LoadGen test: the SUT's per-sample clock, the harness's progress file, and the
caller reading it.

The harness process runs the test; the caller (the app step) only sees that process from outside.
So the SUT stamps each sample on a `SampleClock` (issued, first token, completed, tokens: a dict
write and a list append, nothing that costs throughput), a `ProgressWriter` thread in the harness
turns the clock into a `RunProgress` once a second and writes it to `progress.json` (replaced
atomically), and `follow` in the caller reads that file while it waits for the process. When the
test ends the harness writes every sample's times to `cmx_samples.csv`, for reports.

The latencies here are the SUT's own, measured from when LoadGen handed it the sample: LoadGen
measures from the sample's scheduled time, so its p99 (in the summary, and what validity is judged
on) can only be higher. The live figures are a guide while the test runs, never its result.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

PROGRESS_JSON = "progress.json"
SAMPLES_CSV = "cmx_samples.csv"
INTERVAL_S = 1.0


class SampleClock:
    """Per-sample times (seconds since the clock was made) as the SUT sees them; safe across its threads.

    `issued` runs on LoadGen's issue thread, `first_token` and `completed` on the backend's; each
    does one dict or list operation, which the GIL makes atomic.
    """

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._t0 = now()
        self._issued_at: dict[int, float] = {}
        self._first_at: dict[int, float] = {}
        self.issued_count = 0
        self.failed_count = 0
        self.started_at: float | None = None  # the first issue: LoadGen's timed window has begun
        self.rows: list[tuple[float, float, float, int]] = []  # (issued, first token or NaN, completed, tokens)

    def now(self) -> float:
        return self._now() - self._t0

    def issued(self, query_ids: Iterable[int]) -> None:
        at = self.now()
        if self.started_at is None:
            self.started_at = at
        n = 0
        for q in query_ids:
            self._issued_at[q] = at
            n += 1
        self.issued_count += n

    def first_token(self, query_id: int) -> None:
        self._first_at[query_id] = self.now()

    def completed(self, query_id: int, tokens: int) -> None:
        at = self.now()
        self.rows.append((self._issued_at.pop(query_id, at), self._first_at.pop(query_id, math.nan), at, tokens))

    def failed(self, query_id: int) -> None:
        self._issued_at.pop(query_id, None)
        self._first_at.pop(query_id, None)
        self.failed_count += 1

    def write_samples(self, path: Path) -> Path:
        """Every completed sample's times, in completion order: what `cmx report` plots."""
        lines = ["issued_s,first_token_s,completed_s,tokens\n"]
        lines += [f"{i:.6f},{'' if math.isnan(f) else f'{f:.6f}'},{c:.6f},{n}\n" for i, f, c, n in list(self.rows)]
        path.write_text("".join(lines), encoding="utf-8")
        return path


@dataclass(frozen=True)
class RunProgress:
    """One look at a running test: counts, throughput, the SUT-side p99s against the limits, and an ETA."""

    scenario: str
    mode: str
    state: str                     # starting (the engine), running (LoadGen's window), done
    elapsed_s: float               # since the first sample was issued (0 while starting)
    issued: int
    completed: int
    failed: int
    tokens: int
    expected: int | None           # samples this test will issue, where LoadGen's settings fix it
    min_duration_s: float | None
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    ttft_limit_ms: float | None
    tpot_limit_ms: float | None
    # end-to-end latency, for a Server test judged on it (use_token_latencies 0: Qwen3-VL), not on TTFT and TPOT
    latency_p99_ms: float | None = None
    latency_limit_ms: float | None = None

    @property
    def tokens_per_s(self) -> float | None:
        return self.tokens / self.elapsed_s if self.elapsed_s > 0 and self.tokens else None

    @property
    def eta_s(self) -> float | None:
        """Seconds left: the samples still to complete at the rate so far, and at least the minimum duration."""
        if self.state != "running" or not self.completed or self.expected is None:
            return None
        left = max(0, self.expected - self.completed) * self.elapsed_s / self.completed
        if self.min_duration_s:
            left = max(left, self.min_duration_s - self.elapsed_s)
        return left

    def headline(self) -> str:
        return f"{self.scenario} {self.mode}"

    def detail(self) -> str:
        """`320/640 samples, 1190 tok/s, TTFT p99 143/2000 ms, TPOT p99 37/200 ms, 0:42 elapsed, ETA 0:40`; a test
        judged on whole answers shows `latency p99 4210/12000 ms` in place of TTFT and TPOT."""
        if self.state == "starting":
            return "starting the engine"
        of = f"/{self.expected}" if self.expected else f" of {self.issued} issued"
        parts = [f"{self.completed}{of} samples"]
        if self.failed:
            parts.append(f"{self.failed} failed")
        if self.tokens_per_s is not None:
            parts.append(f"{self.tokens_per_s:.0f} tok/s")
        parts += [_against(name, value, limit) for name, value, limit in
                  (("TTFT", self.ttft_p99_ms, self.ttft_limit_ms), ("TPOT", self.tpot_p99_ms, self.tpot_limit_ms),
                   ("latency", self.latency_p99_ms, self.latency_limit_ms))
                  if value is not None]
        parts.append(f"{_clock(self.elapsed_s)} elapsed")
        if self.eta_s is not None:
            parts.append(f"ETA {_clock(self.eta_s)}")
        return ", ".join(parts)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> RunProgress:
        return cls(**json.loads(text))


def _against(name: str, value: float, limit: float | None) -> str:
    return f"{name} p99 {value:.0f}/{limit:.0f} ms" if limit else f"{name} p99 {value:.0f} ms"


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


@dataclass(frozen=True)
class RunShape:
    """What a test's settings say about its length and limits: the fixed part of every RunProgress."""

    scenario: str
    mode: str
    expected: int | None = None
    min_duration_s: float | None = None
    ttft_limit_ms: float | None = None
    tpot_limit_ms: float | None = None
    latency_limit_ms: float | None = None  # a Server test judged on end-to-end latency (use_token_latencies 0)


class _Latencies:
    """TTFT and TPOT of the completed streamed samples, and every completed sample's end-to-end latency, converted
    from the clock's rows as they arrive (each row once), so a look costs a percentile over floats, not a pass over
    Python tuples."""

    def __init__(self) -> None:
        self.seen = 0
        self.tokens = 0
        self._ttft: list[np.ndarray] = []
        self._tpot: list[np.ndarray] = []
        self._e2e: list[np.ndarray] = []

    def add(self, rows: list[tuple[float, float, float, int]]) -> None:
        new = rows[self.seen:]
        if not new:
            return
        self.seen += len(new)
        issued, first, done, tokens = np.asarray(new, dtype=np.float64).T
        self.tokens += int(tokens.sum())
        streamed = ~np.isnan(first)
        self._ttft.append((first[streamed] - issued[streamed]) * 1000.0)
        many = streamed & (tokens > 1)
        self._tpot.append((done[many] - first[many]) / (tokens[many] - 1) * 1000.0)
        self._e2e.append((done - issued) * 1000.0)
        if len(self._ttft) > 64:  # keep the number of pieces small
            self._ttft, self._tpot = [np.concatenate(self._ttft)], [np.concatenate(self._tpot)]
            self._e2e = [np.concatenate(self._e2e)]

    def p99s(self) -> tuple[float | None, float | None]:
        return _p99(self._ttft), _p99(self._tpot)

    def e2e_p99(self) -> float | None:
        return _p99(self._e2e)


def _p99(pieces: list[np.ndarray]) -> float | None:
    values = np.concatenate(pieces) if pieces else np.empty(0)
    return round(float(np.percentile(values, 99)), 1) if values.size else None


def run_shape(settings: Any, scenario: str, mode: str, total_samples: int) -> RunShape:
    """The shape LoadGen's TestSettings (after FromConfig) fix for a test: accuracy issues every sample once;
    Server performance runs `max(min_query_count, qps × min_duration)` queries and at least min_duration;
    Offline's query size is known when it is issued. A compliance run's audit.config is not read here. A Server
    test without token latencies is judged on end-to-end latency: its limit is server_target_latency_ns. A
    SingleStream test has no limit, and runs at least min_query_count queries, one at a time, and min_duration."""
    single = scenario == "SingleStream"
    streamed = scenario != "Offline" and not single  # the Server-like tests, whose limits LoadGen judges
    ttft = settings.ttft_latency / 1e6 if streamed and settings.use_token_latencies else None
    tpot = settings.tpot_latency / 1e6 if streamed and settings.use_token_latencies else None
    e2e = settings.server_target_latency_ns / 1e6 if streamed and not settings.use_token_latencies else None
    if mode == "accuracy":
        return RunShape(scenario, mode, expected=total_samples, ttft_limit_ms=ttft, tpot_limit_ms=tpot,
                        latency_limit_ms=e2e)
    if mode != "performance":
        return RunShape(scenario, mode, ttft_limit_ms=ttft, tpot_limit_ms=tpot, latency_limit_ms=e2e)
    min_duration = settings.min_duration_ms / 1000.0
    expected = None
    if single:
        expected = int(settings.min_query_count)
    elif scenario != "Offline":
        expected = max(int(settings.min_query_count), math.ceil(settings.server_target_qps * min_duration))
    return RunShape(scenario, mode, expected=expected, min_duration_s=min_duration, ttft_limit_ms=ttft,
                    tpot_limit_ms=tpot, latency_limit_ms=e2e)


class ProgressWriter:
    """A thread that writes the test's progress to a file every `interval` seconds, and once more at the end."""

    def __init__(self, path: Path, clock: SampleClock, shape: RunShape, interval: float = INTERVAL_S) -> None:
        self.path = path
        self.clock = clock
        self.shape = shape
        self.interval = interval
        self._latencies = _Latencies()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cmx-progress", daemon=True)

    def start(self) -> ProgressWriter:
        """Start writing (`shape` may be replaced later: it is known once LoadGen's settings are read)."""
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.write(final=True)

    def progress(self, *, final: bool = False) -> RunProgress:
        clock, shape = self.clock, self.shape
        self._latencies.add(clock.rows)
        started = clock.started_at
        expected = shape.expected
        if expected is None and shape.scenario == "Offline" and clock.issued_count:
            expected = clock.issued_count  # Offline issues its whole query at once
        elif expected is not None:
            expected = max(expected, clock.issued_count)  # LoadGen may issue more (early stopping, equal issue)
        ttft, tpot = self._latencies.p99s() if shape.scenario != "Offline" else (None, None)
        e2e = self._latencies.e2e_p99() if shape.latency_limit_ms is not None else None
        return RunProgress(
            scenario=shape.scenario, mode=shape.mode,
            state="done" if final else "starting" if started is None else "running",
            elapsed_s=0.0 if started is None else round(clock.now() - started, 3),
            issued=clock.issued_count, completed=self._latencies.seen, failed=clock.failed_count,
            tokens=self._latencies.tokens, expected=expected, min_duration_s=shape.min_duration_s,
            ttft_p99_ms=ttft, tpot_p99_ms=tpot, ttft_limit_ms=shape.ttft_limit_ms, tpot_limit_ms=shape.tpot_limit_ms,
            latency_p99_ms=e2e, latency_limit_ms=shape.latency_limit_ms)

    def write(self, *, final: bool = False) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(self.progress(final=final).to_json(), encoding="utf-8")
        os.replace(tmp, self.path)

    def _loop(self) -> None:
        self.write()
        while not self._stop.wait(self.interval):
            self.write()


def read_progress(path: Path) -> RunProgress | None:
    """The last progress a harness wrote, or None when there is none (yet) or it cannot be read."""
    try:
        return RunProgress.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return None


def waiting_for(proc: subprocess.Popen, timeout: float | None) -> Callable[[float], bool]:
    """`follow`'s wait for a process: waits up to the seconds asked, True once it has exited, and raises
    subprocess.TimeoutExpired once `timeout` seconds have passed since this was called."""
    deadline = None if timeout is None else time.monotonic() + timeout

    def wait(seconds: float) -> bool:
        if deadline is not None:
            seconds = max(0.0, min(seconds, deadline - time.monotonic()))
        try:
            proc.wait(timeout=seconds)
            return True
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                raise
            return False

    return wait


def follow(wait: Callable[[float], bool], path: Path, on_progress: Callable[[RunProgress], None],
           interval: float = INTERVAL_S) -> None:
    """Call `on_progress` with each new progress the file holds until `wait(interval)` returns True (done)."""
    seen = None
    while True:
        finished = wait(interval)
        try:
            stamp = path.stat().st_mtime_ns
        except OSError:
            stamp = None
        if stamp is not None and stamp != seen:
            seen = stamp
            progress = read_progress(path)
            if progress is not None:
                on_progress(progress)
        if finished:
            return
