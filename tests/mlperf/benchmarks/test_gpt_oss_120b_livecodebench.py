"""gpt-oss-120b's own part of LiveCodeBench grading: the problems' folder, rows by index (grading:
tests/mlperf/scoring)."""

from __future__ import annotations

import json

import pytest

from cmx.mlperf.benchmarks.gpt_oss_120b.livecodebench import RELEASE, read_problems, run_rows
from cmx.mlperf.scoring.livecodebench import LiveCodeBenchError, Problem, encode_private_tests
from cmx.mlperf.scoring.sandbox import SandboxUnavailable, check_language

STDIN = Problem("s", ("1 2\n", "0.5 0.25\n"), ("3\n", "0.75\n"), None)


def test_rows_are_answered_by_index_and_crashes_exits_and_unknown_questions_fail():
    try:
        check_language("python")
        run_rows([], {})
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox here: {exc}")
    crash = "raise ValueError('x')"
    sneaky = "import os\nos._exit(0)\n"  # cannot end the harness with a passing status
    good = "a, b = map(float, input().split())\ns = a + b\nprint(int(s) if s == int(s) else s)"
    result = run_rows([(4, crash, "s"), (7, sneaky, "s"), (2, "print(3)", "nope"), (9, good, "s")], {"s": STDIN})
    assert result == {4: False, 7: False, 2: False, 9: True}
    assert run_rows([], {}) == {}


def test_problems_are_read_from_the_folders_code_generation_lite_files(tmp_path):
    row = {"question_id": "q9",
           "public_test_cases": json.dumps([{"input": "1\n", "output": "1\n", "testtype": "stdin"}]),
           "private_test_cases": encode_private_tests([{"input": "2\n", "output": "2\n", "testtype": "stdin"}]),
           "metadata": "{}"}
    (tmp_path / "test6.jsonl").write_text(json.dumps(row) + "\n")
    assert read_problems(tmp_path) == {"q9": Problem("q9", ("1\n", "2\n"), ("1\n", "2\n"), None)}
    with pytest.raises(LiveCodeBenchError, match="no LiveCodeBench problems") as caught:
        read_problems(tmp_path / "empty")
    assert RELEASE in caught.value.hint and "lcb_path" in caught.value.hint
    (tmp_path / "test7.jsonl").write_text(json.dumps({"question_id": "x"}) + "\n")
    with pytest.raises(LiveCodeBenchError, match=r"test7.jsonl:1: problem 'x' is not a LiveCodeBench"):
        read_problems(tmp_path)
