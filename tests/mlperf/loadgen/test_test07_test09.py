"""Compliance TEST07 and TEST09: the audit.config files as mlcommons/inference has them, the verifications as its
run_verification.py scripts compute and write them, and the verdicts cmx check and the packager read (TEST01's
too)."""

from __future__ import annotations

import json
from array import array
from pathlib import Path

import pytest

from cmx.mlperf.loadgen import test07, test09
from cmx.mlperf.loadgen.compliance import TESTS, UnknownComplianceTest, compliance_test, modes_of, write_audit_config
from cmx.mlperf.rounds import load_round
from cmx.mlperf.submission.check.result import _compliance_verdict
from cmx.mlperf.submission.tree import ResultPaths


def test_the_gpt_oss_audit_configs_set_what_compliance_sets():
    t07 = test07.audit_values(test07.audit_config("TEST07", "gpt-oss-120b"))
    assert {k: t07[k] for k in ("mode", "accuracy_log_rng_seed", "accuracy_log_sampling_target", "min_query_count",
                                "min_duration", "performance_issue_unique", "sample_concatenate_permutation")} == {
        "mode": "2", "accuracy_log_rng_seed": "720381539243781796", "accuracy_log_sampling_target": "990",
        "min_query_count": "990", "min_duration": "0", "performance_issue_unique": "1",
        "sample_concatenate_permutation": "0"}
    assert test07.threshold(test07.audit_config("TEST07", "gpt-oss-120b")) == 60.698
    text09 = test07.audit_config("TEST09", "gpt-oss-120b")
    assert test09.bounds(text09) == (1150.38, 1406.02)  # 1278.2 x 0.9 and x 1.1
    assert test07.audit_values(text09)["min_query_count"] == "6396"
    with pytest.raises(test07.ComplianceAuditMissing, match=r"no TEST07 audit.config for llama2-70b-99"):
        test07.audit_config("TEST07", "llama2-70b-99")


def test_inline_comments_after_a_value_are_dropped_as_test09s_parser_does():
    assert test09.bounds("*.*.test09_min_output_tokens = 10 # low\n*.*.test09_max_output_tokens = 20\n") == (10, 20)
    with pytest.raises(test07.ComplianceAuditMissing, match="test09_max_output_tokens"):
        test09.bounds("*.*.test09_min_output_tokens = 10\n")


def test_test07_passes_at_the_threshold_and_writes_the_scripts_summary():
    at = test07.verify({"exact_match": 60.698, "tokens_per_sample": 900.0}, 60.698)
    assert at.passed and at.score == 60.698
    text = test07.format_verify_accuracy_txt({"exact_match": 60.698, "tokens_per_sample": 900.0}, at)
    assert "'exact_match': 60.698" in text and "Accuracy check pass: True" in text and text.endswith("TEST PASS\n")
    assert test07.passes(text)
    below = test07.verify({"exact_match": 60.697}, 60.698)
    failed = test07.format_verify_accuracy_txt({"exact_match": 60.697}, below)
    assert not below.passed and "TEST FAIL" in failed and not test07.passes(failed)
    missing = test07.verify({"rougeL": 1.0}, 60.698)  # no exact_match: the score cannot be parsed
    assert missing.score is None and "Could not parse accuracy score" in test07.format_verify_accuracy_txt(
        {"rougeL": 1.0}, missing)


def _log(path: Path, lengths: list[int], extra: list[dict] | None = None) -> Path:
    records = [{"seq_id": i, "qsl_idx": i, "data": array("i", range(n)).tobytes().hex()} for i, n in enumerate(lengths)]
    path.write_text(json.dumps(records + (extra or [])))
    return path


def test_test09_checks_the_mean_output_length_within_its_bounds(tmp_path):
    # lengths 100, 200, 300 and a record with no data (counted 0, as run_verification.py does): mean 150
    result = test09.verify(_log(tmp_path / "log.json", [100, 200, 300], [{"seq_id": 9, "qsl_idx": 9, "data": ""}]),
                           140.0, 160.0)
    assert result.lengths == (100, 200, 300, 0) and result.mean == 150.0 and result.passed
    text = test09.format_verify_output_len_txt(result)
    assert "Total samples: 4" in text and "Mean output tokens: 150.00" in text and "Std deviation: 111.80" in text
    assert text.endswith("TEST PASS\n") and test09.passes(text)
    short = test09.verify(tmp_path / "log.json", 151.0, 160.0)
    assert not short.passed and not short.min_ok and short.max_ok
    assert "Min check pass: False" in test09.format_verify_output_len_txt(short)


def test_verify_run_writes_the_verification_file_beside_the_run(tmp_path):
    _log(tmp_path / "mlperf_log_accuracy.json", [1200, 1300])
    path = test09.verify_run(tmp_path, benchmark="gpt-oss-120b")
    assert path.name == "verify_output_len.txt" and test09.passes(path.read_text())


def test_the_round_lists_the_tests_the_app_runs_and_the_harness_configures(tmp_path):
    assert modes_of(load_round("v6.0").benchmark("gpt-oss-120b").compliance_tests) == ("test07", "test09")
    assert modes_of(load_round("v6.0").benchmark("llama3.1-8b").compliance_tests) == ("test06",)
    assert modes_of(load_round("v6.1").benchmark("whisper").compliance_tests) == ("test01",)
    assert compliance_test("test09").verify_files == ("verify_output_len.txt",) and TESTS["TEST07"].copies_performance
    with pytest.raises(UnknownComplianceTest):
        compliance_test("TEST08")  # dlrm-v3's, which cmx does not run
    written = write_audit_config("test07", tmp_path, "gpt-oss-120b")
    assert written.name == "audit.config" and "test07_accuracy_threshold = 60.698" in written.read_text()
    assert "accuracy_log_sampling_target = 100" in write_audit_config("test06", tmp_path, "llama3.1-8b").read_text()


def _test01_folder(f: Path, accuracy: str = "TEST PASS\n\n", performance: str = "TEST PASS\n") -> None:
    (f / "verify_accuracy.txt").write_text(f"num_missing_qsl_idxs = 0\n{accuracy}")
    (f / "verify_performance.txt").write_text(f"Verifying performance.\n{performance}")
    (f / "performance" / "run_1").mkdir(parents=True)
    for log in ("mlperf_log_summary.txt", "mlperf_log_detail.txt"):
        (f / "performance" / "run_1" / log).write_text(":::MLLOG {}\n")


def _test04_folder(f: Path, performance: str = "TEST PASS\n") -> None:
    (f / "verify_performance.txt").write_text(f"Verifying performance.\n{performance}")
    (f / "performance" / "run_1").mkdir(parents=True)
    for log in ("mlperf_log_summary.txt", "mlperf_log_detail.txt"):
        (f / "performance" / "run_1" / log).write_text(":::MLLOG {}\n")


# (test, benchmark, how its folder is made (None: no folder), the rule cmx check breaks, None when it passes);
# tests/mlperf/submission/test_check.py counts these rules as caught
VERDICT_CASES = [
    ("TEST07", "gpt-oss-120b", None, "test07.missing"),
    ("TEST09", "gpt-oss-120b", lambda f: None, "test09.missing"),
    ("TEST07", "gpt-oss-120b",
     lambda f: (f / "verify_accuracy.txt").write_text("TEST07 Verification Summary\nTEST FAIL\n"), "test07.check"),
    ("TEST09", "gpt-oss-120b", lambda f: (f / "verify_output_len.txt").write_text("Mean output tokens: 3\nTEST FAIL\n"),
     "test09.check"),
    ("TEST09", "gpt-oss-120b", lambda f: (f / "verify_output_len.txt").write_text("TEST PASS\n"), None),
    ("TEST01", "whisper", _test01_folder, None),
    ("TEST01", "whisper", None, "test01.missing"),
    ("TEST01", "whisper", lambda f: (f / "verify_accuracy.txt").write_text("TEST PASS\n"), "test01.missing"),
    ("TEST01", "whisper", lambda f: _test01_folder(f, performance="TEST FAIL: Test score invalid\n"), "test01.check"),
    ("TEST01", "whisper", lambda f: _test01_folder(f, accuracy="TEST FAIL\n"), "test01.check"),
    ("TEST04", "whisper", _test04_folder, None),
    ("TEST04", "whisper", None, "test04.missing"),
    ("TEST04", "whisper", lambda f: (f / "verify_performance.txt").write_text("TEST PASS\n"), "test04.missing"),
    ("TEST04", "whisper", lambda f: _test04_folder(f, performance="TEST FAIL: Test score invalid\n"), "test04.check"),
]


@pytest.mark.parametrize(("name", "benchmark", "build", "rule"), VERDICT_CASES)
def test_cmx_check_wants_each_tests_folder_log_and_pass(tmp_path, name, benchmark, build, rule):
    paths = ResultPaths(tmp_path, load_round("v6.0").layout, "box", benchmark, "Offline")
    folder = paths.compliance(name)
    if build is not None:
        (folder / "accuracy").mkdir(parents=True)
        (folder / "accuracy" / "mlperf_log_accuracy.json").write_text("[]")
        build(folder)
    found: list = []
    metrics = load_round("v6.0").benchmark(benchmark).accuracy.metrics
    _compliance_verdict(paths, tmp_path, found, name, benchmark, metrics)
    assert {p.rule for p in found} == ({rule} if rule else set()), [p.line() for p in found]


def test_the_packager_lays_out_each_tests_folder_as_its_run_verification_does(tmp_path):
    from cmx.mlperf.submission.package import _copy_compliance
    from cmx.mlperf.submission.sources import SourceResult

    scenario = tmp_path / "results" / "box" / "gpt-oss-120b" / "Offline"
    for folder, verify in (("TEST07", "verify_accuracy.txt"), ("TEST09", "verify_output_len.txt")):
        run = scenario / folder
        run.mkdir(parents=True)
        for name in (verify, "mlperf_log_accuracy.json", "mlperf_log_summary.txt", "mlperf_log_detail.txt",
                     "harness.log"):
            (run / name).write_text(name)
    source = SourceResult(scenario, "box", "gpt-oss-120b", "Offline", {})
    paths = ResultPaths(tmp_path / "tree", load_round("v6.0").layout, "box", "gpt-oss-120b", "Offline")
    for name in ("TEST07", "TEST09"):
        _copy_compliance(source, paths, name)
    files = sorted(str(p.relative_to(paths.compliance("TEST07").parent)) for p in
                   paths.compliance("TEST07").parent.rglob("*") if p.is_file())
    assert [f for f in files if f.startswith("TEST0")] == [
        "TEST07/accuracy/mlperf_log_accuracy.json", "TEST07/performance/run_1/mlperf_log_detail.txt",
        "TEST07/performance/run_1/mlperf_log_summary.txt", "TEST07/verify_accuracy.txt",
        "TEST09/accuracy/mlperf_log_accuracy.json", "TEST09/performance/run_1/mlperf_log_detail.txt",
        "TEST09/performance/run_1/mlperf_log_summary.txt", "TEST09/verify_output_len.txt"]
