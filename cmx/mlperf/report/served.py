"""The MLPerf figure against the served figure: a results folder's Server test beside a `cmx pareto` curve of the
same benchmark on the same system, and how much of the MLPerf Server throughput the served curve keeps within the
same latency limits (the "real deployments see 60-80 %" question, measured on your node).

The Server test's figure is LoadGen's tokens/s under the round's TTFT and TPOT limits (judged at p99); a curve's
point is the system tokens/s at one concurrency with its TTFT and TPOT p90. The served figure is the highest system
tokens/s of the curve's points whose TTFT p90 and TPOT p90 are both within the Server test's limits; the curve
measures p90, not p99, so a point within the limits at p90 may not be at p99: the fraction is an upper bound of
what the served curve keeps under MLPerf's own rule. On the curve's plot the Server test is the point (1000 /
its TPOT p90, its tokens/s).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cmx.mlperf.pareto.record import ParetoRecord, Point
from cmx.mlperf.report.collect import ParetoCurve, ResultRow


@dataclass(frozen=True)
class ServedFraction:
    """One Server test and one curve of its benchmark and system."""

    test: ResultRow
    curve: ParetoCurve
    mlperf_tps: float
    ttft_limit_ms: float | None
    tpot_limit_ms: float | None
    served: Point | None          # the curve's best point within the limits (None: none is)

    @property
    def served_tps(self) -> float | None:
        return None if self.served is None else self.served.system_tps

    @property
    def fraction(self) -> float | None:
        return None if self.served_tps is None or not self.mlperf_tps else self.served_tps / self.mlperf_tps

    @property
    def mlperf_point(self) -> tuple[float, float] | None:
        """Where the Server test stands on the curve's axes: (1000 / TPOT p90 ms, tokens/s)."""
        tpot = self.test.tpot.p90 if self.test.tpot else None
        return None if not tpot else (1000.0 / tpot, self.mlperf_tps)

    @property
    def record(self) -> ParetoRecord:
        return self.curve.record


def within(p: Point, ttft_limit_ms: float | None, tpot_limit_ms: float | None) -> bool:
    """Whether a point's TTFT and TPOT p90 are within the limits (a limit not set holds; a figure not measured
    does not)."""
    if p.system_tps is None:
        return False
    for value, limit in ((p.ttft_p90_ms, ttft_limit_ms), (p.tpot_p90_ms, tpot_limit_ms)):
        if limit is not None and (value is None or value > limit):
            return False
    return True


def served_fractions(tests: Sequence[ResultRow], curves: Sequence[ParetoCurve]) -> list[ServedFraction]:
    """Each performance Server test with tokens/s beside each curve of the same benchmark and system."""
    out = []
    for test in tests:
        if test.scenario != "Server" or test.mode != "performance" or not test.tokens_per_second:
            continue
        for curve in curves:
            r = curve.record
            if r.benchmark != test.benchmark or r.system != test.system:
                continue
            inside = [p for p in r.steps if within(p, test.ttft_limit_ms, test.tpot_limit_ms)]
            best = max(inside, key=lambda p: p.system_tps or 0.0, default=None)
            out.append(ServedFraction(test, curve, test.tokens_per_second, test.ttft_limit_ms, test.tpot_limit_ms,
                                      best))
    return out
