"""LiveCodeBench grading of deepseek-r1 code samples: lcb_runner's testing_util rules, each program in the sandbox."""

from __future__ import annotations

import base64
import json
import pickle
import time
import zlib

import pytest

from cmx.mlperf.benchmarks.deepseek_r1.livecodebench import (
    LiveCodeBenchError,
    Problem,
    load_problems,
    problem_from_row,
    run_problems,
)
from cmx.mlperf.scoring.sandbox import SandboxUnavailable, run_program, Program

SUM = Problem("sum", ("1 2\n", "10 -4\n"), ("3\n", "6\n"), None)
HALF = Problem("half", ("1\n",), ("0.50\n",), None)
LARGEST = Problem("largest", ("[1, 5, 2]", "[7]\n3"), ("5", "7"), "largest")


@pytest.fixture(autouse=True, scope="module")
def sandbox() -> None:
    try:
        run_program(Program("python", "print(1)"))
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox here: {exc}")


def test_stdin_programs_pass_on_equal_lines_or_equal_decimals_and_fail_otherwise():
    codes = ["a, b = map(int, input().split())\nprint(a + b)",
             "print(1)",                                           # wrong on the first test
             "x = int(input())\nprint(x / 2)",                     # 0.5 and 0.50 are equal as Decimals
             "import sys\nprint(sum(map(int, sys.stdin.read().split())), '  ')\nprint()"]  # surrounding blanks
    assert run_problems(codes, [SUM, SUM, HALF, SUM], timeout_s=5) == [True, False, True, True]


def test_a_main_guard_is_unwrapped_and_sys_exit_ends_only_the_test():
    code = ("import sys\ndef main():\n    a, b = map(int, input().split())\n    print(a + b)\n    sys.exit(0)\n"
            "if __name__ == '__main__':\n    main()")
    assert run_problems([code], [SUM], timeout_s=5) == [True]


def test_call_based_tests_call_the_solution_method_and_read_tuples_as_lists():
    good = "class Solution:\n    def largest(self, nums, k=0):\n        return max(nums)"
    as_tuple = "class Solution:\n    def largest(self, nums, k=0):\n        return (max(nums),)"
    missing = "class Solution:\n    def other(self, nums):\n        return 0"
    assert run_problems([good, as_tuple, missing], [LARGEST] * 3, timeout_s=5) == [True, False, False]
    listy = Problem("pair", ("[1, 2]",), ("[2, 1]",), "flip")
    assert run_problems(["class Solution:\n    def flip(self, xs):\n        return (xs[1], xs[0])"], [listy],
                        timeout_s=5) == [True]


def test_code_that_hangs_fails_within_the_time_limit():
    start = time.monotonic()
    assert run_problems(["while True:\n    pass"], [SUM], timeout_s=1) == [False]
    assert time.monotonic() - start < (1 + 1) * 2 + 5 + 5


def test_the_reliability_guard_takes_away_os_system_as_the_reference_does():
    code = "import os\nos.system('true')\nprint(3)"
    assert run_problems([code], [Problem("one", ("\n",), ("3\n",), None)], timeout_s=5) == [False]


def test_private_tests_are_decoded_from_base64_zlib_pickle_and_a_class_pickle_is_refused(tmp_path):
    tests = [{"input": "1 1\n", "output": "2\n", "testtype": "stdin"}]
    private = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()
    row = {"question_id": "q1", "public_test_cases": json.dumps(tests), "private_test_cases": private,
           "metadata": "{}"}
    problem = problem_from_row(row)
    assert problem.inputs == ("1 1\n", "1 1\n") and problem.fn_name is None
    evil = base64.b64encode(zlib.compress(pickle.dumps(Problem("x", (), (), None)))).decode()
    with pytest.raises(LiveCodeBenchError, match="text only"):
        problem_from_row({**row, "private_test_cases": evil})
    path = tmp_path / "test.jsonl"
    path.write_text(json.dumps(row) + "\n\n", encoding="utf-8")
    assert list(load_problems([path])) == ["q1"]
    path.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(LiveCodeBenchError, match="test.jsonl:1 is not JSON"):
        load_problems([path])
