"""find-performance's decisions (cmx.mlperf.tune.findperf): which scenarios measure their target, the margins, the
plan's line; and the lock that says which targets a run will measure."""

from __future__ import annotations

from pathlib import Path

import yaml

from cmx.mlperf.tune.findperf import (
    OFFLINE_MARGIN,
    SERVER_MARGIN,
    FoundTarget,
    offline_target,
    plan_line,
    server_measure,
    server_target,
    unset_targets,
)
from tests.conftest import Home


def test_only_the_scenarios_without_a_target_are_measured() -> None:
    given = {"target_qps_offline": 40.0, "target_qps_server": None, "target_qps_interactive": None}
    assert unset_targets(("Offline", "Server"), given) == ("Server",)
    assert unset_targets(("Offline",), given) == ()
    assert unset_targets(("Interactive", "Offline"), {}) == ("Interactive", "Offline")


def test_an_explicit_target_of_any_value_wins_over_measuring() -> None:
    assert unset_targets(("Offline", "Server"), {"target_qps_offline": 0.5, "target_qps_server": 1e4}) == ()


def test_offline_target_errs_upwards_from_the_measured_rate() -> None:
    assert offline_target(160.0) == 200.0 == round(160.0 * (1 + OFFLINE_MARGIN), 1)
    assert offline_target(3.33333) == 4.17  # three significant figures


def test_server_target_is_under_both_the_search_answer_and_the_rate_the_engine_held() -> None:
    # a short probe passed at 234/s while the engine completed at most 178/s: the run is sized from 178
    measured = server_measure(234.0, [19.9, 79.1, 178.4, None, 161.2])
    assert measured == 178.4
    assert server_target(measured) == 143.0 and abs(143.0 - 178.4 * (1 - SERVER_MARGIN)) < 0.5
    # every probe completed what it scheduled: the answer is the lower
    assert server_measure(50.0, [20.0, 49.8, 61.0]) == 50.0
    assert server_measure(50.0, []) == 50.0


def test_the_plan_line_names_each_measured_scenario_and_its_bounds() -> None:
    line = plan_line(("Offline", "Server"), short=False)
    assert line.startswith("find-performance: Offline (at most 2 Offline probes: 480 samples, then about 30 s")
    assert "Server (the tune's search, probes of 30 s and 480 queries" in line and line.endswith("then the runs")
    assert "_short run's length" in plan_line(("Offline",), short=True)
    assert plan_line(None, short=False).startswith("find-performance: each scenario without a target")


def test_a_found_target_line_says_value_method_margin_and_logs() -> None:
    found = FoundTarget(scenario="Server", qps=143.0, measured_qps=178.4, margin=0.2, method="the tune's search",
                        probes=7, seconds=61.2, search_qps=234.0, folder="/w/find-performance/server")
    line = found.line()
    assert line.startswith("Server: target_qps_server = 143 (the tune's search; measured 178.4/s, margin 20%; "
                           "7 probe(s), 61 s; logs /w/find-performance/server)"), line
    assert found.to_json()["search_qps"] == 234.0


def test_the_lock_of_a_run_without_targets_says_which_are_measured(builtin: Home, tmp_path: Path) -> None:
    out = tmp_path / "cmx.lock"
    builtin.cmx("lock", "app mlperf inference llama2 _cpu", "-i", "scenarios=Offline,Server", "-o", str(out),
                check=True)
    notes = yaml.safe_load(out.read_text(encoding="utf-8"))["notes"]
    (step, lines), = notes.items()
    assert step.startswith("app-mlperf-inference-llama2") and lines[0].startswith("find-performance: Offline (")
    given = tmp_path / "given.lock"
    builtin.cmx("lock", "app mlperf inference llama2 _cpu", "-i", "target_qps_offline=40", "-o", str(given),
                check=True)
    assert yaml.safe_load(given.read_text(encoding="utf-8"))["notes"] == {}
