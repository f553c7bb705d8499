"""The tune's search (cmx/mlperf/tune/search.py): where it probes next, and that it ends near the answer.

The search is pure, so these tests feed it probes from a small model of an engine: a Server run of T seconds
at lambda queries/s on an engine of capacity mu ends with a backlog whose last query waits
(lambda - mu) / mu x T, on top of an unloaded TTFT; TPOT grows linearly with the load. The model is
not what the search assumes line by line (its TPOT curve, the unloaded TTFT and the capacity's slow rise
with the batch differ), so a search that only worked on its own model would fail here.
"""

from __future__ import annotations

import math

import pytest

from cmx.mlperf.tune.search import (
    Limits,
    Policy,
    Probe,
    answer,
    bracket,
    highest_rate,
    next_qps,
    tpot_estimate,
)

LIMITS = Limits(ttft_ms=2000, tpot_ms=200, min_duration_s=4.0, min_queries=480)


def engine(qps: float, *, mu: float = 160.0, base_ms: float = 40.0, tpot_per_qps: float = 0.4,
           limits: Limits = LIMITS) -> Probe:
    """A probe of the model engine: LoadGen's verdict is the p99s against the limits."""
    capacity = mu * (1 + 0.1 * min(qps / mu, 1.5))  # a bigger batch serves a little faster
    seconds = max(limits.min_duration_s, limits.min_queries / qps)
    wait_ms = max(qps - capacity, 0.0) / capacity * seconds * 1000.0
    ttft = base_ms + wait_ms
    tpot = 5.0 + tpot_per_qps * qps
    passed = ttft < limits.ttft_ms and tpot < limits.tpot_ms
    return Probe(qps=qps, passed=passed, validity="VALID" if passed else "INVALID", early_stopping_met=passed,
                 ttft_p99_ms=ttft, tpot_p99_ms=tpot, ttft_projected_ms=ttft,
                 completed_qps=min(qps, capacity), queries=limits.min_queries, seconds=seconds)


def true_boundary(**model: float) -> float:
    """The highest QPS the model engine passes, by a fine scan."""
    qps = 1.0
    while engine(qps + 0.1, **model).passed:
        qps += 0.1
    return qps


def run_search(start: float, policy: Policy = Policy(), **model: float) -> list[Probe]:
    probes = [engine(start, **model)]
    while (qps := next_qps(probes, LIMITS, policy)) is not None:
        probes.append(engine(qps, **model))
    return probes


@pytest.mark.parametrize("start", [5.0, 20.0, 150.0, 400.0, 2000.0])
def test_the_search_ends_within_its_tolerance_of_the_boundary_from_any_start(start: float):
    probes = run_search(start)
    best = answer(probes)
    truth = true_boundary()
    assert best is not None and best.passed
    assert truth * 0.95 <= best.qps <= truth + 0.1
    assert len(probes) <= Policy().max_probes
    assert len({p.qps for p in probes}) == len(probes)  # never the same QPS twice


def test_a_tpot_bound_engine_is_found_by_interpolating_tpot():
    model = {"tpot_per_qps": 2.0, "mu": 1000.0}  # TPOT reaches 200 ms near 97.5/s, long before the queue binds
    probes = run_search(20.0, **model)
    best = answer(probes)
    assert best is not None and 97.5 * 0.95 <= best.qps <= 97.5
    assert len(probes) <= 7


def test_the_search_takes_fewer_probes_than_a_plain_bisection():
    bisection = 0
    lo, hi = 20.0, None
    while hi is None or hi - lo > 0.04 * lo:  # double until a failure, then halve, as the bench's baseline does
        qps = lo * 2 if hi is None else (lo + hi) / 2
        bisection += 1
        if engine(qps).passed:
            lo = qps
        else:
            hi = qps
    assert len(run_search(20.0)) < bisection


def test_growth_from_a_pass_follows_its_headroom_within_bounds():
    tiny_load = engine(10.0)   # TTFT 40 of 2000 ms: grows by the most allowed
    assert next_qps([tiny_load], LIMITS) == pytest.approx(40.0)
    near = Probe(qps=100, passed=True, validity="VALID", early_stopping_met=True, ttft_p99_ms=1500,
                 tpot_p99_ms=20, ttft_projected_ms=1500, completed_qps=100, queries=480, seconds=4.8)
    assert next_qps([near], LIMITS) == pytest.approx(125.0)  # at 75 % of a limit: the least growth


def test_a_failure_with_no_pass_shrinks_toward_what_the_engine_completed():
    over = engine(2000.0)
    qps = next_qps([over], LIMITS)
    assert qps is not None and qps < over.completed_qps * 1.5


def test_a_pass_above_a_failure_is_noise_and_the_lower_failure_bounds_the_answer():
    probes = [engine(100.0), engine(150.0)]
    noisy_fail = Probe(qps=120, passed=False, validity="INVALID", early_stopping_met=False, ttft_p99_ms=2100,
                       tpot_p99_ms=50, ttft_projected_ms=2100, completed_qps=118, queries=480, seconds=4.1,
                       reason="INVALID")
    b = bracket([*probes, noisy_fail])
    assert (b.lo.qps, b.hi.qps) == (100.0, 120)


def test_the_search_stops_when_the_bracket_is_within_tolerance_or_probes_are_spent():
    assert next_qps([engine(100.0), engine(1000.0)], LIMITS, Policy(max_probes=2)) is None
    lo = engine(100.0)
    hi = Probe(qps=103, passed=False, validity="INVALID", early_stopping_met=False, ttft_p99_ms=2500,
               tpot_p99_ms=50, ttft_projected_ms=2500, completed_qps=100, queries=480, seconds=4.8, reason="x")
    assert next_qps([lo, hi], LIMITS) is None


def test_nothing_passes_down_to_the_floor_then_the_search_gives_up():
    broken = [Probe(qps=q, passed=False, validity="INVALID", early_stopping_met=False, ttft_p99_ms=None,
                    tpot_p99_ms=None, ttft_projected_ms=None, completed_qps=None, queries=0, seconds=1.0,
                    reason="every sample failed") for q in (0.08,)]
    assert next_qps(broken, LIMITS) is None
    assert answer(broken) is None


def test_the_queue_model_allows_a_short_run_above_capacity_and_a_long_one_hardly_at_all():
    short = highest_rate(100.0, 2.0, duration_s=4.0, queries=480)
    long = highest_rate(100.0, 2.0, duration_s=600.0, queries=0)
    assert short > 130 and long == pytest.approx(100 * (1 + 2 / 600))
    assert math.isinf(highest_rate(100.0, 2.0, 0.0, 0)) or highest_rate(100.0, 2.0, 0.0, 0) > 100


def test_tpot_interpolation_needs_the_limit_between_the_bracket_ends():
    lo, hi = engine(50.0, tpot_per_qps=2.0), engine(200.0, tpot_per_qps=2.0)
    b = bracket([lo, hi])
    assert tpot_estimate(b, LIMITS) == pytest.approx(97.5)
    assert tpot_estimate(bracket([engine(50.0), engine(400.0)]), LIMITS) is None  # TPOT 165 < 200 at 400


def test_an_estimate_just_under_a_failure_is_kept_well_inside_the_bracket():
    """Measured on 2 shared cores: 80/s passed, 297/s failed completing 182/s, and the queue model's estimate
    (about 272) failed too; probing just under each failure cut the bracket by a sliver each time."""
    lo = engine(80.0)
    hi = Probe(qps=297, passed=False, validity="INVALID", early_stopping_met=False, ttft_p99_ms=2343,
               tpot_p99_ms=81, ttft_projected_ms=2343, completed_qps=182.4, queries=480, seconds=6.7,
               reason="TTFT constrain not met")
    qps = next_qps([lo, hi], LIMITS)
    assert qps is not None and 80 < qps <= 297 - 0.15 * (297 - 80)
