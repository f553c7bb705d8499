"""LiveCodeBench grading as lcb_runner's testing_util does it, each program run in the sandbox (real subprocesses)."""

from __future__ import annotations

import base64
import json
import pickle
import time
import zlib

import pytest

from cmx.mlperf.scoring.livecodebench import (
    LiveCodeBenchError,
    Problem,
    encode_private_tests,
    grade,
    load_problems,
    problem_from_row,
    run_problems,
)
from cmx.mlperf.scoring.sandbox import Program, SandboxUnavailable, run_program

SUM = Problem("sum", ("1 2\n", "10 -4\n"), ("3\n", "6\n"), None)
HALF = Problem("half", ("1\n",), ("0.50\n",), None)
LARGEST = Problem("largest", ("[1, 5, 2]", "[7]\n3"), ("5", "7"), "largest")
STDIN = Problem("s", ("1 2\n", "0.5 0.25\n"), ("3\n", "0.75\n"), None)
CALL = Problem("c", ("[1, 5, 2]", "[3, 4]\n2"), ("5", "[3, 4]"), "pick")
THREE = Problem("one", ("\n",), ("3\n",), None)


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


def test_standard_input_programs_pass_on_exact_or_decimal_equal_lines():
    wrong_on_integers = "import sys\nprint(sum(map(float, sys.stdin.read().split())) if '.' in open(0).read() else 0)\n"
    lines = ("a, b = input().split()\n"
             "s = float(a) + float(b)\n"
             "print(int(s) if s == int(s) else s)\n")
    # the first: "3" and "0.75" match; the second fails the second test; the third prints 0 for "1 2"
    assert grade([(lines, "s"), ("print(3)", "s"), (wrong_on_integers, "s")], {"s": STDIN}) == [True, False, False]


def test_a_main_guard_is_unwrapped_and_sys_exit_ends_only_the_test():
    code = ("import sys\ndef main():\n    a, b = map(int, input().split())\n    print(a + b)\n    sys.exit(0)\n"
            "if __name__ == '__main__':\n    main()")
    assert run_problems([code], [SUM], timeout_s=5) == [True]
    floats = ("def main():\n    a, b = map(float, input().split())\n    s = a + b\n"
              "    print(int(s) if s == int(s) else s)"
              "\n\nif __name__ == '__main__':\n    main()\n")
    assert grade([(floats, "s")], {"s": STDIN}) == [True]


def test_call_based_tests_call_the_solution_method_and_read_tuples_as_lists():
    good = "class Solution:\n    def largest(self, nums, k=0):\n        return max(nums)"
    as_tuple = "class Solution:\n    def largest(self, nums, k=0):\n        return (max(nums),)"
    missing = "class Solution:\n    def other(self, nums):\n        return 0"
    assert run_problems([good, as_tuple, missing], [LARGEST] * 3, timeout_s=5) == [True, False, False]
    listy = Problem("pair", ("[1, 2]",), ("[2, 1]",), "flip")
    assert run_problems(["class Solution:\n    def flip(self, xs):\n        return (xs[1], xs[0])"], [listy],
                        timeout_s=5) == [True]


def test_call_based_programs_call_solution_methods_with_json_arguments():
    good = "class Solution:\n    def pick(self, nums, k=None):\n        return (nums[0], nums[1]) if k else max(nums)\n"
    wrong = "class Solution:\n    def pick(self, nums, k=None):\n        return 0\n"
    missing = "class Solution:\n    def other(self, nums):\n        return 1\n"
    # a tuple is compared as a list
    assert grade([(good, "c"), (wrong, "c"), (missing, "c")], {"c": CALL}) == [True, False, False]


def test_code_that_hangs_fails_within_the_time_limit():
    start = time.monotonic()
    assert run_problems(["while True:\n    pass"], [SUM], timeout_s=1) == [False]
    assert time.monotonic() - start < (1 + 1) * 2 + 5 + 5


def test_the_reliability_guard_takes_away_what_the_reference_takes_away():
    assert run_problems(["import os\nos.system('true')\nprint(3)"], [THREE], timeout_s=5) == [False]
    # sys.modules["resource"] = None: the import, hoisted out of the wrapped function, fails the compile
    outcome = run_problems(["import resource\nprint(3)", "import sys\nprint(3)"], [THREE] * 2, timeout_s=5)
    assert outcome == [False, True]


def test_a_program_that_ends_the_process_itself_fails_as_a_child_that_returned_nothing():
    # check_correctness: no result from the child counts every test as failed, whatever its exit status
    assert run_problems(["print(3)\nimport os\nos._exit(0)", "print(3)\nimport posix\nposix._exit(0)"], [THREE] * 2,
                        timeout_s=5) == [False, False]
    crash = "raise ValueError('x')"
    assert grade([(crash, "s"), ("import os\nos._exit(0)\n", "s")], {"s": STDIN}) == [False, False]


def test_stdin_has_a_byte_buffer_and_long_integers_print_as_the_reference_allows():
    code = "import sys\nnums = sys.stdin.buffer.read().split()\nprint(sum(map(int, nums)))"
    big = Problem("big", ("5000\n",), ("1" + "0" * 5000 + "\n",), None)
    assert run_problems([code, "print(10 ** int(input()))"], [SUM, big], timeout_s=5) == [True, True]


def test_what_a_program_writes_outside_the_captured_stdout_is_neither_graded_nor_capped():
    noisy = "import sys\nsys.stderr.write('x' * 3_000_000)\nprint(sum(map(int, input().split())))"
    chatty = ("class Solution:\n    def largest(self, nums, k=0):\n        print('y' * 3_000_000)\n"
              "        return max(nums)")
    assert run_problems([noisy, chatty], [SUM, LARGEST], timeout_s=5) == [True, True]


def test_no_code_or_an_unknown_question_fails_without_running():
    assert grade([("", "s"), (None, "s"), ("print(3)", ""), ("print(3)", "nope")], {"s": STDIN}) == [False] * 4
    assert grade([], {}) == []


def test_the_wall_limit_is_check_correctness_join_timeout():
    assert Problem("q", ("a", "b", "c"), ("1", "2", "3"), None).wall_seconds(60) == (60 + 1) * 3 + 5 == 188
    assert SUM.wall_seconds(1) == 9


def test_private_tests_are_decoded_from_base64_zlib_pickle_and_a_class_pickle_is_refused(tmp_path):
    tests = [{"input": "1 1\n", "output": "2\n", "testtype": "stdin"}]
    private = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()
    assert private == encode_private_tests(tests)
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
    with pytest.raises(LiveCodeBenchError, match=r"test.jsonl:1 is not JSON"):
        load_problems([path])


def test_problems_read_from_code_generation_lite_rows_with_plain_or_compressed_private_tests(tmp_path):
    row = {"question_id": "q9",
           "public_test_cases": json.dumps([{"input": "1\n", "output": "1\n", "testtype": "stdin"}]),
           "private_test_cases": encode_private_tests([{"input": "2\n", "output": "2\n", "testtype": "stdin"}]),
           "metadata": "{}"}
    (tmp_path / "test6.jsonl").write_text(json.dumps(row) + "\n")
    assert load_problems([tmp_path / "test6.jsonl"]) == {"q9": Problem("q9", ("1\n", "2\n"), ("1\n", "2\n"), None)}
    plain = dict(row, private_test_cases="[]", metadata=json.dumps({"func_name": "f"}))
    assert problem_from_row(plain).fn_name == "f"
    with pytest.raises(LiveCodeBenchError, match="not a LiveCodeBench"):
        problem_from_row({"question_id": "x"})
    with pytest.raises(LiveCodeBenchError, match="cannot read") as caught:
        load_problems([tmp_path / "absent.jsonl"], hint="get them")
    assert caught.value.hint == "get them"
