"""deepseek-r1's own part of LiveCodeBench grading: the tests file beside the pickle (grading: tests/mlperf/scoring)."""

from __future__ import annotations

import json

import pytest

from cmx.mlperf.benchmarks.deepseek_r1.livecodebench import RELEASE, load_tests
from cmx.mlperf.scoring.livecodebench import LiveCodeBenchError, Problem, encode_private_tests


def test_the_tests_file_is_read_by_question_id_and_a_missing_one_says_which_recipe_writes_it(tmp_path):
    tests = [{"input": "1 1\n", "output": "2\n", "testtype": "stdin"}]
    row = {"question_id": "q1", "public_test_cases": json.dumps(tests),
           "private_test_cases": encode_private_tests(tests), "metadata": "{}"}
    path = tmp_path / "livecodebench_tests.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert load_tests(path) == {"q1": Problem("q1", ("1 1\n", "1 1\n"), ("2\n", "2\n"), None)}
    with pytest.raises(LiveCodeBenchError, match="cannot read") as caught:
        load_tests(tmp_path / "absent.jsonl")
    assert 'cmx run "get dataset deepseek-r1"' in caught.value.hint
    assert RELEASE == "release_v1"
