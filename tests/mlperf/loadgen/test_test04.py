"""Compliance TEST04 (no caching): the audit.config as compliance/TEST04 has it, the run's query count, the
verification as verify_performance.py computes and prints it on summaries written here in LoadGen's format, the
verdict the packager and `cmx check` read, and TEST04's folder in a packaged tree."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cmx.mlperf.backends.base import GenRequest, StreamSink
from cmx.mlperf.loadgen import test04
from cmx.mlperf.loadgen.compliance import TESTS, compliance_test, modes_of, write_audit_config
from cmx.mlperf.loadgen.harness_config import HarnessConfig, HarnessResult
from cmx.mlperf.loadgen.log import LoadgenRun
from cmx.mlperf.loadgen.run_record import RESULT_JSON
from cmx.mlperf.loadgen.test07 import audit_values
from cmx.mlperf.rounds import load_round
from cmx.mlperf.submission.check.result import _compliance_verdict
from cmx.mlperf.submission.tree import ResultPaths
from tests.mlperf.single_stream import OneAtATime, run_single_stream


def summary(scenario: str, *, score: float = 10.0, valid: bool = True, errors: int = 0,
            target_latency_ns: int = 1_000_000_000) -> str:
    """mlperf_log_summary.txt as LoadGen writes it (loadgen/results.cc): `score` is samples/s (Offline), completed
    samples/s (Server) or the early-stopping 90th percentile latency in ns (SingleStream)."""
    lines = ["================================================", "MLPerf Results Summary",
             "================================================", "SUT name : cmx", f"Scenario : {scenario}",
             "Mode     : PerformanceOnly"]
    if scenario == "SingleStream":
        lines.append(f"90.0th percentile latency (ns) : {int(score * 0.9)}")
    elif scenario == "Server":
        lines.append(f"Completed samples per second    : {score:.2f}")
    else:
        lines.append(f"Samples per second: {score}")
    lines += [f"Result is : {'VALID' if valid else 'INVALID'}", "  Min duration satisfied : Yes",
              "  Min queries satisfied : Yes", f"  Early stopping satisfied: {'Yes' if valid else 'NO'}"]
    if scenario == "SingleStream":
        lines += ["Early Stopping Result:", " * Processed at least 64 queries (64).",
                  " * Would discard 1 highest latency queries.",
                  f" * Early stopping 90.0th percentile estimate: {int(score)}",
                  " * Early stopping 99.0th percentile estimate: 1"]
    lines += ["", "================================================", "Test Parameters Used",
              "================================================", "samples_per_query : 1", "target_qps : 1"]
    if scenario == "Server":
        lines.append(f"target_latency (ns): {target_latency_ns}")
    lines += ["min_duration (ms): 600000", "min_query_count : 20", "", "No warnings encountered during test.", ""]
    if errors:
        lines.append(f"{errors} ERRORS encountered. See detailed log.")
    return "\n".join(lines) + "\n"


def runs(tmp_path: Path, reference: str, test: str) -> tuple[Path, Path]:
    perf, t04 = tmp_path / "performance" / "run_1", tmp_path / "TEST04"
    for folder, text in ((perf, reference), (t04, test)):
        folder.mkdir(parents=True)
        (folder / "mlperf_log_summary.txt").write_text(text, encoding="utf-8")
        (folder / "mlperf_log_detail.txt").write_text(":::MLLOG {}\n", encoding="utf-8")
    return perf, t04


def verdict(tmp_path: Path, reference: str, test: str) -> str:
    perf, t04 = runs(tmp_path, reference, test)
    return test04.verify_run(t04, perf).read_text(encoding="utf-8")


def test_the_audit_config_sets_what_compliance_test04_sets_for_every_scenario_and_wans_counts():
    text = test04.audit_config({("wan-2.2-t2v-a14b", "Offline"): 20, ("wan-2.2-t2v-a14b", "SingleStream"): 20})
    for scenario in ("Offline", "Server", "SingleStream", "MultiStream"):
        for key, value in (("mode", "2"), ("performance_issue_unique", "0"), ("performance_issue_same", "1"),
                           ("performance_issue_same_index", "3")):
            assert f"*.{scenario}.{key} = {value}\n" in text
    assert audit_values(text)["performance_issue_same"] == "1"
    assert test04.audit_min_query_count(text, "wan-2.2-t2v-a14b", "Offline") == 20
    assert test04.audit_min_query_count(text, "wan-2.2-t2v-a14b", "SingleStream") == 20
    assert test04.audit_min_query_count(text, "llama2-70b", "Offline") is None  # LoadGen's "*" lines alone


def test_write_audit_config_of_test04_writes_its_text_where_loadgen_reads_it(tmp_path: Path):
    counts = {("wan-2.2-t2v-a14b", "Offline"): 20}
    path = write_audit_config("test04", tmp_path, "wan-2.2-t2v-a14b", counts)
    assert path == tmp_path / "audit.config" and path.read_text(encoding="utf-8") == test04.audit_config(counts)
    assert compliance_test("test04") is TESTS["TEST04"] and modes_of(["TEST04"]) == ("test04",)


def test_the_run_takes_the_audit_count_unless_it_is_shorter_than_the_rounds_duration():
    # a full run: the reference's SUT applies the audit's 20 in place of mlperf.conf's 248
    assert test04.run_min_query_count(20, 248, full_duration=True) == 20
    # a _short run: nothing makes up the queries, so its own 64 (SingleStream's early stopping needs them) stay
    assert test04.run_min_query_count(20, 64, full_duration=False) == 64
    assert test04.run_min_query_count(20, 8, full_duration=False) == 20


def test_offline_within_ten_percent_passes_with_the_scripts_lines(tmp_path: Path):
    text = verdict(tmp_path, summary("Offline", score=10.0), summary("Offline", score=10.9))
    assert text == ("Verifying performance.\nreference score = 10.0\ntest score = 10.9\nTEST PASS\n")
    assert test04.passes(text) and TESTS["TEST04"].failures(tmp_path / "TEST04", "wan-2.2-t2v-a14b", ()) == []


def test_a_test04_run_ten_percent_faster_fails(tmp_path: Path):
    text = verdict(tmp_path, summary("Offline", score=10.0), summary("Offline", score=11.0))
    assert text.splitlines()[-1] == "TEST FAIL: Test score invalid" and not test04.passes(text)
    assert TESTS["TEST04"].failures(tmp_path / "TEST04", "wan-2.2-t2v-a14b", ()) == [
        "verify_performance.txt: Test score invalid"]


def test_a_slower_test04_run_passes_as_the_script_only_bounds_it_above(tmp_path: Path):
    assert verdict(tmp_path, summary("Offline", score=10.0), summary("Offline", score=2.0)).endswith("TEST PASS\n")


@pytest.mark.parametrize(("reference", "test", "line"), [
    (summary("Offline", valid=False), summary("Offline"), "TEST FAIL: Reference results are invalid"),
    (summary("Offline"), summary("Offline", valid=False), "TEST FAIL: Test results are invalid"),
    (summary("Offline"), summary("SingleStream"), "TEST FAIL: Test and reference scenarios do not match!"),
    (summary("Server", target_latency_ns=10), summary("Server", target_latency_ns=20),
     "TEST FAIL: Server target latency mismatch"),
])
def test_invalid_runs_other_scenarios_and_other_latency_targets_fail(tmp_path: Path, reference: str, test: str,
                                                                     line: str):
    text = verdict(tmp_path, reference, test)
    assert text.splitlines()[-1] == line and "TEST PASS" not in text


def test_singlestream_scores_the_early_stopping_estimate_and_allows_twenty_percent(tmp_path: Path):
    # 50 ms at p90: a score of 1e9 / 5e7 = 20 (at most 200,000: 20 %); TEST04 at 42 ms scores 23.8, 19 % faster
    text = verdict(tmp_path / "a", summary("SingleStream", score=50_000_000), summary("SingleStream", score=42_000_000))
    assert "reference score = 20.0" in text and text.endswith("TEST PASS\n")
    assert verdict(tmp_path / "b", summary("SingleStream", score=50_000_000),
                   summary("SingleStream", score=41_000_000)).endswith("TEST FAIL: Test score invalid\n")
    # a latency under 5 us scores over 200,000: 10 % again
    assert verdict(tmp_path / "c", summary("SingleStream", score=4000),
                   summary("SingleStream", score=3500)).endswith("TEST FAIL: Test score invalid\n")


def test_errors_in_a_summary_are_warned_of_as_the_script_does(tmp_path: Path):
    text = verdict(tmp_path, summary("Offline", errors=2), summary("Offline"))
    assert "WARNING: 2 ERROR reported in reference results" in text.splitlines() and text.endswith("TEST PASS\n")


def test_a_failed_run_never_passes_however_its_score_compares(tmp_path: Path):
    perf, t04 = runs(tmp_path, summary("Offline"), summary("Offline"))
    HarnessResult(scenario="Offline", mode="test04", validity="FAILED", problems=["the backend died"],
                  samples_per_second=10.0, tokens_per_second=None, ttft_p99_ms=None, tpot_p99_ms=None,
                  completed_samples=20, failed_samples=20, start_seconds=0.0, test_seconds=1.0,
                  loadgen_validity="VALID").write(t04 / RESULT_JSON)
    text = test04.verify_run(t04, perf).read_text(encoding="utf-8")
    assert "TEST PASS" not in text and text.splitlines()[-1].startswith("TEST FAIL: the TEST04 run")
    assert TESTS["TEST04"].failures(t04, "wan-2.2-t2v-a14b", ())


def test_verification_refuses_without_the_performance_runs_summary(tmp_path: Path):
    (tmp_path / "TEST04").mkdir()
    (tmp_path / "TEST04" / "mlperf_log_summary.txt").write_text(summary("Offline"), encoding="utf-8")
    with pytest.raises(test04.Test04Error, match="run the performance test first"):
        test04.verify_run(tmp_path / "TEST04", tmp_path / "performance" / "run_1")


def test_cmx_check_reads_test04_where_run_verification_puts_it_and_wants_no_accuracy_log(tmp_path: Path):
    round_ = load_round("v6.1")
    paths = ResultPaths(tmp_path / "closed" / "cmx", round_.layout, "sys", "wan-2.2-t2v-a14b", "Offline")
    folder = paths.compliance("TEST04")
    assert folder == paths.result_dir / "TEST04"  # v6.x: results/<system>/<benchmark>/<scenario>/TEST04
    found: list = []
    _compliance_verdict(paths, tmp_path, found, "TEST04", "wan-2.2-t2v-a14b", ())
    assert [p.rule for p in found] == ["test04.missing"]
    (folder / "performance" / "run_1").mkdir(parents=True)
    found = []
    _compliance_verdict(paths, tmp_path, found, "TEST04", "wan-2.2-t2v-a14b", ())
    assert sorted(p.path.rsplit("/", 1)[-1] for p in found) == [
        "mlperf_log_detail.txt", "mlperf_log_summary.txt", "verify_performance.txt"]
    for name in ("mlperf_log_detail.txt", "mlperf_log_summary.txt"):
        (folder / "performance" / "run_1" / name).write_text(summary("Offline"), encoding="utf-8")
    (folder / "verify_performance.txt").write_text("Verifying performance.\nTEST FAIL: Test score invalid\n")
    found = []
    _compliance_verdict(paths, tmp_path, found, "TEST04", "wan-2.2-t2v-a14b", ())
    assert [(p.rule, p.found) for p in found] == [("test04.check", "verify_performance.txt: Test score invalid")]
    (folder / "verify_performance.txt").write_text("Verifying performance.\nTEST PASS\n")
    found = []
    _compliance_verdict(paths, tmp_path, found, "TEST04", "wan-2.2-t2v-a14b", ())
    assert found == [] and not (folder / "accuracy").exists()
    assert json.loads(json.dumps(TESTS["TEST04"].verify_files)) == ["verify_performance.txt"]


def test_the_packager_lays_test04_out_as_run_verification_does_with_no_accuracy_folder(tmp_path: Path):
    from cmx.mlperf.submission.package import _copy_compliance
    from cmx.mlperf.submission.sources import SourceResult

    scenario = tmp_path / "results" / "box" / "wan-2.2-t2v-a14b" / "SingleStream"
    run = scenario / "TEST04"
    run.mkdir(parents=True)
    for name in ("verify_performance.txt", "mlperf_log_accuracy.json", "mlperf_log_summary.txt",
                 "mlperf_log_detail.txt", "harness.log", "result.json"):
        (run / name).write_text(name)
    source = SourceResult(scenario, "box", "wan-2.2-t2v-a14b", "SingleStream", {})
    paths = ResultPaths(tmp_path / "tree", load_round("v6.1").layout, "box", "wan-2.2-t2v-a14b", "SingleStream")
    _copy_compliance(source, paths, "TEST04")
    folder = paths.compliance("TEST04")
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        "performance/run_1/mlperf_log_detail.txt", "performance/run_1/mlperf_log_summary.txt",
        "verify_performance.txt"]


# --- a real TEST04 on LoadGen --------------------------------------------------------------------------------

# early stopping's p90 estimate from 64 queries is their second highest latency, which one stall of a busy machine
# sets; from 128 it discards more of the highest, and an honest SUT's two runs agree within the 20 %
QUERIES = 128


class Caching(OneAtATime):
    """A SUT that caches its answers by prompt: the first request for a prompt takes `delay_s`, a repeat none."""

    def __init__(self, delay_s: float) -> None:
        super().__init__(delay_s)
        self.seen: set[tuple[int, ...]] = set()

    def _serve(self, request: GenRequest, sink: StreamSink) -> None:
        key = tuple(request.prompt_ids)
        if key in self.seen:
            self.delay_s, delay = 0.0, self.delay_s
            try:
                super()._serve(request, sink)
            finally:
                self.delay_s = delay
            return
        self.seen.add(key)
        super()._serve(request, sink)


def performance_then_test04(tmp_path: Path, backend: OneAtATime) -> tuple[str, LoadgenRun]:
    """The performance run, then TEST04 with cmx's audit.config: real LoadGen SingleStream runs of QUERIES queries on
    `backend`. Returns verify_performance.txt's text and the TEST04 run."""
    perf, t04 = tmp_path / "performance" / "run_1", tmp_path / "TEST04"
    run_single_stream(perf, backend, min_query_count=QUERIES, min_duration_ms=0, token_latencies=False)
    t04.mkdir(parents=True)
    audit = write_audit_config("test04", t04, "wan-2.2-t2v-a14b")
    _, run = run_single_stream(t04, backend, min_query_count=QUERIES, min_duration_ms=0, token_latencies=False,
                               audit=audit)
    return test04.verify_run(t04, perf).read_text(encoding="utf-8"), run


@pytest.mark.e2e
def test_a_real_test04_passes_an_honest_sut_and_fails_one_that_caches_its_answers(tmp_path: Path):
    honest = OneAtATime(delay_s=0.02, tokens=2)
    text, run = performance_then_test04(tmp_path / "honest", honest)
    applied = (tmp_path / "honest" / "TEST04" / "mlperf_log_summary.txt").read_text(encoding="utf-8")
    assert "performance_issue_same : 1" in applied and "performance_issue_same_index : 3" in applied  # LoadGen read it
    assert run.results.validity == "VALID"
    assert text.endswith("TEST PASS\n"), text
    cached, _ = performance_then_test04(tmp_path / "cached", Caching(delay_s=0.02))
    assert cached.endswith("TEST FAIL: Test score invalid\n"), cached


@pytest.mark.parametrize(("min_duration_ms", "own", "during"), [(600_000, 248, 20), (0, 64, 64)])
def test_the_harness_applies_the_audit_count_for_the_run_and_gives_the_settings_theirs_back(
        tmp_path: Path, min_duration_ms: int, own: int, during: int):
    import logging

    import mlperf_loadgen as lg

    from cmx.mlperf.loadgen.harness import audit_query_count

    rules = load_round("v6.1").benchmark("wan-2.2-t2v-a14b").scenario("Offline")  # min_duration 600,000 ms
    settings = lg.TestSettings()
    settings.min_query_count, settings.min_duration_ms = own, min_duration_ms
    config = HarnessConfig(model=tmp_path, dataset=tmp_path, scenario="Offline", mode="test04",
                           user_conf=tmp_path / "user.conf", output=tmp_path, round="v6.1",
                           benchmark="wan-2.2-t2v-a14b")
    write_audit_config("test04", tmp_path, "wan-2.2-t2v-a14b", {(rules.loadgen_model, "Offline"): 20})
    with audit_query_count(settings, config, rules, logging.getLogger("test04")):
        assert settings.min_query_count == during
    assert settings.min_query_count == own
    with audit_query_count(settings, replace(config, mode="test01"), rules, logging.getLogger("test04")):
        assert settings.min_query_count == own  # only TEST04's audit.config has per-model lines


def test_an_endpoint_client_result_needs_its_test04_audit_where_the_round_accepts_one(tmp_path: Path):
    from cmx.mlperf.endpoints.results import read_client_result
    from cmx.mlperf.submission.check.endpoints import _compliance, _Where

    bench = load_round("v6.1").benchmark("wan-2.2-t2v-a14b")
    folder = tmp_path / "results" / "box" / "wan-2.2-t2v-a14b" / "Offline"
    folder.mkdir(parents=True)
    at = _Where(tmp_path, read_client_result(folder))
    [missing] = _compliance(read_client_result(folder), bench, at)
    assert (missing.rule, missing.path, missing.found) == (
        "endpoints.audit", "results/box/wan-2.2-t2v-a14b/Offline/audit/audit_output_caching_test.json", "missing")
    assert _compliance(read_client_result(folder), bench, at, accepted=False) == []  # the round takes no client result
    (folder / "audit").mkdir()
    audit = folder / "audit" / "audit_output_caching_test.json"
    audit.write_text(json.dumps({"test": "output_caching_test", "passed": True}), encoding="utf-8")
    assert _compliance(read_client_result(folder), bench, at) == []
    audit.write_text(json.dumps({"test": "output_caching_test", "passed": False}), encoding="utf-8")
    assert [p.found for p in _compliance(read_client_result(folder), bench, at)] == ["the TEST04 audit did not pass"]
