"""LiveCodeBench rows graded as the reference's lcb_runner grades them, each program run in the lead's sandbox.

eval_accuracy.py `evaluate_livecodebench_detailed` looks the row's ground truth (a question_id) up
in LiveCodeBench's code_generation_lite release_v6 problems and runs lcb_runner's
`testing_util.run_test`: every public and private test, stopping at the first failure. A
call-based problem (metadata `func_name`) calls `Solution().<func_name>(*json args)` and compares
with the JSON output (a tuple counts as a list); a standard-input problem runs the program, wrapped
in a function, with the input on a patched stdin, and compares stripped lines, exactly or as
Decimals. `HARNESS` below does the same, inside one sandboxed Python process per row (the
program and its tests arrive on stdin as JSON), and exits 0 only if every test passed.

The problems are the files of the `livecodebench/code_generation_lite` dataset (test*.jsonl: one
problem a line with question_id, public_test_cases, private_test_cases, metadata), kept in the
`livecodebench/` folder beside the sets; MLCommons' gpt-oss folder does not ship them, the reference
reads them through LiveCodeBench's own loader.
"""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cmx.errors import CmxError

FOLDER = "livecodebench"
SECONDS_PER_ROW = 80.0  # eval_mlperf_accuracy.py: future.result(timeout=80) per LiveCodeBench row
TEST_TIMEOUT_S = 60     # eval_accuracy.py mock_args timeout=60: lcb_runner's per-test alarm


class LiveCodeBenchMissing(CmxError):
    """The LiveCodeBench problems (their tests) are not where the scorer looks."""


@dataclass(frozen=True)
class Problem:
    """One problem's tests as lcb_runner's get_evaluation_sample gives them."""

    question_id: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    fn_name: str | None  # call-based when set; standard input otherwise


def read_problems(folder: Path) -> dict[str, Problem]:
    """Every problem in the code_generation_lite JSON-lines files under `folder`."""
    files = sorted(Path(folder).glob("*.jsonl"))
    if not files:
        raise LiveCodeBenchMissing(f"no LiveCodeBench problems (*.jsonl) in {folder}",
                                   hint="put the code_generation_lite release_v6 test*.jsonl files there "
                                        "(get-dataset-gpt-oss-120b --input lcb_path=DIR does)")
    problems: dict[str, Problem] = {}
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                problem = parse_problem(json.loads(line), f"{path}:{number}")
                problems[problem.question_id] = problem
    return problems


def parse_problem(row: dict, where: str = "") -> Problem:
    """A code_generation_lite row: private tests may be JSON, or base64 of zlib of a pickled JSON string."""
    try:
        public = json.loads(row["public_test_cases"])
        private = _private_tests(row["private_test_cases"])
        metadata = json.loads(row.get("metadata") or "{}")
        tests = [*public, *private]
        return Problem(str(row["question_id"]), tuple(t["input"] for t in tests), tuple(t["output"] for t in tests),
                       metadata.get("func_name"))
    except (KeyError, TypeError, ValueError) as exc:
        raise LiveCodeBenchMissing(f"{where}: not a LiveCodeBench code_generation_lite problem ({exc})") from None


def _private_tests(value: str) -> list:
    try:
        return json.loads(value)
    except ValueError:  # lcb_runner CodeGenerationProblem: the compressed form
        return json.loads(pickle.loads(zlib.decompress(base64.b64decode(value.encode("utf-8")))))


def encode_private_tests(tests: Sequence[dict]) -> str:
    """The compressed form code_generation_lite stores private tests in (for generated problems)."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(list(tests))))).decode("ascii")


def run_rows(jobs: Iterable[tuple[int, str, str]], problems: dict[str, Problem], *, workers: int = 2) -> dict[int, bool]:
    """Run (row, program, question_id) jobs in the sandbox; a question_id with no problem fails, as in the reference."""
    from cmx.mlperf.scoring.sandbox import Limits, Program, run_programs

    runnable = [(row, code, problems[qid]) for row, code, qid in jobs if qid in problems]
    programs = [Program("python", HARNESS, stdin=json.dumps({
        "code": code, "inputs": list(p.inputs), "outputs": list(p.outputs), "fn_name": p.fn_name,
        "timeout": TEST_TIMEOUT_S})) for _, code, p in runnable]
    outcomes = run_programs(programs, Limits(seconds=SECONDS_PER_ROW, memory_mb=4096), workers=workers)
    passed = {row: outcome.passed for (row, _, _), outcome in zip(runnable, outcomes)}
    return {row: passed.get(row, False) for row, _, _ in jobs}


# lcb_runner/evaluation/testing_util.py's grading, run inside the sandbox; exit 0 = every test passed
HARNESS = r'''
import ast, json, signal, sys, time
from decimal import Decimal
from io import StringIO
from types import ModuleType
from unittest.mock import mock_open, patch

IMPORTS = ("from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
           "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\nfrom random import *\n"
           "from statistics import *\nfrom itertools import *\nfrom functools import *\nfrom operator import *\n"
           "from io import *\nfrom sys import *\nfrom json import *\nfrom builtins import *\nfrom typing import *\n"
           "import string\nimport re\nimport datetime\nimport collections\nimport heapq\nimport bisect\nimport copy\n"
           "import math\nimport random\nimport statistics\nimport itertools\nimport functools\nimport operator\n"
           "import io\nimport sys\nimport json\nsys.setrecursionlimit(50000)\n")

import os
job = json.loads(sys.stdin.read())
real_stdout = sys.stdout
real_exit = os._exit
os._exit = None  # reliability_guard does the same: the program cannot end the harness with a status of its own

class Timeout(Exception):
    pass

def alarm(signum, frame):
    raise Timeout()

signal.signal(signal.SIGALRM, alarm)

def compile_code(code, timeout):
    signal.alarm(timeout)
    try:
        module = ModuleType("tmp_sol", "")
        exec(code, module.__dict__)
        return module.Solution() if "class Solution" in code else module
    finally:
        signal.alarm(0)

def clean_if_name(code):
    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            code = ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)
    except Exception:
        pass
    return code

def make_function(code):
    try:
        imports, others = [], []
        for stmt in ast.parse(code).body:
            (imports if isinstance(stmt, (ast.Import, ast.ImportFrom)) else others).append(stmt)
        fn = ast.FunctionDef(name="wrapped_function", args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[],
                             kw_defaults=[], defaults=[]), body=others, decorator_list=[], lineno=-1)
        return IMPORTS + "\n" + ast.unparse(imports) + "\n" + ast.unparse(fn)
    except Exception:
        return code

def call_method(method, inputs):
    lines = iter(inputs.split("\n"))
    @patch("builtins.open", mock_open(read_data=inputs))
    @patch("sys.stdin", StringIO(inputs))
    @patch("sys.stdin.readline", lambda *a: next(lines))
    @patch("sys.stdin.readlines", lambda *a: inputs.split("\n"))
    @patch("sys.stdin.read", lambda *a: inputs)
    def inner(m):
        try:
            return m()
        except SystemExit:
            pass
    return inner(method)

def stripped(value):
    return [line.strip() for line in value.strip().split("\n")]

def decimals(line):
    try:
        return True, [Decimal(e) for e in line.split()]
    except Exception:
        return False, []

def grade_call_based(code, inputs, outputs, fn_name, timeout):
    solution = compile_code(IMPORTS + "\n\n" + code, timeout)
    method = getattr(solution, fn_name, None)
    if method is None:
        return False
    args = [[json.loads(line) for line in i.split("\n")] for i in inputs]
    expected = [json.loads(o) for o in outputs]
    for a, e in zip(args, expected):
        signal.alarm(timeout)
        try:
            got = method(*a)
        finally:
            signal.alarm(0)
        if isinstance(got, tuple):
            got = list(got)
        if got != e:
            return False
    return True

def grade_stdio(code, inputs, outputs, timeout):
    solution = compile_code(make_function(clean_if_name(code)), timeout)
    method = getattr(solution, "wrapped_function", None)
    if method is None:
        return False
    for given, expected in zip(inputs, outputs):
        captured = StringIO()
        sys.stdout = captured
        signal.alarm(timeout)
        try:
            call_method(method, given)
        finally:
            signal.alarm(0)
            sys.stdout = real_stdout
        got, want = stripped(captured.getvalue()), stripped(expected)
        if len(got) != len(want):
            return False
        for g, w in zip(got, want):
            if g == w:
                continue
            ok_g, dg = decimals(g)
            ok_w, dw = decimals(w)
            if not (ok_g and ok_w and dg == dw):
                return False
    return True

try:
    if job["fn_name"]:
        ok = grade_call_based(job["code"], job["inputs"], job["outputs"], job["fn_name"], job["timeout"])
    else:
        ok = grade_stdio(job["code"], job["inputs"], job["outputs"], job["timeout"])
except BaseException as exc:
    sys.stdout = real_stdout
    print("error:", repr(exc)[:200])
    ok = False
sys.stdout = real_stdout
print("passed" if ok else "failed")
sys.stdout.flush()
real_exit(0 if ok else 1)
'''


__all__ = ["FOLDER", "HARNESS", "LiveCodeBenchMissing", "Problem", "encode_private_tests", "parse_problem",
           "read_problems", "run_rows"]
