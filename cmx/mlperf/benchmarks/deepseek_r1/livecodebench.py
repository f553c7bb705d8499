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

import json
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.errors import StepError
from cmx.mlperf.scoring.livecodebench import Problem, load_problems

if TYPE_CHECKING:
    from cmx.execute.context import StepContext

RELEASE = "release_v1"  # eval_accuracy.py:499 load_lcb_benchmark: release_version="release_v1"


def load_tests(path: Path) -> dict[str, Problem]:
    """The problems of the tests file written beside the dataset pickle, by question_id."""
    return load_problems([path], hint='get the dataset again with `cmx run "get dataset deepseek-r1"`, which '
                                      "writes the tests beside it")


def fetch_tests(step: StepContext, code_ids: list[str], dest: Path) -> None:
    """Write to `dest` LiveCodeBench's rows for the question_ids the code samples name, from the step's
    tests_repo at tests_revision (a commit: the reference pins none)."""
    from cmx.tools.download import download
    from cmx.tools.huggingface import is_commit

    if not code_ids:
        dest.write_text("", encoding="utf-8")
        return
    repo, revision = step.inputs["tests_repo"], step.inputs["tests_revision"]
    if not is_commit(revision):
        raise StepError(f"the dataset has {len(code_ids)} LiveCodeBench samples, whose tests come from {repo}, and "
                        f"tests_revision is {revision!r}, not a commit: the reference loads that dataset's moving main "
                        "branch and pins none",
                        hint=f"pass --input tests_revision=COMMIT (40 hex digits; see "
                             f"{step.inputs['endpoint']}/datasets/{repo}/commits/main), and record it with your "
                             "results")
    files = step.inputs["tests_files"].split()
    if step.inputs["tests_sha256"] and len(files) != 1:
        raise StepError("tests_sha256 checks one file, and tests_files names several",
                        hint="give one file, or drop tests_sha256")
    paths = []
    for file in files:
        url = f"{step.inputs['endpoint'].rstrip('/')}/datasets/{repo}/resolve/{revision}/{file}"
        target = step.scratch / "livecodebench" / file
        target.parent.mkdir(parents=True, exist_ok=True)
        got = download(url, target, sha256=step.inputs["tests_sha256"], token=None, retries=step.inputs["retries"],
                       keep_partial=True, on_progress=step.progress(None, f"download {file}").update, log=step.log)
        step.log.info("%s %s at %s: sha256 %s", repo, file, revision, got.sha256)
        paths.append(got.path)
    problems = load_problems(paths)
    missing = [q for q in code_ids if q not in problems]
    if missing:  # the reference grades them as wrong (benchmark_map.get(question_id) is None)
        step.log.warning("%d of %d LiveCodeBench question_ids are not in %s at %s (%s...): those samples score 0, as "
                         "in the reference", len(missing), len(code_ids), repo, revision, ", ".join(missing[:3]))
    wanted = set(code_ids)
    lines = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and json.loads(line).get("question_id") in wanted:
                lines.append(line + "\n")
    dest.write_text("".join(lines), encoding="utf-8")


__all__ = ["RELEASE", "fetch_tests", "load_tests"]
