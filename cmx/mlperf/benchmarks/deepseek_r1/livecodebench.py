"""What deepseek-r1's LiveCodeBench grading keeps of its own: the release, and the tests file beside the pickle.

The grading is the one gpt-oss-120b shares (cmx.mlperf.scoring.livecodebench). What differs:

- the release: language/deepseek-r1/eval_accuracy.py (mlcommons/inference b66003e)
  `load_lcb_benchmark` and `evaluate_livecodebench` build lcb_runner's benchmark with
  `release_version="release_v1"` (lines 499 and 541; gpt-oss-120b's eval_accuracy.py says
  "release_v6");
- where the problems come from: the reference loads `livecodebench/code_generation_lite` through
  LiveCodeBench's loader at the dataset's moving main branch; cmx's get-dataset-deepseek-r1 downloads
  it at a pinned commit and keeps the rows the code samples name, in one file beside the pickle
  (dataset.TESTS_FILE).
"""

from __future__ import annotations

from pathlib import Path

from cmx.mlperf.scoring.livecodebench import Problem, load_problems

RELEASE = "release_v1"  # eval_accuracy.py:499 load_lcb_benchmark: release_version="release_v1"


def load_tests(path: Path) -> dict[str, Problem]:
    """The problems of the tests file written beside the dataset pickle, by question_id."""
    return load_problems([path], hint='get the dataset again with `cmx run "get dataset deepseek-r1"`, which '
                                      "writes the tests beside it")


__all__ = ["RELEASE", "load_tests"]
