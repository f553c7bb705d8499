"""LiveCodeBench rows graded as lcb_runner grades them, each program run in the sandbox (real subprocesses)."""

from __future__ import annotations

import json

import pytest

from cmx.mlperf.benchmarks.gpt_oss_120b.livecodebench import (
    LiveCodeBenchMissing,
    Problem,
    encode_private_tests,
    parse_problem,
    read_problems,
    run_rows,
)
from cmx.mlperf.scoring.sandbox import SandboxUnavailable, check_language


@pytest.fixture(scope="module", autouse=True)
def _sandbox() -> None:
    try:
        check_language("python")
        run_rows([], {})
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox here: {exc}")


STDIN = Problem("s", ("1 2\n", "0.5 0.25\n"), ("3\n", "0.75\n"), None)
CALL = Problem("c", ("[1, 5, 2]", "[3, 4]\n2"), ("5", "[3, 4]"), "pick")


def test_standard_input_programs_pass_on_exact_or_decimal_equal_lines():
    wrong_on_integers = "import sys\nprint(sum(map(float, sys.stdin.read().split())) if '.' in open(0).read() else 0)\n"
    lines = ("a, b = input().split()\n"
             "s = float(a) + float(b)\n"
             "print(int(s) if s == int(s) else s)\n")
    result = run_rows([(0, lines, "s"), (1, "print(3)", "s"), (2, wrong_on_integers, "s")], {"s": STDIN})
    # row 0: "3" and "0.75" match; row 1 fails the second test; row 2 prints 0 for "1 2"
    assert result == {0: True, 1: False, 2: False}


def test_a_main_guard_is_unwrapped_as_lcb_runner_does():
    code = "def main():\n    a, b = map(float, input().split())\n    s = a + b\n    print(int(s) if s == int(s) else s)\n\nif __name__ == '__main__':\n    main()\n"
    assert run_rows([(0, code, "s")], {"s": STDIN}) == {0: True}


def test_call_based_programs_call_solution_methods_with_json_arguments():
    good = "class Solution:\n    def pick(self, nums, k=None):\n        return (nums[0], nums[1]) if k else max(nums)\n"
    wrong = "class Solution:\n    def pick(self, nums, k=None):\n        return 0\n"
    missing = "class Solution:\n    def other(self, nums):\n        return 1\n"
    result = run_rows([(0, good, "c"), (1, wrong, "c"), (2, missing, "c")], {"c": CALL})
    assert result == {0: True, 1: False, 2: False}  # a tuple is compared as a list


def test_crashes_exits_and_unknown_questions_fail():
    crash = "raise ValueError('x')"
    sneaky = "import os\nos._exit(0)\n"  # cannot end the harness with a passing status
    result = run_rows([(0, crash, "s"), (1, sneaky, "s"), (2, "print(3)", "nope")], {"s": STDIN})
    assert result == {0: False, 1: False, 2: False}


def test_problems_read_from_code_generation_lite_rows_with_compressed_private_tests(tmp_path):
    row = {"question_id": "q9", "public_test_cases": json.dumps([{"input": "1\n", "output": "1\n", "testtype": "stdin"}]),
           "private_test_cases": encode_private_tests([{"input": "2\n", "output": "2\n", "testtype": "stdin"}]),
           "metadata": "{}"}
    (tmp_path / "test6.jsonl").write_text(json.dumps(row) + "\n")
    assert read_problems(tmp_path) == {"q9": Problem("q9", ("1\n", "2\n"), ("1\n", "2\n"), None)}
    plain = dict(row, private_test_cases="[]", metadata=json.dumps({"func_name": "f"}))
    assert parse_problem(plain).fn_name == "f"
    with pytest.raises(LiveCodeBenchMissing, match="no LiveCodeBench problems"):
        read_problems(tmp_path / "empty")
    with pytest.raises(LiveCodeBenchMissing, match="not a LiveCodeBench"):
        parse_problem({"question_id": "x"})
