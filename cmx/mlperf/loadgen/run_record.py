"""A harness run as the checks after it read it: the files it leaves in its folder, cmx's FAILED verdict, why a run
proves nothing (`run_failures`), and the `TEST FAIL: <reason>` lines a compliance verification writes for it.

The harness writes these and the compliance tests (compliance.py, test01/06/07/09.py) read them; both import this
module, which imports neither.
"""

from __future__ import annotations

import json
from pathlib import Path

RESULT_JSON = "result.json"  # the harness's record of one test (HarnessResult)
ACCURACY_LOG = "mlperf_log_accuracy.json"
ACCURACY_TXT = "accuracy.txt"
FAILED = "FAILED"  # cmx's verdict on a test that went wrong (failed samples, errors in its logs), whatever LoadGen said
FAIL_REASON = "TEST FAIL: "  # a verification file's line giving why the test failed (also verify_performance.py's)


def run_failures(folder: Path, what: str) -> list[str]:
    """Why the run in `folder` proves nothing, from the harness's record of it (result.json): samples that failed in
    the backend, cmx's verdict FAILED, or no sample completed. [] when the record shows none of these, or there is
    no record (logs made by another harness are judged as they are)."""
    path = Path(folder) / RESULT_JSON
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        failed, completed = int(data.get("failed_samples") or 0), int(data.get("completed_samples") or 0)
        validity = data.get("validity")
    except (OSError, ValueError, TypeError, AttributeError):
        return [f"{what}'s {RESULT_JSON} cannot be read: run it again"]
    if failed:
        return [f"{what} failed: {failed} of {max(completed, failed)} samples failed in the backend and were "
                f"answered empty (its {RESULT_JSON} says why)"]
    if validity == FAILED:
        return [f"{what} failed (its {RESULT_JSON} says why)"]
    if completed == 0:
        return [f"{what} completed no sample"]
    return []


def fail_reasons(text: str) -> list[str]:
    """The `TEST FAIL: <reason>` lines of a verification file, each reason without the prefix."""
    return [line.strip()[len(FAIL_REASON):] for line in text.splitlines() if line.strip().startswith(FAIL_REASON)]


__all__ = ["ACCURACY_LOG", "ACCURACY_TXT", "FAILED", "FAIL_REASON", "RESULT_JSON", "fail_reasons", "run_failures"]
