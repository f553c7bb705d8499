"""MLPerf Endpoints v1.0's concurrency regions and a curve's points laid out over them (pure).

The rules (endpoints_rules.md §5.3-§5.7, v1.0; the submission checker's models/regions.py): C_max, the
Maximum Supported Concurrency, is the submitter's and must be above 32; C_min is derived, the lowest
point's concurrency, capped at 32. With I = log2(C_max - C_min) / 3 the regions are, inclusive:

    ultra-low  1 .. C_min                        (the rules name 1..32 Ultra Low; a point there covers it)
    low        C_min + 1 .. round(C_min + 2^I)
    medium     that + 1 .. round(C_min + 2^2I)
    high       that + 1 .. C_max
    margin     C_max + 1 .. ceil(1.1 C_max)      (in range, but covers no region)

`round` is Python's (half to even), as the checker's. A curve has 1 + 3 + 3 + 1 points: one in 1..32,
one in each of low, medium and high, three of the submitter's choice among those three, and an Offline
point; 32 at most. cmx lays them out as: concurrency 1 (so C_min = 1), the top of low and of medium and
C_max itself (the high point, which the Offline point's 0.98 x system_tps check is made against), and one
choice point in the middle of each region, geometrically.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cmx.errors import CmxError
from cmx.mlperf.pareto.record import HIGH, LOW, MARGIN, MEDIUM, ULTRA_LOW

ULTRA_LOW_MAX = 32          # the Ultra Low region is 1..32 whatever C_min is
MAX_POINTS = 32
ULTRA_LOW_SECONDS = 600.0   # §6.2: the steady-state window's issue-time span
OTHER_SECONDS = 1200.0


class RegionError(CmxError):
    """A curve cannot be laid out as the rules ask (C_max not above 32)."""


@dataclass(frozen=True)
class Regions:
    c_min: int
    c_max: int
    low: tuple[int, int]
    medium: tuple[int, int]
    high: tuple[int, int]
    margin: tuple[int, int]

    @property
    def ultra_low(self) -> tuple[int, int]:
        return (1, self.c_min)

    def named(self) -> dict[str, tuple[int, int]]:
        return {ULTRA_LOW: self.ultra_low, LOW: self.low, MEDIUM: self.medium, HIGH: self.high, MARGIN: self.margin}

    def region_of(self, concurrency: int) -> str | None:
        """The region a concurrency falls in, tested in the checker's order; None beyond the margin."""
        for name, (lo, hi) in self.named().items():
            if lo <= concurrency <= hi:
                return name
        return None


def regions(c_max: int, c_min: int = 1) -> Regions:
    """The regions of a curve whose lowest point is `c_min` (capped at 32) and whose C_max is `c_max`."""
    c_min = min(c_min, ULTRA_LOW_MAX)
    if c_min < 1:
        raise RegionError(f"the lowest concurrency must be at least 1, not {c_min}")
    if c_max <= ULTRA_LOW_MAX:
        raise RegionError(f"C_max (the Maximum Supported Concurrency) is {c_max}; MLPerf Endpoints needs it above "
                          f"{ULTRA_LOW_MAX}",
                          hint="give --max-concurrency above 32 (the rules leave C_max to the submitter), or let cmx "
                               "probe for it")
    i = math.log2(c_max - c_min) / 3
    low_end = round(c_min + 2 ** i)
    med_end = round(c_min + 2 ** (2 * i))
    return Regions(c_min=c_min, c_max=c_max, low=(c_min + 1, low_end), medium=(low_end + 1, med_end),
                   high=(med_end + 1, c_max), margin=(c_max + 1, math.ceil(1.1 * c_max)))


@dataclass(frozen=True)
class PlannedPoint:
    concurrency: int
    region: str
    role: str            # mandatory, choice
    accuracy: bool       # one of the gate's points (the four mandatory region points)

    @property
    def min_duration_s(self) -> float:
        return ULTRA_LOW_SECONDS if self.concurrency <= ULTRA_LOW_MAX else OTHER_SECONDS


def plan_points(c_max: int) -> tuple[Regions, tuple[PlannedPoint, ...]]:
    """The regions with C_min = 1 and the seven fixed-concurrency points cmx runs (the Offline point is apart)."""
    r = regions(c_max, 1)
    points = [PlannedPoint(1, ULTRA_LOW, "mandatory", True),
              PlannedPoint(r.low[1], LOW, "mandatory", True),
              PlannedPoint(r.medium[1], MEDIUM, "mandatory", True),
              PlannedPoint(c_max, HIGH, "mandatory", True)]
    taken = {p.concurrency for p in points}
    for name, (lo, hi) in ((LOW, r.low), (MEDIUM, r.medium), (HIGH, r.high)):
        mid = _middle(lo, hi, taken)
        if mid is not None:
            taken.add(mid)
            points.append(PlannedPoint(mid, name, "choice", False))
    return r, tuple(sorted(points, key=lambda p: p.concurrency))


def _middle(lo: int, hi: int, taken: set[int]) -> int | None:
    """A concurrency in lo..hi not yet taken, nearest the region's geometric middle."""
    mid = round(math.sqrt(lo * hi))
    free = [c for c in range(lo, hi + 1) if c not in taken]
    return min(free, key=lambda c: (abs(c - mid), c)) if free else None


def structure_problems(r: Regions, concurrencies: list[int], offline: bool) -> list[str]:
    """What keeps a set of points from the rules' structure: 1 + 3 + 3 (+ 1 Offline), 32 at most."""
    out = []
    if not any(1 <= c <= ULTRA_LOW_MAX for c in concurrencies):
        out.append("no point in the Ultra Low region (concurrency 1 to 32)")
    for name, (lo, hi) in ((LOW, r.low), (MEDIUM, r.medium), (HIGH, r.high)):
        if not any(lo <= c <= hi for c in concurrencies):
            out.append(f"no point in the {name.replace('_', ' ')} region ({lo} to {hi})")
    needed = 8 if offline else 7
    total = len(concurrencies) + (1 if offline else 0)
    if total < needed:
        out.append(f"{total} points; the rules need at least {needed} (1 + 3 + 3{' + 1 Offline' if offline else ''})")
    if total > MAX_POINTS:
        out.append(f"{total} points; the rules allow at most {MAX_POINTS}")
    out += [f"concurrency {c} is beyond C_max's 10 % margin ({r.margin[1]})" for c in concurrencies
            if r.region_of(c) is None]
    return out


__all__ = ["PlannedPoint", "RegionError", "Regions", "plan_points", "regions", "structure_problems"]
