"""Where `cmx tune` probes next: a bracket, then a safeguarded model-guided bisection over target QPS.

Pure: it reads the probes done so far (what LoadGen said of each) and returns the next QPS to try,
or None when the answer is known to within the tolerance. It never runs anything, so every path
is unit-tested with made-up probes.

The search keeps the bracket [lo, hi]: the highest QPS that passed below the lowest that failed (a
pass above a failure is noise and ignored: the answer is the conservative one). Before there is a
bracket it grows from a pass, by how much latency headroom the pass had, or shrinks from a
failure. Inside the bracket it tries the QPS two models predict, and bisects when they cannot:

- the queue model: a probe that completed fewer samples/s than LoadGen scheduled ran the engine
  at its capacity mu. A Server run of T seconds (or Q queries, whichever is longer) at lambda >
  mu ends with a backlog whose last query waits (lambda - mu) / mu x max(T, Q / lambda); the
  highest lambda whose wait stays inside the TTFT limit (less the unloaded TTFT) is the estimate.
  That is why a short run stays VALID above capacity, and a 600 s run hardly at all;
- TPOT: the time per output token grows about linearly with the batch the engine runs, so the
  QPS where it reaches its limit is interpolated between the bracket's ends.

An estimate too close to an end of the bracket is moved to one tolerance inside it (so a right
estimate closes the bracket in one or two probes), and after two model steps that did not halve
the bracket the next is a plain bisection, so the search always ends.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

SATURATED = 0.97  # completed/scheduled below this: the engine could not keep up during the probe


@dataclass(frozen=True)
class Probe:
    """One short LoadGen test at `qps` and what LoadGen said of it."""

    qps: float
    passed: bool                     # VALID, early stopping met, p99s under the limits, no failed sample
    validity: str | None
    early_stopping_met: bool | None
    ttft_p99_ms: float | None        # LoadGen's (Server-like scenarios)
    tpot_p99_ms: float | None
    ttft_projected_ms: float | None  # the TTFT p99 extrapolated to the confirm run's length (= p99 when as long)
    completed_qps: float | None      # LoadGen's completed samples/s (Offline: samples/s)
    queries: int
    seconds: float                   # wall time of the probe
    reason: str = ""                 # why it failed ("" when it passed)

    @property
    def saturated(self) -> bool:
        return self.completed_qps is not None and self.completed_qps < SATURATED * self.qps


@dataclass(frozen=True)
class Limits:
    """The round's p99 limits of the scenario, and the length of the run the answer is for."""

    ttft_ms: float
    tpot_ms: float
    min_duration_s: float
    min_queries: int


@dataclass(frozen=True)
class Policy:
    """How far the search goes. `tolerance`: stop when hi - lo <= tolerance x lo."""

    tolerance: float = 0.04
    max_probes: int = 10
    grow_min: float = 1.25
    grow_max: float = 4.0
    shrink_min: float = 0.25
    shrink_max: float = 0.7
    min_qps: float = 0.05


@dataclass(frozen=True)
class Bracket:
    lo: Probe | None   # the highest pass below hi
    hi: Probe | None   # the lowest failure


def bracket(probes: Sequence[Probe]) -> Bracket:
    fails = [p for p in probes if not p.passed]
    hi = min(fails, key=lambda p: p.qps, default=None)
    passes = [p for p in probes if p.passed and (hi is None or p.qps < hi.qps)]
    return Bracket(max(passes, key=lambda p: p.qps, default=None), hi)


def answer(probes: Sequence[Probe]) -> Probe | None:
    """The probe whose QPS the search settles on: the bracket's passing end."""
    return bracket(probes).lo


def next_qps(probes: Sequence[Probe], limits: Limits, policy: Policy = Policy()) -> float | None:
    """The QPS to probe next, or None: the bracket is narrower than the tolerance, the probes are used
    up, or the QPS would fall below `policy.min_qps`."""
    if not probes or len(probes) >= policy.max_probes:
        return None
    b = bracket(probes)
    if b.lo is None:
        proposal = _shrink(b.hi, limits, policy)  # type: ignore[arg-type]  # probes exist, none passed
        return None if proposal < policy.min_qps else _rounded(proposal)
    if b.hi is None:
        return _rounded(_grow(b.lo, probes, limits, policy))
    lo, hi = b.lo.qps, b.hi.qps
    if hi - lo <= policy.tolerance * lo:
        return None
    # an estimate is kept a tolerance above lo, and a tolerance or 15 % of the bracket below hi: on a noisy
    # machine an estimate that keeps landing just under a failure would cut the bracket by a sliver each time
    up, down = policy.tolerance * lo, max(policy.tolerance * lo, 0.15 * (hi - lo))
    estimate = model_estimate(probes, b, limits)
    if estimate is None or _stalled(probes) or lo + up >= hi - down:
        proposal = _rounded((lo + hi) / 2)
    else:
        proposal = _rounded(min(max(estimate, lo + up), hi - down))
    return proposal if lo < proposal < hi and not any(p.qps == proposal for p in probes) else None


def model_estimate(probes: Sequence[Probe], b: Bracket, limits: Limits) -> float | None:
    """The lowest of the queue model's and the TPOT interpolation's estimates (None: neither applies)."""
    found = [e for e in (queue_estimate(probes, b, limits), tpot_estimate(b, limits)) if e is not None]
    return min(found) if found else None


def queue_estimate(probes: Sequence[Probe], b: Bracket, limits: Limits) -> float | None:
    """The highest QPS whose end-of-run backlog keeps TTFT inside its limit, from the capacity the
    saturated probes measured (their median completed samples/s)."""
    rates = sorted(p.completed_qps for p in probes if p.saturated and p.completed_qps)
    if not rates:
        return None
    mu = rates[len(rates) // 2]
    # the TTFT a query sees without a backlog: the lowest p99 of a probe the engine kept up with
    unloaded = [p.ttft_p99_ms for p in probes if not p.saturated and p.passed and p.ttft_p99_ms is not None]
    base = min(unloaded, default=0.0)
    slack_s = max(limits.ttft_ms - base, 0.0) / 1000.0
    return highest_rate(mu, slack_s, limits.min_duration_s, limits.min_queries)


def highest_rate(mu: float, slack_s: float, duration_s: float, queries: int) -> float:
    """Solve (lambda - mu) / mu x max(duration, queries / lambda) = slack for lambda (>= mu)."""
    by_duration = mu * (1 + slack_s / duration_s) if duration_s > 0 else math.inf
    if by_duration * duration_s >= queries:
        return by_duration
    if slack_s * mu >= queries:  # the whole run drains inside the limit: the queue never binds
        return by_duration
    by_count = mu / (1 - slack_s * mu / queries)
    return min(by_count, by_duration) if by_count * duration_s < queries else by_duration


def tpot_estimate(b: Bracket, limits: Limits) -> float | None:
    """Where TPOT p99 reaches its limit, interpolated linearly between the bracket's ends."""
    lo, hi = b.lo, b.hi
    if lo is None or hi is None or lo.tpot_p99_ms is None or hi.tpot_p99_ms is None:
        return None
    if not lo.tpot_p99_ms < limits.tpot_ms < hi.tpot_p99_ms:
        return None
    t = (limits.tpot_ms - lo.tpot_p99_ms) / (hi.tpot_p99_ms - lo.tpot_p99_ms)
    return lo.qps + t * (hi.qps - lo.qps)


def headroom(p: Probe, limits: Limits) -> float | None:
    """The probe's worst p99 as a fraction of its limit (TTFT projected to the run's length)."""
    ratios = []
    ttft = p.ttft_projected_ms if p.ttft_projected_ms is not None else p.ttft_p99_ms
    if ttft is not None and limits.ttft_ms:
        ratios.append(ttft / limits.ttft_ms)
    if p.tpot_p99_ms is not None and limits.tpot_ms:
        ratios.append(p.tpot_p99_ms / limits.tpot_ms)
    return max(ratios) if ratios else None


def _grow(lo: Probe, probes: Sequence[Probe], limits: Limits, policy: Policy) -> float:
    if lo.saturated:  # at capacity already: the queue model knows how far a run of this length can go
        estimate = queue_estimate(probes, Bracket(lo, None), limits)
        floor = lo.qps * (1 + 2 * policy.tolerance)
        if estimate is None:
            return floor
        # just above the estimate: a failure there closes the bracket around it at once
        return max(floor, min(estimate * (1 + policy.tolerance / 2), lo.qps * policy.grow_max))
    r = headroom(lo, limits)
    factor = policy.grow_max if not r else min(max(1 / math.sqrt(r), policy.grow_min), policy.grow_max)
    return lo.qps * factor


def _shrink(hi: Probe, limits: Limits, policy: Policy) -> float:
    if hi.saturated:
        estimate = queue_estimate([hi], Bracket(None, hi), limits)
        if estimate is not None and estimate < hi.qps:
            return max(estimate * (1 - policy.tolerance), policy.min_qps)  # measured capacity: no floor
    r = headroom(hi, limits)
    factor = 0.5 if not r or r <= 1 else min(max(1 / r, policy.shrink_min), policy.shrink_max)
    return hi.qps * factor


def _stalled(probes: Sequence[Probe]) -> bool:
    """The last two probes inside a bracket together did not halve it: bisect once."""
    widths: list[float | None] = []
    for n in range(len(probes) - 2, len(probes) + 1):
        b = bracket(probes[:n])
        widths.append(b.hi.qps - b.lo.qps if b.lo is not None and b.hi is not None else None)
    known = [w for w in widths if w is not None]
    return len(known) == len(widths) and known[-1] > known[0] / 2


def _rounded(qps: float) -> float:
    """Three significant figures: a target a person types again."""
    if qps <= 0:
        return qps
    digits = 2 - math.floor(math.log10(qps))
    return round(qps, max(digits, 0))
