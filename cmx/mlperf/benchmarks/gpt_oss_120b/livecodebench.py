"""What gpt-oss-120b's LiveCodeBench grading keeps of its own: the release, the problems' folder, rows by index.

The grading is the one deepseek-r1 shares (cmx.mlperf.scoring.livecodebench). What differs:

- the release: language/gpt-oss-120b/eval_accuracy.py (mlcommons/inference b66003e)
  `load_lcb_benchmark` and `evaluate_livecodebench_detailed` say `release_version="release_v6"`
  (lines 438 and 501);
- where the problems come from: MLCommons' gpt-oss folder does not ship them (the reference reads
  them through LiveCodeBench's own loader), so they are the code_generation_lite `test*.jsonl` files
  a user puts in the `livecodebench/` folder beside the sets (`--input lcb_path=DIR`);
- rows: eval_mlperf_accuracy.py `process_livecodebench_batch` (lines 107-248) grades log entries by
  their index, so
  `run_rows` answers by row.

The per-row limit is lcb_runner's, as for deepseek-r1: `process_livecodebench_batch` calls
`future.result(timeout=80)` (line 191) only on futures `as_completed` (line 185) has already
yielded, which are done, so that 80 s never cuts a row short; what does is lcb_runner's
`check_correctness` join timeout, `(timeout + 1) * tests + 5` (compute_code_generation_metrics.py:42).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from cmx.mlperf.scoring.livecodebench import LiveCodeBenchError, Problem, grade, load_problems

FOLDER = "livecodebench"
RELEASE = "release_v6"  # eval_accuracy.py:438 load_lcb_benchmark: release_version="release_v6"


def read_problems(folder: Path) -> dict[str, Problem]:
    """Every problem in the code_generation_lite JSON-lines files under `folder`."""
    files = sorted(Path(folder).glob("*.jsonl"))
    if not files:
        raise LiveCodeBenchError(f"no LiveCodeBench problems (*.jsonl) in {folder}",
                                 hint=f"put the code_generation_lite {RELEASE} test*.jsonl files there "
                                      "(get-dataset-gpt-oss-120b --input lcb_path=DIR does)")
    return load_problems(files)


def run_rows(jobs: Iterable[tuple[int, str, str]], problems: Mapping[str, Problem], *,
             workers: int = 2) -> dict[int, bool]:
    """Run (row, program, question_id) jobs in the sandbox; which rows passed (an unknown question_id fails)."""
    jobs = list(jobs)
    passed = grade([(code, qid) for _, code, qid in jobs], problems, workers=workers)
    return {row: ok for (row, _, _), ok in zip(jobs, passed, strict=False)}


__all__ = ["FOLDER", "RELEASE", "read_problems", "run_rows"]
