"""The MLPerf figure against the served figure: a Server test and a `cmx pareto` curve of the same benchmark on the
same system in one results folder; the fraction of the Server tokens/s the curve keeps within the same limits."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from cmx.mlperf.pareto.record import HIGH
from cmx.mlperf.report.collect import collect
from cmx.mlperf.report.page import write_report
from cmx.mlperf.report.served import served_fractions, within
from tests.mlperf.report.paretos import curve, point, write_pareto
from tests.mlperf.report.test_report import make_results

SERVER_TPS = 885.109  # the recorded Server test's tokens/s (tests/data/loadgen server-perf), TTFT 2,000 / TPOT 200 ms


def served_curve(system: str = "my-box", benchmark: str = "llama2-70b-99"):
    """paretos.curve() at a quarter of its throughput (best 600 tokens/s at concurrency 64), and a point at 128
    with more throughput whose TTFT p90 is over the Server test's 2,000 ms."""
    base = curve(scale=0.25, system=system)
    over = replace(point(128, HIGH, 800.0, 8.0), ttft_p90_ms=2500.0)
    return replace(base, benchmark=benchmark, points=(*base.points, over))


def test_a_point_counts_only_within_both_limits() -> None:
    inside = point(8, HIGH, 100.0, 50.0)  # TTFT p90 128 ms, TPOT p90 20 ms
    assert within(inside, 2000.0, 200.0)
    assert not within(inside, 100.0, 200.0)
    assert not within(inside, 2000.0, 10.0)
    assert not within(replace(inside, tpot_p90_ms=None), 2000.0, 200.0)
    assert within(inside, None, None)


def test_the_served_throughput_within_the_server_limits_is_a_fraction_of_the_mlperf_figure(tmp_path: Path) -> None:
    results = write_pareto(make_results(tmp_path / "a"), served_curve())
    (s,) = served_fractions(collect(results).tests, collect(results).pareto)
    assert s.mlperf_tps == pytest.approx(SERVER_TPS)
    assert (s.served.concurrency, s.served_tps) == (64, 600.0)  # not 128: its TTFT is over the limit
    assert s.fraction == pytest.approx(600.0 / SERVER_TPS)
    page = write_report(results, tmp_path / "report.html").read_text()
    section = re.search(r'<section class="served">.*?</section>', page, re.S)
    assert section, "no served section"
    assert (f"the served curve keeps 600 tokens/s within the same limits (TTFT 2,000 ms, TPOT 200 ms, at p90; "
            f"concurrency 64): {600.0 / SERVER_TPS:.0%} of the MLPerf Server figure, 885 tokens/s") in section.group()
    svg = re.search(r'<figure class="served-chart">(<svg.*?</svg>)', section.group(), re.S)
    assert svg and 'id="mlperf-server"' in svg.group(1)  # the Server test drawn on the curve


def test_a_curve_of_another_system_or_benchmark_is_not_compared(tmp_path: Path) -> None:
    other_system = write_pareto(make_results(tmp_path / "a"), served_curve(system="other-box"))
    assert served_fractions(collect(other_system).tests, collect(other_system).pareto) == []
    other_model = write_pareto(make_results(tmp_path / "b"), served_curve(benchmark="llama3.1-8b"))
    assert served_fractions(collect(other_model).tests, collect(other_model).pareto) == []
    assert 'class="served"' not in write_report(other_model, tmp_path / "report.html").read_text()


def test_a_curve_with_no_point_within_the_limits_says_so(tmp_path: Path) -> None:
    slow = served_curve()
    slow = replace(slow, points=tuple(replace(p, ttft_p90_ms=3000.0) for p in slow.points))
    page = write_report(write_pareto(make_results(tmp_path / "a"), slow), tmp_path / "report.html").read_text()
    assert "no point of the curve is within the Server test&#x27;s limits (TTFT 2,000 ms, TPOT 200 ms, at p90)" in page
