"""Compliance TEST01: the audit.config, verify_accuracy.py's and verify_performance.py's verdicts and files, the Part
III fallback, and the submission checker's verdict on a TEST01 folder."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from cmx.mlperf.loadgen import test01
from cmx.mlperf.loadgen.accuracy_log import AccuracyRecord
from cmx.mlperf.loadgen.test07 import audit_values
from tests.conftest import REPO

LOGS = REPO / "tests" / "data" / "loadgen"


def rec(qsl_idx: int, *values: int, width: int = 8, seq_id: int = 0) -> AccuracyRecord:
    return AccuracyRecord(seq_id, qsl_idx, b"".join(v.to_bytes(width, "little", signed=True) for v in values))


def test_the_audit_config_samples_outputs_in_performance_mode_with_the_references_seed() -> None:
    values = audit_values(test01.audit_config("whisper"))
    assert values == {"mode": "2", "accuracy_log_rng_seed": "720381539243781796",
                      "accuracy_log_sampling_target": "4096"}
    assert test01.audit_config("whisper").startswith("# The format of this config file is 'key = value'.")
    with pytest.raises(test01.Test01Error, match=r"no TEST01 audit\.config for llama2-70b-99"):
        test01.audit_config("llama2-70b-99")


def test_outputs_match_on_their_first_element_as_verify_accuracy_reads_them() -> None:
    accuracy = [rec(0, 5, 6), rec(1, 7), rec(2), rec(1, 7)]  # a repeat of sample 1, the same output
    same = test01.compare_outputs(accuracy, [rec(0, 5, 9), rec(2)], "int64")  # only the first element counts
    assert same.passed and (same.perf_log_qsl_idx_match, same.perf_log_data_mismatch) == (2, 0)
    assert (same.acc_log_entries, same.acc_log_duplicate_keys, same.acc_log_data_mismatch) == (4, 1, 0)
    differ = test01.compare_outputs(accuracy, [rec(0, 4), rec(2, 1), rec(9, 1)], "int64")
    assert not differ.passed
    assert (differ.perf_log_data_mismatch, differ.missing_qsl_idxs, differ.perf_log_qsl_idx_match) == (2, 1, 2)
    # read as int32, an int64 label's first element is its low half: 2**32 + 5 and 5 look the same
    assert test01.compare_outputs([rec(0, 5)], [rec(0, 2**32 + 5)], "int32").passed
    assert not test01.compare_outputs([rec(0, 5)], [rec(0, 2**32 + 5)], "int64").passed
    nothing_matched = test01.compare_outputs(accuracy, [rec(7, 1)], "int64")
    assert not nothing_matched.passed and nothing_matched.perf_log_data_mismatch == 0
    with pytest.raises(test01.Test01Error, match="not a whole number of int64"):
        test01.compare_outputs([rec(0, 5, width=4)], [rec(0, 5, width=4)], "int64")


def test_verify_accuracy_txt_is_the_scripts_output_line_for_line() -> None:
    text = test01.format_verify_accuracy_txt(test01.compare_outputs([rec(0, 5), rec(0, 5)], [rec(0, 5)], "int64"))
    assert text == ("Verifying accuracy. This might take a while...\nReading accuracy mode results...\n"
                    "Reading performance mode results...\nnum_acc_log_entries = 2\nnum_acc_log_duplicate_keys = 1\n"
                    "num_acc_log_data_mismatch = 0\nnum_perf_log_entries = 1\nnum_perf_log_qsl_idx_match = 1\n"
                    "num_perf_log_data_mismatch = 0\nnum_missing_qsl_idxs = 0\nTEST PASS\n\n")


def _perf(tmp_path: Path, name: str, score: float, source: str = "offline-perf") -> Path:
    folder = tmp_path / name
    shutil.copytree(LOGS / source, folder)
    detail = folder / "mlperf_log_detail.txt"
    detail.write_text(re.sub(r'("key": "result_samples_per_second", "value": )[\d.]+', rf"\g<1>{score}",
                             detail.read_text()))
    return detail


def test_the_test01_score_must_be_within_ten_percent_of_the_performance_runs(tmp_path: Path) -> None:
    ref = _perf(tmp_path, "ref", 100.0)
    for score, ok in ((90.0, True), (110.0, True), (89.9, False), (110.1, False)):
        got = test01.compare_performance(ref, _perf(tmp_path, f"t{score}", score))
        assert got.passed is ok, score
    passed = test01.format_verify_performance_txt(test01.compare_performance(ref, _perf(tmp_path, "t2", 95.5)))
    assert passed == "Verifying performance.\nReference score = 100.0\nTest score = 95.5\nTEST PASS\n"
    failed = test01.compare_performance(ref, _perf(tmp_path, "t3", 50.0))
    assert test01.format_verify_performance_txt(failed).endswith("TEST FAIL: Test score invalid\n")
    invalid = test01.compare_performance(ref, LOGS / "invalid" / "mlperf_log_detail.txt")
    assert invalid.failure == f"TEST FAIL: Invalid results in {LOGS / 'invalid' / 'mlperf_log_detail.txt'}"
    other = test01.compare_performance(ref, LOGS / "server-perf" / "mlperf_log_detail.txt")
    assert other.failure == "TEST FAIL: Test and reference scenarios do not match!"


def test_part_iii_passes_when_the_two_scores_are_within_one_percent() -> None:
    assert test01.within_delta({"accuracy": 97.0}, {"accuracy": 97.5}, ["accuracy"], 1.0) == []
    far = test01.within_delta({"accuracy": 95.0}, {"accuracy": 97.5}, ["accuracy"], 1.0)
    assert len(far) == 1 and "2.564 % apart (at most 1.0 %)" in far[0]
    assert "both nonzero" in test01.within_delta({"accuracy": 0.0}, {"accuracy": 0.0}, ["accuracy"], 1.0)[0]
    assert (test01.delta_percent("whisper"), test01.delta_percent("llama2-70b-99.9")) == (1.0, 0.1)


def test_the_baseline_is_the_accuracy_runs_records_of_the_sampled_samples(tmp_path: Path) -> None:
    accuracy = [rec(0, 1, seq_id=0), rec(1, 2, seq_id=1), rec(2, 3, seq_id=2), rec(1, 2, seq_id=3)]
    picked = test01.baseline_records(accuracy, [rec(1, 9), rec(2, 9)])
    assert [r.seq_id for r in picked] == [1, 2, 3]
    written = json.loads(test01.write_accuracy_log(picked, tmp_path / "baseline.json").read_text())
    assert written[0] == {"seq_id": 1, "qsl_idx": 1, "data": "0200000000000000"}


def _folder(tmp_path: Path, verify_accuracy: str, verify_performance: str | None = "TEST PASS\n",
            baseline: float | None = None, compliance: float | None = None) -> Path:
    folder = tmp_path / "TEST01"
    (folder / "accuracy").mkdir(parents=True)
    (folder / "verify_accuracy.txt").write_text(verify_accuracy)
    if verify_performance is not None:
        (folder / "verify_performance.txt").write_text(verify_performance)
    for name, value in (("baseline_accuracy.txt", baseline), ("compliance_accuracy.txt", compliance)):
        if value is not None:
            (folder / "accuracy" / name).write_text(f"Word Error Rate: {100 - value}%, accuracy={value}%\n")
    return folder


def test_the_checker_accepts_a_pass_or_scores_within_the_delta_and_refuses_the_rest(tmp_path: Path) -> None:
    def failures(*args, **kwargs) -> list[str]:
        shutil.rmtree(tmp_path / "TEST01", ignore_errors=True)
        return test01.checker_failures(_folder(tmp_path, *args, **kwargs), "whisper", ("accuracy",))

    assert failures("num_missing_qsl_idxs = 0\nTEST PASS\n\n") == []
    assert failures("TEST FAIL\n", baseline=97.0, compliance=97.4) == []
    assert "apart" in failures("TEST FAIL\n", baseline=90.0, compliance=97.4)[0]
    assert "there is no baseline_accuracy.txt" in failures("TEST FAIL\n", compliance=97.4)[0]
    assert failures("TEST PASS\n", verify_performance="Verifying performance.\nTEST FAIL: Test score invalid\n") == [
        "verify_performance.txt does not say TEST PASS: Test score invalid"]
    assert failures("TEST PASS\n", verify_performance="Verifying performance.\nTEST FAIL\n") == [
        "verify_performance.txt does not say TEST PASS: the TEST01 run's score is not within 10 % of the "
        "performance run's, or a run is INVALID"]
    assert failures("TEST PASS\n", verify_performance=None) == [
        "verify_performance.txt is missing: run the TEST01 verification"]
