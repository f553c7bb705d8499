"""LiveCodeBench scoring as eval_accuracy.py does it, with each program run in cmx's sandbox.

The reference (mlcommons/inference b66003e, language/deepseek-r1/eval_accuracy.py
`evaluate_livecodebench`) looks the row's `question_id` up in LiveCodeBench's code-generation set
(`livecodebench/code_generation_lite`, `release_v1`, through the LiveCodeBench submodule at
b1e7cab44d610bbc2e10d36d270cd0c89c600492) and grades the extracted ```python block with
lcb_runner's `codegen_metrics(timeout=60)`:

- tests: the public then the private test cases (the private ones are stored as base64 of zlib of
  a pickled JSON string); `metadata.func_name` set means LeetCode-style call-based tests, else stdin;
- call-based: the code is prefixed with lcb_runner's import block, `Solution()` is made when the
  code has `class Solution`, each test's input lines are JSON arguments, and the result (a tuple
  read as a list) must `==` the JSON output;
- stdin: a trailing `if __name__ == '__main__':` block is unwrapped, the code is wrapped in a
  function, stdin is mocked with the test input, and what it prints, line by line with
  surrounding whitespace stripped, must equal the expected lines, or equal them as Decimals;
- each test has `timeout` seconds (signal.alarm); the whole problem `(timeout + 1) * tests + 5`;
  the first failing test stops it; the problem passes when every result is positive.

Here the same harness (`HARNESS`) runs as one sandboxed Python program per problem
(cmx.mlperf.scoring.sandbox): the model's code and the tests arrive on stdin, and the program
exits 0 when every test passes. The sandbox adds isolation (no network, own folder, memory cap)
that the reference leaves to its `reliability_guard`, which the harness applies too.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cmx.errors import CmxError

TIMEOUT_S = 60  # eval_accuracy.py evaluate_livecodebench: mock_args timeout=60
MEMORY_MB = 4096  # lcb_runner testing_util.run_test's comment: "max memory is set to 4GB"
RELEASE = "release_v1"  # eval_accuracy.py: release_version="release_v1"


class LiveCodeBenchError(CmxError):
    """LiveCodeBench's problems file is missing, unreadable or lacks a problem the dataset names."""


@dataclass(frozen=True)
class Problem:
    """One code-generation problem's tests, as lcb_runner's `get_evaluation_sample` lays them out."""

    question_id: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    fn_name: str | None

    def payload(self, code: str, timeout_s: int) -> str:
        return json.dumps({"code": code, "inputs": list(self.inputs), "outputs": list(self.outputs),
                           "fn_name": self.fn_name, "timeout": timeout_s})


class _JsonTextOnly(pickle.Unpickler):
    """The private tests are a pickled str: refuse any class, so that a pickle cannot run code."""

    def find_class(self, module: str, name: str):  # type: ignore[override]
        raise pickle.UnpicklingError(f"a LiveCodeBench test pickle may hold text only, not {module}.{name}")


def _private_tests(value: str) -> list[dict]:
    try:
        return json.loads(value)
    except ValueError:
        text = _JsonTextOnly(io.BytesIO(zlib.decompress(base64.b64decode(value.encode("utf-8"))))).load()
        return json.loads(text)


def problem_from_row(row: Mapping[str, object]) -> Problem:
    """A row of code_generation_lite's jsonl (CodeGenerationProblem's fields) as a Problem."""
    try:
        public = json.loads(str(row["public_test_cases"]))
        private = _private_tests(str(row["private_test_cases"]))
        metadata = json.loads(str(row.get("metadata") or "{}"))
        tests = [*public, *private]
        return Problem(str(row["question_id"]), tuple(str(t["input"]) for t in tests),
                       tuple(str(t["output"]) for t in tests), metadata.get("func_name"))
    except (KeyError, TypeError, ValueError, zlib.error, pickle.UnpicklingError, EOFError) as exc:
        raise LiveCodeBenchError(f"problem {row.get('question_id')!r} has unreadable tests: "
                                 f"{type(exc).__name__}: {exc}") from None


def load_problems(files: Iterable[Path]) -> dict[str, Problem]:
    """The problems of code_generation_lite's jsonl files (release_v1: test.jsonl), by question_id."""
    problems: dict[str, Problem] = {}
    for path in files:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise LiveCodeBenchError(f"cannot read {path}: {exc.strerror or exc}",
                                     hint="get the tests with `cmx run \"get dataset livecodebench\"`") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                raise LiveCodeBenchError(f"{path}:{number} is not JSON", hint="download the file again") from None
            problem = problem_from_row(row)
            problems[problem.question_id] = problem
    return problems


def programs(codes: Sequence[str], problems: Sequence[Problem], timeout_s: int = TIMEOUT_S):
    """One sandbox Program per (code, problem): the harness, with code and tests on stdin."""
    from cmx.mlperf.scoring.sandbox import Program

    return [Program("python", HARNESS, stdin=p.payload(c, timeout_s)) for c, p in zip(codes, problems)]


def run_problems(codes: Sequence[str], problems: Sequence[Problem], *, timeout_s: int = TIMEOUT_S,
                 workers: int = 2) -> list[bool]:
    """Whether each code passes its problem's tests (all of them), each run in the sandbox with the
    reference's global limit of (timeout + 1) seconds a test plus 5."""
    from cmx.mlperf.scoring.sandbox import Limits, check_language, run_programs

    if not codes:
        return []
    check_language("python")
    # one limit per batch: group problems by their wall limit so that each keeps the reference's own
    by_limit: dict[int, list[int]] = {}
    for i, p in enumerate(problems):
        by_limit.setdefault((timeout_s + 1) * len(p.inputs) + 5, []).append(i)
    results: dict[int, bool] = {}
    for seconds, indices in by_limit.items():
        outcomes = run_programs(programs([codes[i] for i in indices], [problems[i] for i in indices], timeout_s),
                                Limits(seconds=float(seconds), memory_mb=MEMORY_MB), workers=workers)
        results.update({i: o.passed for i, o in zip(indices, outcomes)})
    return [results[i] for i in range(len(codes))]


# The program each problem runs: lcb_runner/evaluation/testing_util.py's grading at b1e7cab, reading
# {"code", "inputs", "outputs", "fn_name", "timeout"} on stdin and exiting 0 when every test passes.
HARNESS = r'''
import ast, faulthandler, json, signal, sys
from decimal import Decimal
from io import StringIO
from types import ModuleType
from unittest.mock import mock_open, patch

sys.set_int_max_str_digits(50000)  # compute_code_generation_metrics.py, at import
JOB = json.loads(sys.stdin.read())
IMPORTS = ("from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
           "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\nfrom random import *\n"
           "from statistics import *\nfrom itertools import *\nfrom functools import *\nfrom operator import *\n"
           "from io import *\nfrom sys import *\nfrom json import *\nfrom builtins import *\nfrom typing import *\n"
           "import string\nimport re\nimport datetime\nimport collections\nimport heapq\nimport bisect\nimport copy\n"
           "import math\nimport random\nimport statistics\nimport itertools\nimport functools\nimport operator\n"
           "import io\nimport sys\nimport json\nsys.setrecursionlimit(50000)\n")


class Timeout(Exception):
    pass


def on_alarm(signum, frame):
    raise Timeout


class StdinWithBuffer:
    def __init__(self, inputs):
        self.inputs, self._io = inputs, StringIO(inputs)
        self.buffer = BufferOf(inputs)

    def read(self, *args):
        return self.inputs

    def readline(self, *args):
        return self._io.readline(*args)

    def readlines(self, *args):
        return self.inputs.split("\n")

    def __getattr__(self, name):
        return getattr(self._io, name)


class BufferOf:
    def __init__(self, inputs):
        self.inputs = inputs.encode("utf-8")

    def read(self, *args):
        return self.inputs

    def readline(self, *args):
        return self.inputs.split(b"\n")[0] + b"\n"


def unwrap_main(code):
    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            code = ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)
    except Exception:
        pass
    return code


def as_function(code):
    try:
        tree = ast.parse(code)
        imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
        others = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
        fn = ast.FunctionDef(name="wrapped_function", args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[],
                             kw_defaults=[], defaults=[]), body=others, decorator_list=[], lineno=-1)
        return IMPORTS + "\n" + ast.unparse(imports) + "\n" + ast.unparse(fn)
    except Exception:
        return code


def compile_code(code, timeout):
    signal.alarm(timeout)
    try:
        module = ModuleType("tmp_sol", "")
        exec(code, module.__dict__)
        solution = module.Solution() if "class Solution" in code else module
        assert solution is not None
    finally:
        signal.alarm(0)
    return solution


def call_with_stdin(method, inputs):
    if isinstance(inputs, list):
        inputs = "\n".join(inputs)
    lines = iter(inputs.split("\n"))

    @patch("builtins.open", mock_open(read_data=inputs))
    @patch("sys.stdin", StdinWithBuffer(inputs))
    @patch("sys.stdin.readline", lambda *args: next(lines))
    @patch("sys.stdin.readlines", lambda *args: inputs.split("\n"))
    @patch("sys.stdin.read", lambda *args: inputs)
    def inner(m):
        try:
            return m()
        except SystemExit:
            pass
    return inner(method)


def stripped_lines(text):
    return [line.strip() for line in text.strip().split("\n")]


def as_decimals(line):
    try:
        return True, [Decimal(e) for e in line.split()]
    except Exception:
        return False, []


def grade_call_based(code, inputs, outputs, fn_name, timeout):
    code = IMPORTS + "\n\n" + code
    solution = compile_code(code, timeout)
    method = getattr(solution, fn_name) if hasattr(solution, fn_name) else None
    if method is None:
        return None
    args = [[json.loads(line) for line in i.split("\n")] for i in inputs]
    expected = [json.loads(o) for o in outputs]
    results = []
    for given, want in zip(args, expected):
        signal.alarm(timeout)
        faulthandler.enable()
        try:
            got = method(*given)
            signal.alarm(0)
            if isinstance(got, tuple):
                got = list(got)
            results.append(got == want)
            if not results[-1]:
                return results
        except Exception as exc:
            signal.alarm(0)
            results.append(-3 if "timeout" in repr(exc).lower() else -4)
            return results
        finally:
            signal.alarm(0)
            faulthandler.disable()
    return results


class Capturing(list):
    def __enter__(self):
        self._stdout = sys.stdout
        sys.stdout = self._io = StringIO()
        self._io.close = lambda x: 1
        return self

    def __exit__(self, *args):
        self.append(self._io.getvalue())
        del self._io
        sys.stdout = self._stdout


def grade_stdio(code, inputs, outputs, timeout):
    solution = compile_code(as_function(unwrap_main(code)), timeout)
    method = getattr(solution, "wrapped_function", None)
    if method is None:
        return None
    results = []
    for given, want in zip(inputs, outputs):
        signal.alarm(timeout)
        faulthandler.enable()
        signal.alarm(timeout)
        with Capturing() as captured:
            try:
                call_with_stdin(method, given)
                signal.alarm(0)
            except Exception as exc:
                signal.alarm(0)
                results.append(-3 if "timeout" in repr(exc).lower() else -4)
                return results
            finally:
                signal.alarm(0)
                faulthandler.disable()
        got, want_lines = stripped_lines(captured[0]), stripped_lines(want)
        if len(got) != len(want_lines):
            results.append(-2)
            return results
        for g, w in zip(got, want_lines):
            if g == w:
                continue
            ok_g, dg = as_decimals(g)
            ok_w, dw = as_decimals(w)
            if not (ok_g and ok_w) or dg != dw:
                results.append(-2)
                return results
        results.append(True)
    return results


def reliability_guard():
    import builtins, os, shutil, subprocess
    faulthandler.disable()
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork", "forkpty",
                 "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown",
                 "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir"):
        setattr(os, name, None)
    shutil.rmtree = shutil.move = shutil.chown = None
    subprocess.Popen = None
    builtins.help = None
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None


def main():
    import os
    exit_now = os._exit  # kept before the guard; the program's own exit status is the verdict
    signal.signal(signal.SIGALRM, on_alarm)
    reliability_guard()
    try:
        if JOB["fn_name"] is None:
            results = grade_stdio(JOB["code"], JOB["inputs"], JOB["outputs"], JOB["timeout"])
        else:
            results = grade_call_based(JOB["code"], JOB["inputs"], JOB["outputs"], JOB["fn_name"], JOB["timeout"])
        if results is None:
            raise TypeError("no function to test")  # the reference's unpacking of None fails the same way
    except BaseException:
        results = [-4]
    try:
        passed = all(r > 0 for r in results)  # pass_k_utils.extract_instance_results
    except Exception:
        passed = False
    sys.__stdout__.write(json.dumps(results, default=repr) + "\n")
    sys.__stdout__.flush()
    exit_now(0 if passed else 1)


main()
'''


__all__ = ["HARNESS", "MEMORY_MB", "RELEASE", "TIMEOUT_S", "LiveCodeBenchError", "Problem", "load_problems",
           "problem_from_row", "programs", "run_problems"]
