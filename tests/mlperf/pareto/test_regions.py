"""MLPerf Endpoints v1.0's regions and cmx's layout of a curve's points (cmx.mlperf.pareto.regions)."""

from __future__ import annotations

import pytest

from cmx.mlperf.pareto.regions import RegionError, plan_points, regions, structure_problems


# (C_max, C_min) -> low, medium, high, margin: the rules' Appendix B and worked examples (v1.0 algorithm)
@pytest.mark.parametrize(("c_max", "c_min", "low", "medium", "high", "margin"), [
    (256, 1, (2, 7), (8, 41), (42, 256), (257, 282)),
    (256, 8, (9, 14), (15, 47), (48, 256), (257, 282)),
    (1024, 16, (17, 26), (27, 117), (118, 1024), (1025, 1127)),
    (8192, 32, (33, 52), (53, 437), (438, 8192), (8193, 9012)),
    (64, 2, (3, 6), (7, 18), (19, 64), (65, 71)),
    (128, 2, (3, 7), (8, 27), (28, 128), (129, 141)),
])
def test_the_regions_follow_the_rules_boundaries(c_max: int, c_min: int, low: tuple[int, int],
                                                 medium: tuple[int, int], high: tuple[int, int],
                                                 margin: tuple[int, int]) -> None:
    r = regions(c_max, c_min)
    assert (r.ultra_low, r.low, r.medium, r.high, r.margin) == ((1, c_min), low, medium, high, margin)


def test_c_min_is_capped_at_32_and_c_max_must_be_above_it() -> None:
    assert regions(256, 40).c_min == 32
    with pytest.raises(RegionError, match="needs it above 32"):
        regions(32)


def test_a_concurrency_is_placed_in_the_checkers_order_and_beyond_the_margin_nowhere() -> None:
    r = regions(256, 1)
    assert [r.region_of(c) for c in (1, 7, 8, 41, 42, 256, 282, 283)] == [
        "low_latency", "low_concurrency", "med_concurrency", "med_concurrency", "high_concurrency",
        "high_concurrency", "margin", None]


@pytest.mark.parametrize("c_max", [33, 64, 100, 256, 1024, 8192])
def test_cmx_lays_out_one_plus_three_plus_three_points_that_meet_the_structure(c_max: int) -> None:
    r, points = plan_points(c_max)
    mandatory = [p for p in points if p.role == "mandatory"]
    assert [p.concurrency for p in mandatory] == [1, r.low[1], r.medium[1], c_max]
    assert all(p.accuracy for p in mandatory) and not any(p.accuracy for p in points if p.role == "choice")
    assert len({p.concurrency for p in points}) == len(points) <= 7
    assert structure_problems(r, [p.concurrency for p in points], offline=True) == [] or c_max == 33
    assert all(r.region_of(p.concurrency) == p.region for p in points)
    assert [p.min_duration_s for p in points if p.concurrency <= 32] == [600.0] * sum(p.concurrency <= 32
                                                                                       for p in points)


def test_the_structure_names_each_missing_region_and_the_point_count() -> None:
    r = regions(256, 1)
    problems = structure_problems(r, [64, 128, 300], offline=False)
    assert "no point in the Ultra Low region (concurrency 1 to 32)" in problems
    assert "no point in the low concurrency region (2 to 7)" in problems
    assert "3 points; the rules need at least 7 (1 + 3 + 3)" in problems
    assert "concurrency 300 is beyond C_max's 10 % margin (282)" in problems


def test_an_offline_point_under_098_of_the_c_max_points_throughput_is_named() -> None:
    from cmx.mlperf.pareto.record import Point
    from cmx.mlperf.pareto.step import offline_ordering

    def point(concurrency: int, tps: float, role: str) -> Point:
        return Point(concurrency=concurrency, region="offline" if role == "offline" else "high_concurrency",
                     role=role, folder="x", system_tps=tps, tps_per_user=None, ttft_p90_ms=None, tpot_p90_ms=None,
                     system_tps_per_kw=None, issued=1, completed=1, failed=0, output_tokens=1, window_s=1.0,
                     duration_s=1.0, min_duration_s=1.0, whole_run_tps=tps)

    assert offline_ordering([point(64, 1000.0, "mandatory"), point(256, 980.0, "offline")], 64) == []
    assert offline_ordering([point(64, 1000.0, "mandatory"), point(256, 979.0, "offline")], 64) == [
        "the Offline point's 979.0 tokens/s is under 0.98 x the C_max point's 1000.0"]
