"""LiveCodeBench grading for deepseek-r1 and gpt-oss-120b: code_generation_lite problems, code run in the sandbox.

Both references grade a code sample the same way (mlcommons/inference b66003e): deepseek-r1's
eval_accuracy.py `evaluate_livecodebench` (lines 515-567) and gpt-oss-120b's eval_accuracy.py
`evaluate_livecodebench_detailed` (lines 464-558) return False when there is no code or no
question_id (517 / 473), or when the question_id is not among LiveCodeBench's problems (524 / 484);
otherwise they hand the code to lcb_runner's `codegen_metrics` with `timeout=60` (544 / 504; the same
LiveCodeBench commit, b1e7cab44d61, for both: gpt-oss-120b's submodule is a link to deepseek-r1's),
which:

- takes the tests from `CodeGenerationProblem.get_evaluation_sample`: the public then the private
  cases (the private ones may be stored as base64 of zlib of a pickled JSON string), and
  `metadata.func_name` for a call-based (LeetCode) problem, else standard input;
- runs `testing_util.run_test` in a child process given `(timeout + 1) * tests + 5` seconds in all
  (compute_code_generation_metrics.py:42 `check_correctness`), a child that returns nothing failing
  every test (:47);
- counts the problem solved when every result is positive (`pass_k_utils.extract_instance_results`).

Here each (code, problem) is one run of `lcb_harness.HARNESS` in cmx's sandbox
(`cmx.mlperf.scoring.sandbox`), with that same wall limit and lcb_runner's 4 GB memory comment as
the memory cap. What differs between the two benchmarks (LiveCodeBench's release, where the
problems' file comes from, how rows are counted) stays in each benchmark's package.
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
from typing import NoReturn

from cmx.errors import CmxError

TEST_TIMEOUT_S = 60  # both eval_accuracy.py: mock_args timeout=60, lcb_runner's alarm per test
MEMORY_MB = 4096  # lcb_runner testing_util.run_test's comment: "max memory is set to 4GB"


class LiveCodeBenchError(CmxError):
    """LiveCodeBench's problems are missing or unreadable."""


@dataclass(frozen=True)
class Problem:
    """One code-generation problem's tests, as lcb_runner's `get_evaluation_sample` lays them out."""

    question_id: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    fn_name: str | None  # call-based when set; standard input otherwise

    def wall_seconds(self, timeout_s: int) -> int:
        """compute_code_generation_metrics.py check_correctness: the child's join timeout."""
        return (timeout_s + 1) * len(self.inputs) + 5

    def payload(self, code: str, timeout_s: int) -> str:
        """What the harness reads on stdin."""
        return json.dumps({"code": code, "inputs": list(self.inputs), "outputs": list(self.outputs),
                           "fn_name": self.fn_name, "timeout": timeout_s})


class _JsonTextOnly(pickle.Unpickler):
    """The private tests are a pickled str: refuse any class, so that a pickle cannot run code."""

    def find_class(self, module: str, name: str) -> NoReturn:
        raise pickle.UnpicklingError(f"a LiveCodeBench test pickle may hold text only, not {module}.{name}")


def _private_tests(value: str) -> list[dict[str, object]]:
    try:
        tests: list[dict[str, object]] = json.loads(value)
    except ValueError:  # lcb_runner CodeGenerationProblem.__post_init__: the compressed form
        text = _JsonTextOnly(io.BytesIO(zlib.decompress(base64.b64decode(value.encode("utf-8"))))).load()
        tests = json.loads(text)
    return tests


def encode_private_tests(tests: Sequence[Mapping[str, object]]) -> str:
    """The compressed form code_generation_lite stores private tests in (for generated problems)."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(list(tests))))).decode("ascii")


def problem_from_row(row: Mapping[str, object], where: str = "") -> Problem:
    """A row of code_generation_lite's jsonl (CodeGenerationProblem's fields) as a Problem."""
    try:
        public = json.loads(str(row["public_test_cases"]))
        private = _private_tests(str(row["private_test_cases"]))
        metadata = json.loads(str(row.get("metadata") or "{}"))
        tests = [*public, *private]
        return Problem(str(row["question_id"]), tuple(str(t["input"]) for t in tests),
                       tuple(str(t["output"]) for t in tests), metadata.get("func_name"))
    except (KeyError, TypeError, ValueError, AttributeError, zlib.error, pickle.UnpicklingError, EOFError) as exc:
        place = f"{where}: " if where else ""
        qid = row.get("question_id") if isinstance(row, Mapping) else None
        raise LiveCodeBenchError(f"{place}problem {qid!r} is not a LiveCodeBench "
                                 f"code_generation_lite problem with readable tests: {type(exc).__name__}: {exc}",
                                 hint="download the problems' file again") from None


def load_problems(files: Iterable[Path], *, hint: str = "") -> dict[str, Problem]:
    """The problems of code_generation_lite's jsonl files, by question_id (a later file's row wins)."""
    problems: dict[str, Problem] = {}
    for path in files:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise LiveCodeBenchError(f"cannot read {path}: {exc.strerror or exc}", hint=hint or None) from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                raise LiveCodeBenchError(f"{path}:{number} is not JSON", hint="download the file again") from None
            problem = problem_from_row(row, f"{path}:{number}")
            problems[problem.question_id] = problem
    return problems


def run_problems(codes: Sequence[str], problems: Sequence[Problem], *, timeout_s: int = TEST_TIMEOUT_S,
                 workers: int = 2) -> list[bool]:
    """Whether each code passes every test of its problem, each run in the sandbox within its problem's
    `wall_seconds`."""
    from cmx.mlperf.scoring.lcb_harness import HARNESS
    from cmx.mlperf.scoring.sandbox import Limits, Program, run_programs

    if len(codes) != len(problems):
        raise ValueError(f"{len(codes)} codes for {len(problems)} problems")
    if not codes:
        return []
    programs = [Program("python", HARNESS, stdin=p.payload(c, timeout_s)) for c, p in zip(codes, problems, strict=True)]
    limits = [Limits(seconds=float(p.wall_seconds(timeout_s)), memory_mb=MEMORY_MB) for p in problems]
    outcomes = run_programs(programs, limits, workers=workers)
    return [o.passed and _verdict_passed(o.stdout) for o in outcomes]


def _verdict_passed(stdout: str) -> bool:
    """The harness's verdict line; none (the program ended the process itself) is a failure."""
    lines = stdout.strip().splitlines()
    try:
        verdict = json.loads(lines[-1]) if lines else None
    except ValueError:
        return False
    return isinstance(verdict, dict) and verdict.get("passed") is True


def grade(samples: Sequence[tuple[str | None, str]], problems: Mapping[str, Problem], *,
          timeout_s: int = TEST_TIMEOUT_S, workers: int = 2) -> list[bool]:
    """Whether each (code, question_id) passes, as both references' evaluate_livecodebench grade it: no code,
    no question_id, or a question_id missing from `problems` is a failure that runs nothing."""
    runnable = [n for n, (code, qid) in enumerate(samples) if code and qid and qid in problems]
    passed = run_problems([str(samples[n][0]) for n in runnable], [problems[samples[n][1]] for n in runnable],
                          timeout_s=timeout_s, workers=workers)
    out = [False] * len(samples)
    for n, ok in zip(runnable, passed, strict=True):
        out[n] = ok
    return out


__all__ = ["MEMORY_MB", "TEST_TIMEOUT_S", "LiveCodeBenchError", "Problem", "encode_private_tests", "grade",
           "load_problems", "problem_from_row", "run_problems"]
