"""Compliance TEST07 (accuracy in performance mode): its audit.config, and the verification that writes
verify_accuracy.txt.

TEST07 is for benchmarks whose accuracy and performance sets differ (the round lists it): a
performance-mode run, on the set the benchmark names for it, with the benchmark's
compliance/TEST07/<benchmark>/audit.config (mlcommons/inference b66003e; kept verbatim under
cmx/mlperf/loadgen/audit/TEST07/) logging every sample; then the benchmark's accuracy script
scores that log, and the score must reach `test07_accuracy_threshold` of the same file.
`format_verify_accuracy_txt` writes what compliance/TEST07/run_verification.py writes: the
script's output, then its summary (`Accuracy check pass: True`, `TEST PASS`), which the
submission checker reads ("TEST PASS" in verify_accuracy.txt). A run that failed (the harness's result.json:
run_record.run_failures) is not scored: its file gives the reasons, as `TEST FAIL: ...` lines, and no score.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx.errors import CmxError
from cmx.mlperf.loadgen.run_record import FAIL_REASON, run_failures

AUDIT_DIR = Path(__file__).parent / "audit"
VERIFY_TXT = "verify_accuracy.txt"
SCORE_PATTERN = r"'exact_match':\s*([\d.]+)"  # run_verification.py --score-pattern default


class ComplianceAuditMissing(CmxError):
    """The round asks for a compliance test that has no audit.config for this benchmark."""


def audit_config(test: str, benchmark: str) -> str:
    """The text of compliance/<test>/<benchmark>/audit.config."""
    path = AUDIT_DIR / test / f"{benchmark}.config"
    if not path.is_file():
        raise ComplianceAuditMissing(f"cmx has no {test} audit.config for {benchmark}",
                                     hint=f"add mlcommons/inference compliance/{test}/{benchmark}/audit.config "
                                          f"as {path}")
    return path.read_text(encoding="utf-8")


def audit_values(text: str) -> dict[str, str]:
    """`key = value` lines by their last key part, comments (also after a value) dropped, as the verifiers
    parse them."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = (p.strip() for p in line.split("=", 1))
        parts = key.split(".")
        if len(parts) >= 3:
            out[parts[-1]] = value.split("#", 1)[0].strip()
    return out


def threshold(text: str) -> float:
    """run_verification.py parse_audit_config: `*.*.test07_accuracy_threshold`."""
    value = audit_values(text).get("test07_accuracy_threshold")
    if value is None:
        raise ComplianceAuditMissing("the TEST07 audit.config sets no test07_accuracy_threshold")
    return float(value)


@dataclass(frozen=True)
class Test07Result:
    score: float | None
    threshold: float
    run_failures: tuple[str, ...] = ()   # the run failed: not scored

    @property
    def passed(self) -> bool:
        return not self.run_failures and self.score is not None and self.score >= self.threshold


def verify(values: Mapping[str, float | int], accuracy_threshold: float) -> Test07Result:
    """The accuracy script's result against the threshold: its exact_match, as run_verification.py parses it."""
    printed = _script_output(values)
    match = re.search(SCORE_PATTERN, printed)
    return Test07Result(float(match.group(1)) if match else None, accuracy_threshold)


def _script_output(values: Mapping[str, float | int]) -> str:
    return "\nResults\n\n" + repr({k: v for k, v in values.items()}) + "\n"


def format_verify_accuracy_txt(values: Mapping[str, float | int], result: Test07Result) -> str:
    """verify_accuracy.txt as run_verification.py writes it: the script's output, then the summary."""
    bar = "=" * 80
    lines = [_script_output(values).rstrip("\n"), "", bar, "TEST07 Verification Summary", bar]
    if result.run_failures:
        lines += [FAIL_REASON + reason for reason in result.run_failures]
    elif result.score is not None:
        lines += [f"Accuracy score: {result.score}", f"Accuracy threshold: {result.threshold}",
                  f"Accuracy check pass: {result.passed}", "TEST PASS" if result.passed else "TEST FAIL"]
    else:
        lines += ["Error: Could not parse accuracy score", "TEST FAIL"]
    return "\n".join(lines) + "\n"


def verify_run(output_dir: Path, dataset: Path, tokenizer_dir: Path, *, benchmark: str,
               rows: int | None = None) -> Path:
    """Score a TEST07 run's log with the benchmark's accuracy script on the set TEST07 reads, against the
    audit.config's threshold, and write verify_accuracy.txt beside it (as run_verification.py does)."""
    from cmx.mlperf.benchmarks import benchmark_for, dataset_for_test

    path = Path(output_dir) / VERIFY_TXT
    failed = tuple(run_failures(Path(output_dir), "the TEST07 run"))
    limit = threshold(audit_config("TEST07", benchmark))
    if failed:  # empty answers scored would say nothing (and an empty log is no log to score)
        path.write_text(format_verify_accuracy_txt({}, Test07Result(None, limit, failed)), encoding="utf-8")
        return path
    bench = benchmark_for(benchmark)
    data = dataset_for_test(bench, dataset, "test07")
    if rows is not None:
        data = data.limit(min(rows, len(data)))
    values = bench.score(Path(output_dir) / "mlperf_log_accuracy.json", data, tokenizer_dir)
    result = verify(values, limit)
    path.write_text(format_verify_accuracy_txt(values, result), encoding="utf-8")
    return path


def passes(text: str) -> bool:
    """The submission checker's verdict: compliance_check.py looks for "TEST PASS"."""
    return "TEST PASS" in text


__all__ = [
    "AUDIT_DIR",
    "SCORE_PATTERN",
    "VERIFY_TXT",
    "ComplianceAuditMissing",
    "Test07Result",
    "audit_config",
    "audit_values",
    "format_verify_accuracy_txt",
    "passes",
    "threshold",
    "verify",
    "verify_run",
]
