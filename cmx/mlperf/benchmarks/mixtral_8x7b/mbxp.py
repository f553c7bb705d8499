"""MBXP pass@1 as language/mixtral-8x7b/evaluate_mbxp.py grades it, the programs run in cmx's sandbox.

The reference (mlcommons/inference b66003e, with mxeval at e09974f990eeaf0c0e8f2b5eaff4be66effb2c86,
which README.md pins) grades each MBXP sample so:

1. The response is cut at its first "```" (the end of the code block the prompt opened).
2. Per language: Go drops `package main`, its imports and `func main`; Python is `lstrip`ped;
   Scala drops `object Main extends App {` and its last line. Then every "\\_" becomes "_".
3. mxeval's `check_correctness_<language>(problem, solution, timeout=20.0)` with `prompt` set to
   "" (Mixtral repeats the prompt in its answer), where `test` is the row's `gt_output`:
   - python: `solution + "\\n" + test + "\\n" + "check(<entry point>)"` is `exec`ed with empty globals
     (so `__name__` is not "__main__") after `reliability_guard` has disabled exit, quit, help
     and the destructive os, shutil and subprocess functions; it passes when no exception
     (SystemExit included) is raised within 20 s;
   - the others: `solution + test` is written to a file, compiled where the language needs it,
     and run; it passes when the run exits with status 0 within 20 s.
4. Only cpp, python, php, javascript, ruby and typescript are graded; samples in any other
   language are left out of both counts. The score is `100 * passed / graded`, not rounded.

MBXP's JavaScript tests `require("lodash")`. mxeval's language setup installs it (`npm install -g
lodash`, and `npm i --save lodash` in mxeval's own folder, under which it writes the programs), so
it resolves there. A sandboxed program runs in a fresh temporary folder with its own HOME, where
node finds only its global folder (<prefix>/lib/node; Debian's nodejs also /usr/share/nodejs):
without lodash there, every JavaScript sample would fail. So before grading such samples cmx
runs one probe program that requires lodash, and refuses (LanguageUnavailable) when it fails.

cmx runs each program through cmx.mlperf.scoring.sandbox (own folder, no network, CPU, memory and
output capped). Where its toolchain differs from mxeval's, the difference is named here rather
than hidden:
- cpp: mxeval compiles with plain `g++` (GNU C++17 on GCC 11 and later); the sandbox with
  `g++ -std=c++17 -O2`. A program that needs a GNU extension, or has undefined behaviour that
  -O2 changes, may be graded differently.
- typescript: mxeval compiles with `tsc --target es5 --lib es2016` and runs the emitted
  JavaScript when tsc exits with status 2 (type errors, JavaScript still written: every MBXP test
  imports node's `assert` without type declarations); the sandbox compiles the same way and runs
  the program after status 0 or 2.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.mixtral_8x7b.dataset import mbxp_language

if TYPE_CHECKING:
    from cmx.mlperf.scoring.sandbox import Outcome

GRADED_LANGUAGES = ("cpp", "python", "php", "javascript", "ruby", "typescript")  # evaluate_mbxp.py
TIMEOUT_S = 20.0  # evaluate_mbxp.py: checker(problem, solution, timeout=20.0)
_LODASH = re.compile(r"""require\(\s*["']lodash["']\s*\)""")
LODASH_PROBE = 'require("lodash");\n'
LODASH_HINT = ("make lodash importable from any folder: node's global folder (<prefix>/lib/node, e.g. "
               "/usr/lib/node/lodash, a link to `npm root -g`/lodash after `npm install -g lodash`), or "
               "`apt-get install node-lodash` with Debian's nodejs (/usr/share/nodejs)")

_GO_MULTI_IMPORT = re.compile(r"^import \(\n(.+)((?:\n.+)+)\n\)", re.MULTILINE)
_GO_IMPORT = re.compile(r"^import \".*\"")
_GO_MAIN = re.compile(r"^func main.*^}", re.MULTILINE | re.DOTALL)

# mxeval's reliability_guard: what it sets to None before exec'ing a Python program
_GUARDED = {
    "builtins": ("exit", "quit", "help"),
    "os": ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork", "forkpty",
           "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown",
           "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir"),
    "shutil": ("rmtree", "move", "chown"),
    "subprocess": ("Popen",),
}
_BLOCKED_MODULES = ("ipdb", "joblib", "resource", "psutil", "tkinter")


@dataclass(frozen=True)
class MbxpProblem:
    """One MBXP sample to grade: its language and entry point (from the row's id), the test code, the answer."""

    language: str
    entry_point: str
    test: str  # gt_output
    response: str  # the decoded output

    @classmethod
    def from_row(cls, sample_id: str, test: str, response: str) -> MbxpProblem:
        language, entry_point = mbxp_language(sample_id)
        return cls(language, entry_point, test, response)


def extract_solution(response: str, language: str) -> str:
    """The code evaluate_mbxp.py's worker takes from a response (steps 1 and 2 of the module docstring)."""
    end = response.find("```")
    solution = response if end < 0 else response[:end]
    if language == "go":
        solution = solution.replace("package main", "")
        solution = _GO_MULTI_IMPORT.sub("", solution)
        solution = _GO_IMPORT.sub("", solution)
        solution = _GO_MAIN.sub("", solution)
    elif language == "python":
        solution = solution.lstrip()
    elif language == "scala":
        solution = solution.replace("object Main extends App {", "")
        solution = "".join(solution.splitlines(True)[:-1])
    return solution.replace("\\_", "_")


def program_source(problem: MbxpProblem) -> str:
    """The whole program mxeval runs for the problem (prompt ""), as one source file for the sandbox.

    Python's is wrapped so that the sandbox's criterion (exit status 0) is mxeval's: the program
    is exec'ed with empty globals after the reliability guard, and any exception, SystemExit
    included, exits with status 1.
    """
    solution = extract_solution(problem.response, problem.language)
    if problem.language != "python":
        return solution + problem.test
    checked = solution + "\n" + problem.test + "\n" + f"check({problem.entry_point})"
    return _PYTHON_HARNESS.format(program=repr(checked), guarded=repr(_GUARDED), blocked=repr(_BLOCKED_MODULES))


_PYTHON_HARNESS = '''\
import os as _os
_exit = _os._exit


def _guard():
    import builtins, faulthandler, importlib, sys
    faulthandler.disable()
    _os.environ["OMP_NUM_THREADS"] = "1"
    for module, names in {guarded}.items():
        target = importlib.import_module(module)
        for name in names:
            setattr(target, name, None)
    for name in {blocked}:
        sys.modules[name] = None


try:
    _guard()
    exec(compile({program}, "<mbxp>", "exec"), {{}})
except BaseException:
    _exit(1)
_exit(0)
'''


@dataclass(frozen=True)
class MbxpResult:
    """pass@1 over the graded samples, with the counts per language (as evaluate_mbxp.py prints them)."""

    score: float
    passed: int
    graded: int
    passed_by_language: tuple[tuple[str, int], ...]
    graded_by_language: tuple[tuple[str, int], ...]
    statuses: tuple[str, ...]  # the sandbox's status per graded problem, in the order given


def grade(problems: Sequence[MbxpProblem], run: Callable[..., list[Outcome]], *, workers: int = 2) -> MbxpResult:
    """Grade the problems (languages outside GRADED_LANGUAGES are left out); `run` is the sandbox's run_programs.

    Raises LanguageUnavailable (from the sandbox, before anything runs) when a graded language's
    toolchain is missing here, or node cannot load lodash for the JavaScript tests.
    """
    from cmx.mlperf.scoring.sandbox import LanguageUnavailable, Limits, Program

    graded = [p for p in problems if p.language in GRADED_LANGUAGES]
    if not graded:
        raise ValueError("none of the MBXP samples is in a language evaluate_mbxp.py grades "
                         f"({', '.join(GRADED_LANGUAGES)})")
    if any(p.language == "javascript" and _LODASH.search(p.test) for p in graded):
        probe = run([Program("javascript", LODASH_PROBE)], Limits(seconds=TIMEOUT_S), workers=1)[0]
        if not probe.passed:
            raise LanguageUnavailable("MBXP's JavaScript tests require node's lodash module, which a sandboxed "
                                      f"program cannot load here ({_last_line(probe.stderr)})", hint=LODASH_HINT)
    programs = [Program(p.language, program_source(p)) for p in graded]
    outcomes = run(programs, Limits(seconds=TIMEOUT_S), workers=workers)
    passed_by: dict[str, int] = {}
    graded_by: dict[str, int] = {}
    for problem, outcome in zip(graded, outcomes, strict=True):
        passed_by[problem.language] = passed_by.get(problem.language, 0) + int(outcome.passed)
        graded_by[problem.language] = graded_by.get(problem.language, 0) + 1
    passed = sum(passed_by.values())
    return MbxpResult(100 * passed / len(graded), passed, len(graded), tuple(passed_by.items()),
                      tuple(graded_by.items()), tuple(o.status for o in outcomes))


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return next((line for line in lines if "Cannot find module" in line), lines[-1] if lines else "no output")


__all__ = ["GRADED_LANGUAGES", "TIMEOUT_S", "MbxpProblem", "MbxpResult", "extract_solution", "grade",
           "program_source"]
