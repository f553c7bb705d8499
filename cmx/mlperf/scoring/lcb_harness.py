"""The program that grades one LiveCodeBench problem inside the sandbox: lcb_runner's testing_util.py, ported.

Both references (mlcommons/inference b66003e: language/deepseek-r1 and language/gpt-oss-120b, whose
`submodules/LiveCodeBench` is a link to deepseek-r1's) grade with LiveCodeBench at b1e7cab44d61,
`lcb_runner/evaluation/testing_util.py` `run_test`, inside `compute_code_generation_metrics.py`
`check_correctness`. `HARNESS` is that code, function for function (`clean_if_name`, `make_function`,
`call_method` with `MockStdinWithBuffer`, `compile_code`, `grade_call_based`, `grade_stdio`,
`reliability_guard`), run as one Python program per problem. It reads
{"code", "inputs", "outputs", "fn_name", "timeout"} on stdin.

Two things are cmx's, for the sandbox rather than the grading:

- what the model's program writes to file descriptors 1 and 2 goes to /dev/null (the reference lets
  it reach a terminal, or /dev/null in gpt-oss's worker, and never grades it: a standard-input
  program's output is captured at the Python level, as in `Capturing`), so that a chatty program
  meets no output cap the reference lacks;
- the verdict is a JSON line `{"results": [...], "passed": bool}` written to a copy of the original
  stdout, then the exit status (0 only when passed). A program that ends the process itself
  (`os._exit(0)`) leaves no verdict and fails, as in `check_correctness`, where a child that never
  appended its result counts every test as -1.
"""

from __future__ import annotations

HARNESS = r'''
import ast, faulthandler, json, os, signal, sys
from decimal import Decimal
from io import StringIO
from types import ModuleType
from unittest.mock import mock_open, patch

sys.set_int_max_str_digits(50000)  # compute_code_generation_metrics.py, at import (a forked child inherits it)
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
    import builtins, shutil, subprocess
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
    # kept before the guard and the program: the verdict's own way out
    verdict, write, exit_now = os.dup(1), os.write, os._exit
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    signal.signal(signal.SIGALRM, on_alarm)
    reliability_guard()
    error = None
    try:
        if JOB["fn_name"] is None:
            results = grade_stdio(JOB["code"], JOB["inputs"], JOB["outputs"], JOB["timeout"])
        else:
            results = grade_call_based(JOB["code"], JOB["inputs"], JOB["outputs"], JOB["fn_name"], JOB["timeout"])
        if results is None:
            raise TypeError("no function to test")  # the reference's unpacking of None fails the same way
    except BaseException as exc:
        results, error = [-4], repr(exc)[:200]
    try:
        passed = all(r > 0 for r in results)  # pass_k_utils.extract_instance_results
    except Exception:
        passed = False
    line = json.dumps({"results": results, "passed": passed, "error": error}, default=repr) + "\n"
    write(verdict, line.encode("utf-8"))
    exit_now(0 if passed else 1)


main()
'''

__all__ = ["HARNESS"]
