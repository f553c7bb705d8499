"""Compliance TEST04 (the SUT does not cache samples): its audit.config, the run's query count, and the verification
that writes verify_performance.txt.

TEST04 is a performance-mode run in which LoadGen issues one sample over and over (compliance/TEST04/audit.config,
mlcommons/inference b66003e: `performance_issue_same = 1`, `performance_issue_same_index = 3`). A SUT that caches
its answers would run it faster than the performance run; compliance/TEST04/verify_performance.py compares the two
runs' mlperf_log_summary.txt and passes when the TEST04 score is less than 10 % above the performance run's (20 %
for a SingleStream score at most 200,000, where a short latency varies more from run to run). The score is
samples per second for Offline, completed samples per second for Server (with the same target latency), and
1e9 / LoadGen's early-stopping estimate of the 90th percentile latency (ns) for SingleStream; an INVALID run fails.
`format_verify_performance_txt` writes the script's output, line for line; its "TEST PASS" is what the submission
checker looks for (checks/compliance_check.py). run_verification.py lays the test out as TEST04/verify_performance.txt
and TEST04/performance/run_1/mlperf_log_{summary,detail}.txt (no accuracy log): the packager copies that.

The audit.config's per-model `min_query_count` lines (round data: a scenario's test04_min_query_count, 20 queries
for the text-to-video benchmark, where mlperf.conf asks 248 of an Offline run) are not applied by LoadGen, which
reads an audit.config with the model "*"; the reference's SUT applies them itself (the text-to-video reference's
run_mlperf.py reads audit.config with FromConfig), and so does cmx's harness (`run_min_query_count`). They lower the
count because the run lasts the round's ten minutes anyway; a run shorter than the round's min_duration (cmx's
_short) keeps its own count where that is larger, since nothing else would make up the queries (a SingleStream run's
early stopping estimates its 90th percentile from 64 queries at least), as a short TEST09 run keeps every count its
audit.config asks for.

Where cmx is stricter than the script: verify_performance.py compares the Server target latency with a regular
expression (`target_latency (ns)`) that never matches the summary's line, so it never checks it; cmx does. A run that
failed (the harness's result.json: run_record.run_failures) fails the test whatever its score, each reason a
`TEST FAIL: ...` line, and a scenario mismatch, which the script reports without the prefix, carries it too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cmx.errors import CmxError
from cmx.mlperf.loadgen.run_record import FAIL_REASON, run_failures
from cmx.mlperf.loadgen.test06 import AUDIT_HEADER

VERIFY_TXT = "verify_performance.txt"
SUMMARY_LOG = "mlperf_log_summary.txt"
PASS = "TEST PASS"
SCENARIOS = ("MultiStream", "Offline", "SingleStream", "Server")  # the official file's order
REPEATED_SAMPLE = 3  # performance_issue_same_index: the sample LoadGen issues every time
THRESHOLD = 0.10
LATENCY_THRESHOLD = 0.20          # SingleStream, at a score (1e9 / latency in ns) of at most LATENCY_SCORE_LIMIT
LATENCY_SCORE_LIMIT = 200_000.0


class Test04Error(CmxError):
    """TEST04 cannot be verified: a run's summary is missing."""


def audit_config(counts: Mapping[tuple[str, str], int] | None = None) -> str:
    """compliance/TEST04/audit.config: every scenario a performance run issuing one sample, and the per-model counts
    `counts` gives by (LoadGen model, scenario): the round's test04_min_query_count of the run's benchmark (the
    official file lists them for every benchmark; cmx writes the run's own)."""
    lines = [AUDIT_HEADER.rstrip("\n")]
    for scenario in SCENARIOS:
        lines += [f"*.{scenario}.mode = 2", f"*.{scenario}.performance_issue_unique = 0",
                  f"*.{scenario}.performance_issue_same = 1",
                  f"*.{scenario}.performance_issue_same_index = {REPEATED_SAMPLE}"]
    lines += [f"{model}.{scenario}.min_query_count = {count}" for (model, scenario), count in (counts or {}).items()]
    return "\n".join(lines) + "\n"


def audit_min_query_count(text: str, loadgen_model: str, scenario: str) -> int | None:
    """The `<model>.<scenario>.min_query_count` line of an audit.config's text (what LoadGen, reading it with the
    model "*", skips); None when it has none."""
    wanted = f"{loadgen_model}.{scenario}.min_query_count"
    found = None
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, value = (p.strip() for p in line.split("=", 1))
            if key == wanted:
                found = int(value)
    return found


def run_min_query_count(audit_count: int, conf_count: int, *, full_duration: bool) -> int:
    """The TEST04 run's min_query_count: the audit.config's (the reference's SUT applies it in place of user.conf's),
    or, in a run shorter than the round's min_duration, the larger of it and user.conf's."""
    return audit_count if full_duration else max(audit_count, conf_count)


# --- verification: verify_performance.py on two summaries -------------------------------------------------

_EARLY_STOPPING = {"SingleStream": re.compile(r".*Early stopping (90th|90.0th|99.9th) percentile estimate"),
                   "MultiStream": re.compile(r".*Early stopping (99th|99.0th) percentile estimate")}
_THROUGHPUT = {"Server": "Completed samples per second", "Offline": "Samples per second"}


@dataclass
class _Summary:
    """What verify_performance.py takes from one summary, read line by line as it reads it."""

    scenario: str = ""
    score: float | str = 0           # the script keeps Offline's and Server's as the text, a latency's as 1e9 / ns
    target_latency: str | None = None
    invalid: bool = False
    warnings: list[str] = field(default_factory=list)
    latency_mismatch: bool = False


def _read_summary(text: str, which: str, reference_latency: str | None = None) -> _Summary:
    """One summary as the script's loop reads it; it stops at `Result is : INVALID` (the script exits there) and,
    in the test summary, at a target latency other than `reference_latency`."""
    s = _Summary()
    for line in text.splitlines(keepends=True):
        if line.startswith("Scenario"):
            s.scenario = line.split(": ", 1)[1].strip()
            continue
        pattern = _EARLY_STOPPING.get(s.scenario)
        if pattern is not None and pattern.match(line):
            s.score = 1e9 / float(line.split(": ", 1)[1].strip())
            continue
        if s.scenario == "Server" and line.startswith("target_latency (ns)"):
            s.target_latency = line.split(": ", 1)[1].strip()
            if reference_latency is not None and s.target_latency != reference_latency:
                s.latency_mismatch = True
                return s
            continue
        if s.scenario in _THROUGHPUT and line.startswith(_THROUGHPUT[s.scenario]):
            s.score = line.split(": ", 1)[1].strip()
            continue
        if line.startswith("Result is") and line.split(": ", 1)[1].strip() == "INVALID":
            s.invalid = True
            return s
        if re.match(r"\d+ ERROR", line):
            s.warnings.append(f"WARNING: {line.split(' ', 1)[0].strip()} ERROR reported in {which} results")
    return s


@dataclass(frozen=True)
class Test04Comparison:
    """verify_performance.py's output on the two summaries: its lines, and whether it printed TEST PASS."""

    lines: tuple[str, ...]
    reference_score: float | None
    test_score: float | None

    @property
    def passed(self) -> bool:
        return PASS in self.lines


def compare_summaries(reference: str, test: str) -> Test04Comparison:
    """The performance run's summary (`reference`) against the TEST04 run's (`test`), as verify_performance.py
    compares them: a TEST04 score at least the threshold above the reference's fails."""
    lines = ["Verifying performance."]
    ref = _read_summary(reference, "reference")
    lines += ref.warnings
    if ref.invalid:
        return Test04Comparison((*lines, FAIL_REASON + "Reference results are invalid"), None, None)
    got = _read_summary(test, "test", ref.target_latency)
    lines += got.warnings
    if got.latency_mismatch:
        return Test04Comparison((*lines, FAIL_REASON + "Server target latency mismatch"), None, None)
    if got.invalid:
        return Test04Comparison((*lines, FAIL_REASON + "Test results are invalid"), None, None)
    if got.scenario != ref.scenario:
        return Test04Comparison((*lines, FAIL_REASON + "Test and reference scenarios do not match!"), None, None)
    ref_score, test_score = float(ref.score), float(got.score)
    lines += [f"reference score = {ref.score}", f"test score = {got.score}"]
    threshold = THRESHOLD
    # single-stream latencies can be short, and an OS's noise large beside them: the script allows 20 %
    if ref.scenario == "SingleStream" and ref_score <= LATENCY_SCORE_LIMIT:
        threshold = LATENCY_THRESHOLD
    if test_score < ref_score * (1 + threshold):
        lines.append(PASS)
    else:
        lines.append(FAIL_REASON + "Test score invalid")
    return Test04Comparison(tuple(lines), ref_score, test_score)


def format_verify_performance_txt(comparison: Test04Comparison, failures: Sequence[str] = ()) -> str:
    """verify_performance.txt: the script's output; where a compared run failed (`failures`), a `TEST FAIL: <reason>`
    line for each in place of its TEST PASS."""
    lines = [line for line in comparison.lines if not (failures and line == PASS)]
    lines += [FAIL_REASON + reason for reason in failures]
    return "\n".join(lines) + "\n"


def verify_run(output_dir: Path, performance_dir: Path) -> Path:
    """run_verification.py on a TEST04 run: verify_performance.txt beside its logs, against the performance run in
    `performance_dir` (the same scenario's, as `-r` names it)."""
    output_dir, performance_dir = Path(output_dir), Path(performance_dir)
    for needed, what in ((performance_dir / SUMMARY_LOG, "performance"), (output_dir / SUMMARY_LOG, "TEST04")):
        if not needed.is_file():
            raise Test04Error(f"TEST04 compares the {what} run's summary, and {needed} is missing",
                              hint="run the performance test first (the app runs performance, accuracy, then the "
                                   "compliance tests), and TEST04 to its end")
    comparison = compare_summaries((performance_dir / SUMMARY_LOG).read_text(encoding="utf-8", errors="replace"),
                                   (output_dir / SUMMARY_LOG).read_text(encoding="utf-8", errors="replace"))
    failures = [*run_failures(output_dir, "the TEST04 run"), *run_failures(performance_dir, "the performance run")]
    path = output_dir / VERIFY_TXT
    path.write_text(format_verify_performance_txt(comparison, failures), encoding="utf-8")
    return path


def passes(text: str) -> bool:
    """The submission checker's verdict: compliance_check.py looks for "TEST PASS" in verify_performance.txt."""
    return any(PASS in line for line in text.splitlines())


__all__ = [
    "VERIFY_TXT",
    "Test04Comparison",
    "Test04Error",
    "audit_config",
    "audit_min_query_count",
    "compare_summaries",
    "format_verify_performance_txt",
    "passes",
    "run_min_query_count",
    "verify_run",
]
