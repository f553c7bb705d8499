"""`cmx report` of a `cmx tune`'s results folder: the confirm run as a row, the probes as a plot and a table.

The folder is written by the tune's own code (tune_record, write_tune_results) from hand-written
probes.jsonl lines and a recorded real confirm run (tests/mlperf/report/tunes.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cmx import api
from cmx.mlperf.report.collect import ReportError, collect
from cmx.mlperf.tune.record import CMX_TUNE_JSON
from tests.mlperf.report.tunes import PROBES_JSONL, probes_from_jsonl, write_tune

pytest.importorskip("matplotlib")

SERVER = Path("my-box") / "llama2-70b-99" / "Server"


@pytest.fixture
def tuned(tmp_path: Path) -> Path:
    return write_tune(tmp_path / "tune")


def test_a_tunes_results_folder_is_the_apps_tree_of_its_last_confirm_run_with_the_probes_beside_it(tuned: Path):
    scenario = tuned / SERVER
    assert (scenario / "performance" / "run_1" / "mlperf_log_detail.txt").is_file()
    assert "llama2-70b.Server.target_qps = 212.0" in (scenario / "user.conf").read_text()
    facts = json.loads((scenario / "cmx_run.json").read_text())
    assert facts["target_qps"] == 212.0 and facts["compliant"] is False and "no accuracy run" in facts["noncompliance"]
    record = json.loads((scenario / CMX_TUNE_JSON).read_text())
    assert record["probes"] == [json.loads(line) for line in PROBES_JSONL.splitlines()]  # as probes.jsonl had them
    confirms = [c["qps"] for c in record["confirms"]]
    assert (record["qps"], record["found_qps"], confirms) == (212.0, 230.0, [230.0, 212.0])


def test_collect_reads_the_confirm_run_as_a_test_and_the_tune_with_every_probe_and_confirm(tuned: Path, tmp_path: Path):
    report = collect(tuned)
    assert [(t.scenario, t.mode, t.validity) for t in report.tests] == [("Server", "performance", "VALID")]
    (tune,) = report.tunes
    assert tune.probes == probes_from_jsonl(tmp_path / "tune" / "tune-server" / "probes.jsonl")
    assert [(c.qps, c.ok) for c in tune.confirms] == [(230.0, False), (212.0, True)]
    assert (tune.qps, tune.found_qps, tune.confirmed, tune.ttft_limit_ms, tune.tpot_limit_ms) == (
        212.0, 230.0, True, 2000.0, 200.0)


def _tune_section(page: str) -> str:
    found = re.search(r'<section class="tune">.*?</section>', page, re.S)
    assert found, "no tune section"
    return found.group(0)


def test_the_page_draws_the_probes_and_lists_each_marking_the_chosen_qps(tuned: Path):
    page = api.report(tuned).read_text(encoding="utf-8")
    section = _tune_section(page)
    assert "<h3>Tune: llama2-70b-99 Server</h3>" in section
    assert "target_qps_server = 212, confirmed by the last confirm run" in section
    # the confirm run's latency and throughput plots, and the tune's
    assert len(re.findall(r"<svg\b", page)) == 3 and len(re.findall(r"<svg\b", section)) == 1
    svg = re.search(r"<svg\b.*?</svg>", section, re.S).group(0)
    assert "chosen 212/s" in svg and "the round's p99 limit" in svg
    for kind in ("probe: pass", "probe: VALID, failed", "probe: INVALID", "confirm run: failed"):
        assert kind in svg
    rows = re.findall(r"<tr><td[^>]*>((?:probe|confirm) \d)</td><td[^>]*>([^<]*)</td>", section)
    assert rows == [("probe 1", "80"), ("probe 2", "320"), ("probe 3", "210"), ("probe 4", "250"), ("probe 5", "230"),
                    ("confirm 1", "230"), ("confirm 2", "212")]
    assert re.search(r'<tr><td class="chosen">confirm 2</td><td class="chosen">212</td>', section)
    assert section.count('class="chosen"') == 2  # one row: the confirm run whose QPS went into the inputs file
    assert "pass (the search&#x27;s answer)" in section and "FAIL: TTFT grows through the probe" in section


def test_a_tune_with_no_confirm_run_is_reported_from_its_probes_alone(tmp_path: Path):
    tuned = write_tune(tmp_path / "tune", confirmed=False)  # --no-confirm
    assert sorted(p.name for p in (tuned / SERVER).iterdir()) == [CMX_TUNE_JSON]
    report = collect(tuned)
    assert report.tests == () and len(report.tunes[0].probes) == 5
    section = _tune_section(api.report(tuned).read_text(encoding="utf-8"))
    assert "target_qps_server = 230, NOT confirmed (tuned with --no-confirm)" in section
    assert re.search(r'<tr><td class="chosen">probe 5</td><td class="chosen">230</td>', section)
    assert "cmx tune &#x27;app mlperf inference llama2" in section  # the command, from the tune's own record


def test_a_damaged_tune_record_is_refused_naming_the_file(tuned: Path):
    path = tuned / SERVER / CMX_TUNE_JSON
    path.write_text(json.dumps({"scenario": "Server"}))
    with pytest.raises(ReportError, match=f"{CMX_TUNE_JSON} is not a tune record cmx can read") as err:
        collect(tuned)
    assert "cmx tune" in err.value.hint


def test_an_offline_tune_is_drawn_against_the_target_alone_with_no_latency_limits(tmp_path: Path):
    from cmx.mlperf.tune.process import TuneOutcome
    from cmx.mlperf.tune.record import write_tune_results
    from cmx.mlperf.tune.search import Probe
    from cmx.mlperf.tune.step import tune_record
    from cmx.mlperf.tune.target import TuneTarget
    from tests.mlperf.test_app_run import app_config

    # Offline probes as the tune writes them: no token latencies; a second probe at the first's measured rate
    probes = tuple(Probe(qps=q, passed=True, validity="VALID", early_stopping_met=None, ttft_p99_ms=None,
                         tpot_p99_ms=None, ttft_projected_ms=None, completed_qps=done, queries=n, seconds=s)
                   for q, done, n, s in ((600.0, 171.3, 64, 2.4), (171.0, 168.9, 377, 2.3)))
    target = TuneTarget(family="llama2", benchmark="llama2-70b-99", round="v6.0", scenario="Offline",
                        input_name="target_qps_offline", start_qps=600.0, has_limits=False)
    outcome = TuneOutcome(scenario="Offline", probes=probes, qps=169.0, confirms=(), engine_start_s=22.0, seconds=30.0)
    record = tune_record(target, outcome, 169.0, short=True, tuned=None, folder=tmp_path / "tune-offline",
                         command="cmx tune q --scenario Offline --no-confirm")
    results = write_tune_results(app_config(tmp_path), "Offline", record, None, None)
    (tune,) = collect(results).tunes
    assert (tune.ttft_limit_ms, tune.tpot_limit_ms, tune.qps) == (None, None, 169.0)
    section = _tune_section(api.report(results).read_text(encoding="utf-8"))
    assert "no latency limits: the target is the measured throughput" in section
    svg = re.search(r"<svg\b.*?</svg>", section, re.S).group(0)
    assert "completed queries/s" in svg and "TTFT p99" not in svg and "p99 limit" not in svg
    assert "chosen 169/s" in svg
