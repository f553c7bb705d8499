"""No compliance file says PASS for a test whose runs failed: TEST01, TEST06, TEST07 and TEST09 verified on runs
whose samples all failed (a server answering 500 to every request: each answered empty), on runs the harness judged
FAILED or that completed no sample, and on logs of empty answers alone; each file says TEST FAIL with the reason,
and the judges the packager and `cmx check` use report it. The records are the harness's own (HarnessResult's
result.json), the LoadGen logs real ones (tests/data/loadgen)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cmx.mlperf.loadgen import test01, test06, test07, test09
from cmx.mlperf.loadgen.compliance import compliance_test
from cmx.mlperf.loadgen.harness_config import HarnessResult
from cmx.mlperf.loadgen.run_record import FAILED, RESULT_JSON, run_failures
from tests.conftest import REPO

LOGS = REPO / "tests" / "data" / "loadgen"
SAMPLES = 64


def record(folder: Path, mode: str, *, failed: int = 0, completed: int = SAMPLES, validity: str | None = "VALID",
           problems: tuple[str, ...] = ()) -> Path:
    """The harness's result.json for a run in `folder`: what it writes when `failed` samples failed in the backend."""
    if failed and not problems:
        problems = (f"the server failed POST /audio/transcriptions with HTTP 500: TEST PASS ({failed} of {completed} "
                    "samples failed in the backend and were answered empty)",)
    folder.mkdir(parents=True, exist_ok=True)
    return HarnessResult(scenario="Offline", mode=mode, validity=FAILED if failed else validity,
                         problems=list(problems), samples_per_second=500.0, tokens_per_second=None, ttft_p99_ms=None,
                         tpot_p99_ms=None, completed_samples=completed, failed_samples=failed, start_seconds=0.0,
                         test_seconds=1.0, loadgen_validity="VALID").write(folder / RESULT_JSON)


def empty_log(folder: Path, n: int = SAMPLES) -> Path:
    """mlperf_log_accuracy.json of `n` samples each answered empty, as LoadGen logs a failed sample."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "mlperf_log_accuracy.json"
    path.write_text(json.dumps([{"seq_id": i, "qsl_idx": i, "data": "", "token_count": 0} for i in range(n)]))
    return path


def runs_for_test01(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A TEST01 run, its accuracy run and its performance run: 64 empty answers in each accuracy log, the same
    (real, VALID) LoadGen performance log in both performance folders, so that everything the scripts compare
    agrees."""
    accuracy, performance, output = tmp_path / "accuracy", tmp_path / "performance", tmp_path / "TEST01"
    for folder in (performance, output):
        shutil.copytree(LOGS / "offline-perf", folder)
    empty_log(accuracy)
    empty_log(output)
    return output, accuracy, performance


def verify01(output: Path, accuracy: Path, performance: Path) -> tuple[str, str]:
    test01.verify_run(output, accuracy, performance, output / "no-dataset", output / "no-tokenizer",
                      benchmark="whisper")
    return ((output / "verify_accuracy.txt").read_text(), (output / "verify_performance.txt").read_text())


def test_test01_of_runs_whose_every_sample_failed_says_fail_with_the_reason(tmp_path: Path) -> None:
    output, accuracy, performance = runs_for_test01(tmp_path)
    record(output, "test01", failed=SAMPLES)
    record(accuracy, "accuracy", failed=SAMPLES, validity=None)
    record(performance, "performance", failed=SAMPLES)
    acc, perf = verify01(output, accuracy, performance)
    for text in (acc, perf):
        assert "TEST PASS" not in text  # though the script's counts match (64 = 64) and the scores are equal
        assert "TEST FAIL: the TEST01 run failed: 64 of 64 samples failed in the backend and were answered empty" \
            in text
    assert "TEST FAIL: the accuracy run failed: 64 of 64 samples" in acc and "performance run" not in acc
    assert "TEST FAIL: the performance run failed: 64 of 64 samples" in perf
    assert "Reference score = " in perf and not (output / "baseline_accuracy.txt").exists()  # no Part III
    why = compliance_test("TEST01").failures(output, "whisper", ("accuracy",))
    assert why[0] == ("verify_accuracy.txt: the TEST01 run failed: 64 of 64 samples failed in the backend and were "
                      "answered empty (its result.json says why)")
    assert any(w.startswith("verify_performance.txt does not say TEST PASS: the TEST01 run failed") for w in why)
    assert not any("Part III" in w for w in why)


def test_test01_of_empty_answers_alone_fails_though_the_script_counts_them_as_matches(tmp_path: Path) -> None:
    output, accuracy, performance = runs_for_test01(tmp_path)  # no result.json: logs from elsewhere, judged as they are
    acc, perf = verify01(output, accuracy, performance)
    assert "num_perf_log_qsl_idx_match = 64\nnum_perf_log_data_mismatch = 0\n" in acc
    assert acc.rstrip().splitlines()[-1] == ("TEST FAIL: every one of the 64 sampled outputs is empty in both runs: "
                                             "failed samples, not equal outputs") and "TEST PASS" not in acc
    assert perf.endswith("TEST PASS\n")  # the same VALID score: performance is not what failed here
    assert compliance_test("TEST01").failures(output, "whisper", ("accuracy",)) == [
        "verify_accuracy.txt: every one of the 64 sampled outputs is empty in both runs: failed samples, not equal "
        "outputs"]
    # one real match among empty ones still passes, as the script has it (a refused chat is answered empty in both)
    mixed = [test01.AccuracyRecord(i, i, b"" if i else (7).to_bytes(8, "little")) for i in range(3)]
    assert test01.compare_outputs(mixed, mixed, "int64").passed


@pytest.mark.parametrize(("mode", "kwargs", "said"), [
    ("accuracy", {"validity": FAILED, "problems": ("mlperf_log_detail.txt has 2 errors",)},
     "the accuracy run failed (its result.json says why)"),
    ("accuracy", {"completed": 0, "validity": None}, "the accuracy run completed no sample"),
])
def test_test01_against_an_accuracy_run_that_failed_or_ran_nothing_fails(tmp_path: Path, mode: str,
                                                                          kwargs: dict, said: str) -> None:
    output, accuracy, performance = runs_for_test01(tmp_path)
    record(accuracy, mode, **kwargs)
    acc, _ = verify01(output, accuracy, performance)
    assert f"TEST FAIL: {said}" in acc and "TEST PASS" not in acc


def test_test06_of_empty_answers_fails_its_length_check_and_of_a_failed_run_writes_no_check(tmp_path: Path) -> None:
    log = empty_log(tmp_path / "TEST06")
    empty = test06.verify(log, "Offline")  # no result.json: the records alone
    assert not empty.passed and empty.sample_length.passed is False
    assert "sample qsl_idx 0 (seq_id 0) logged no tokens: the sample failed and was answered empty" in \
        empty.problems
    assert not test06.verify_accuracy_txt_passes(test06.format_verify_accuracy_txt(empty))
    record(log.parent, "test06", failed=SAMPLES)
    failed = test06.verify(log, "Offline")
    text = test06.format_verify_accuracy_txt(failed)
    assert text == ("TEST FAIL: the TEST06 run failed: 64 of 64 samples failed in the backend and were answered empty "
                    "(its result.json says why)\nTEST06 verification failed\n")
    assert "check pass" not in text  # the official checker needs its three check lines: it fails the file too
    (log.parent / "verify_accuracy.txt").write_text(text)
    assert compliance_test("TEST06").failures(log.parent, "llama2-70b-99", ()) == [
        "verify_accuracy.txt: the TEST06 run failed: 64 of 64 samples failed in the backend and were answered empty "
        "(its result.json says why)"]


def test_test07_of_a_failed_run_is_not_scored_and_fails(tmp_path: Path) -> None:
    folder = tmp_path / "TEST07"
    empty_log(folder)
    record(folder, "test07", failed=SAMPLES)
    path = test07.verify_run(folder, tmp_path / "no-dataset", tmp_path / "no-tokenizer", benchmark="gpt-oss-120b")
    text = path.read_text()
    assert "TEST PASS" not in text and "TEST FAIL: the TEST07 run failed: 64 of 64 samples" in text
    assert compliance_test("TEST07").failures(folder, "gpt-oss-120b", ())[0].startswith(
        "verify_accuracy.txt: the TEST07 run failed: 64 of 64 samples")


def test_test09_of_a_failed_run_fails_whatever_its_lengths(tmp_path: Path) -> None:
    folder = tmp_path / "TEST09"
    folder.mkdir()
    low, high = test09.bounds(test07.audit_config("TEST09", "gpt-oss-120b"))
    n = int((low + high) / 2)  # each logged output's length within the bounds: the check alone would pass
    entries = [{"seq_id": i, "qsl_idx": i, "data": (b"\x07\x00\x00\x00" * n).hex()} for i in range(4)]
    (folder / "mlperf_log_accuracy.json").write_text(json.dumps(entries))
    assert test09.passes(test09.verify_run(folder, benchmark="gpt-oss-120b").read_text())  # no record: it passes
    record(folder, "test09", failed=3, completed=7)
    text = test09.verify_run(folder, benchmark="gpt-oss-120b").read_text()
    assert "TEST PASS" not in text and text.rstrip().endswith(
        "TEST FAIL: the TEST09 run failed: 3 of 7 samples failed in the backend and were answered empty (its "
        "result.json says why)")
    assert compliance_test("TEST09").failures(folder, "gpt-oss-120b", ())[0].startswith(
        "verify_output_len.txt: the TEST09 run failed: 3 of 7")


def test_a_server_message_never_reaches_a_verification_file(tmp_path: Path) -> None:
    # the harness's problems quote the server ("... HTTP 500: TEST PASS"): the reasons are counts and names only
    record(tmp_path, "test07", failed=2)
    assert run_failures(tmp_path, "the TEST07 run") == [
        "the TEST07 run failed: 2 of 64 samples failed in the backend and were answered empty (its result.json says "
        "why)"]
    (tmp_path / RESULT_JSON).write_text("{not json")
    assert run_failures(tmp_path, "the TEST07 run") == ["the TEST07 run's result.json cannot be read: run it again"]
