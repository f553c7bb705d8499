"""Compliance TEST09 (output length in performance mode): the mean output tokens of every sample within the
audit.config's bounds.

A performance-mode run with the benchmark's compliance/TEST09/<benchmark>/audit.config
(mlcommons/inference b66003e; kept verbatim under cmx/mlperf/loadgen/audit/TEST09/) logs every
sample; compliance/TEST09/run_verification.py decodes each record's data as little-endian int32
ids, takes the mean count (a record without data counts 0) and checks
test09_min_output_tokens <= mean <= test09_max_output_tokens. It guards against outputs truncated
to gain throughput. `format_verify_output_len_txt` writes its verify_output_len.txt, whose
"TEST PASS" the submission checker looks for. A run that failed (the harness's result.json:
run_record.run_failures) fails it whatever its lengths, each reason a `TEST FAIL: ...` line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cmx.mlperf.loadgen.run_record import FAIL_REASON, run_failures
from cmx.mlperf.loadgen.test07 import ComplianceAuditMissing, audit_values

VERIFY_TXT = "verify_output_len.txt"


def bounds(text: str) -> tuple[float, float]:
    """test09_min_output_tokens and test09_max_output_tokens of the audit.config text."""
    values = audit_values(text)
    try:
        return float(values["test09_min_output_tokens"]), float(values["test09_max_output_tokens"])
    except KeyError as exc:
        raise ComplianceAuditMissing(f"the TEST09 audit.config sets no {exc.args[0]}") from None


@dataclass(frozen=True)
class Test09Result:
    lengths: tuple[int, ...]
    min_tokens: float
    max_tokens: float
    run_failures: tuple[str, ...] = ()   # the run failed: its lengths prove nothing

    @property
    def mean(self) -> float:
        return sum(self.lengths) / len(self.lengths) if self.lengths else 0.0

    @property
    def min_ok(self) -> bool:
        return self.mean >= self.min_tokens

    @property
    def max_ok(self) -> bool:
        return self.mean <= self.max_tokens

    @property
    def passed(self) -> bool:
        return not self.run_failures and bool(self.lengths) and self.min_ok and self.max_ok


def verify(accuracy_log: Path, min_tokens: float, max_tokens: float) -> Test09Result:
    """Every record's output length (its hex data as int32 ids), as run_verification.py counts them."""
    entries = json.loads(Path(accuracy_log).read_text(encoding="utf-8"))
    lengths = []
    for entry in entries:
        data = (entry.get("data") or "").strip()
        try:
            lengths.append(len(bytes.fromhex(data)) // 4)
        except ValueError:
            lengths.append(0)
    return Test09Result(tuple(lengths), min_tokens, max_tokens)


def format_verify_output_len_txt(result: Test09Result) -> str:
    """verify_output_len.txt, line for line as run_verification.py writes it."""
    bar, n = "=" * 80, len(result.lengths)
    lines = [bar, "TEST09: Verify Output Token Length in Performance Mode", bar, "", "Output Token Length Statistics",
             "-" * 40, f"Total samples: {n}", f"Mean output tokens: {result.mean:.2f}",
             f"Min output tokens: {min(result.lengths) if n else 0}",
             f"Max output tokens: {max(result.lengths) if n else 0}"]
    if n:
        std = (sum((x - result.mean) ** 2 for x in result.lengths) / n) ** 0.5
        lines.append(f"Std deviation: {std:.2f}")
    lines += ["", bar, "Verification Results", bar, f"Mean output tokens: {result.mean:.2f}",
              f"Min threshold: {result.min_tokens}", f"Max threshold: {result.max_tokens}",
              f"Min check pass: {result.min_ok}", f"Max check pass: {result.max_ok}", "",
              *([FAIL_REASON + r for r in result.run_failures] or ["TEST PASS" if result.passed else "TEST FAIL"])]
    return "\n".join(lines) + "\n"


def verify_run(output_dir: Path, *, benchmark: str) -> Path:
    """Check a TEST09 run's mean output length against the audit.config's bounds; write verify_output_len.txt
    beside it."""
    from cmx.mlperf.loadgen.test07 import audit_config

    low, high = bounds(audit_config("TEST09", benchmark))
    result = verify(Path(output_dir) / "mlperf_log_accuracy.json", low, high)
    result = Test09Result(result.lengths, low, high, tuple(run_failures(Path(output_dir), "the TEST09 run")))
    path = Path(output_dir) / VERIFY_TXT
    path.write_text(format_verify_output_len_txt(result), encoding="utf-8")
    return path


def passes(text: str) -> bool:
    """The submission checker's verdict: compliance_check.py looks for "TEST PASS"."""
    return "TEST PASS" in text


__all__ = ["VERIFY_TXT", "Test09Result", "bounds", "format_verify_output_len_txt", "passes", "verify", "verify_run"]
