"""A point's metrics from its requests (pure): system tokens/s over the window, TPOT and TTFT p90, tokens/s per user.

The rules (endpoints_rules.md §4.1, §4.4) compute a point over its steady-state window, defined on issue
time so that the drain (no new issues, the last requests finishing) is left out, and the ramp cropped
from the front. cmx's window is simpler than the rules' detector (which needs 4 dataset passes with
TPOT p50 and p90 on a plateau): it starts when the first request completes (the loop is full and
cycling: the first `concurrency` requests were issued at once) and ends at the last issue; its system
tokens/s is the output tokens of the requests issued in it over its span. A run too short for a window
(fewer than two issues after the first completion) falls back to the whole run, as the rules fall back to
whole-run totals. Percentiles are the lower nearest rank, as the client's numpy `method="lower"`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RequestRecord:
    """One request of a point, its times in seconds from the point's start."""

    index: int                    # the dataset row
    issued: float
    first_token: float | None     # None: not streamed, or failed before its first token
    done: float | None            # None: failed
    output_tokens: int
    error: str | None = None


@dataclass(frozen=True)
class PointFigures:
    system_tps: float | None
    tps_per_user: float | None
    ttft_p90_ms: float | None
    tpot_p90_ms: float | None
    issued: int
    completed: int
    failed: int
    output_tokens: int            # of the window's requests
    window_s: float
    duration_s: float
    whole_run_tps: float | None


def percentile_lower(values: Sequence[float], q: float) -> float | None:
    """numpy's percentile with method="lower": the sorted value at floor(q/100 x (n - 1))."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[int(q / 100 * (len(ordered) - 1))]


def tpot_s(r: RequestRecord) -> float | None:
    """Time per output token after the first: (done - first token) / (tokens - 1); None without a suffix."""
    if r.first_token is None or r.done is None or r.output_tokens < 2:
        return None
    value = (r.done - r.first_token) / (r.output_tokens - 1)
    return value if value > 0 else None


def figures(records: Sequence[RequestRecord], *, streamed: bool = True) -> PointFigures:
    """The point's figures; `streamed` False (the Offline point): whole-run totals, no TTFT or TPOT."""
    ok = [r for r in records if r.error is None and r.done is not None]
    failed = len(records) - len(ok)
    start = min((r.issued for r in records), default=0.0)
    end = max((r.done for r in ok if r.done is not None), default=start)
    duration = end - start
    total_tokens = sum(r.output_tokens for r in ok)
    first_done = min((r.done for r in ok if r.done is not None), default=None)
    in_window = [r for r in ok if first_done is not None and r.issued >= first_done]
    if streamed and len(in_window) >= 2 and max(r.issued for r in in_window) > min(r.issued for r in in_window):
        issued = sorted(r.issued for r in in_window)
        window = issued[-1] - issued[0]
        tokens = sum(r.output_tokens for r in in_window)
        system_tps: float | None = tokens / window
        chosen = in_window
    else:  # too short for a window: the whole run
        window = duration
        tokens = total_tokens
        system_tps = total_tokens / duration if duration > 0 else None
        chosen = ok
    tpots = [t for t in (tpot_s(r) for r in chosen) if t is not None] if streamed else []
    ttfts = [r.first_token - r.issued for r in chosen if r.first_token is not None] if streamed else []
    tpot90 = percentile_lower(tpots, 90)
    ttft90 = percentile_lower(ttfts, 90)
    return PointFigures(system_tps=system_tps,
                        tps_per_user=1000 / (tpot90 * 1000) if tpot90 else None,
                        ttft_p90_ms=ttft90 * 1000 if ttft90 is not None else None,
                        tpot_p90_ms=tpot90 * 1000 if tpot90 is not None else None,
                        issued=len(records), completed=len(ok), failed=failed, output_tokens=tokens,
                        window_s=window, duration_s=duration,
                        whole_run_tps=total_tokens / duration if duration > 0 else None)
