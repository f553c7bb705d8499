"""The compliance tests cmx runs (TEST01, TEST04, TEST06, TEST07, TEST09): each one's mode, folder, verification files
and verdict.

The round data lists a benchmark's tests (constants.py models_TEST0x); the harness runs each as a
performance-mode run with its audit.config, the app verifies it, the packager copies its folder,
the checker reads its verdict. This table is what those generic parts look a test up in.

No verification says PASS for a test whose runs failed: each reads the harness's record (result.json) of every run
it compares (run_record.run_failures: samples that failed in the backend and were answered empty, cmx's verdict
FAILED, no sample completed) and writes, in place of its checks' verdict, one `TEST FAIL: <reason>` line for each; the
judges report those lines. The reasons are counts and names only: a server's message, which a hostile server
controls, never reaches a file whose verdict is a search for "TEST PASS".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cmx.errors import CmxError
from cmx.mlperf.loadgen.run_record import fail_reasons

# a test's verdict on a folder holding its verification files: (folder, benchmark, the round's accuracy metrics)
# -> why the submission checker fails it, [] when it passes
Judge = Callable[[Path, str, Sequence[str]], list[str]]


@dataclass(frozen=True)
class ComplianceTest:
    name: str                        # TEST06: the folder in the tree
    verify_files: tuple[str, ...]    # what its verification writes beside the run
    judge: Judge
    copies_performance: bool         # run_verification.py copies the run's summary and detail into performance/run_1
    accuracy_files: tuple[str, ...] = ()  # what else goes into accuracy/ when the verification wrote it (Part III)
    copies_accuracy_log: bool = True  # its accuracy/ holds the run's accuracy log (TEST04's folder has no accuracy/)

    @property
    def mode(self) -> str:
        """The app's and harness's name for it: test06."""
        return self.name.lower()

    def failures(self, folder: Path, benchmark: str, metrics: Sequence[str]) -> list[str]:
        """Why the submission checker fails this test in `folder` (a run's, or the tree's TEST0x): [] when it passes."""
        return self.judge(Path(folder), benchmark, metrics)


def _says_pass(file: str, passes: Callable[[str], bool]) -> Judge:
    """The verdict of a test that one verification file decides (TEST04, TEST06, TEST07, TEST09)."""
    def judge(folder: Path, benchmark: str, metrics: Sequence[str]) -> list[str]:
        path = folder / file
        if not path.is_file():
            return [f"{file} is missing: the verification did not run"]
        text = path.read_text(encoding="utf-8", errors="replace")
        if passes(text):
            return []
        return [f"{file}: {reason}" for reason in fail_reasons(text)] or [f"{file} says the test failed its checks"]
    return judge


def _test06_passes(text: str) -> bool:
    from cmx.mlperf.loadgen.test06 import verify_accuracy_txt_passes

    return verify_accuracy_txt_passes(text)


def _test07_passes(text: str) -> bool:
    from cmx.mlperf.loadgen.test07 import passes

    return passes(text)


def _test09_passes(text: str) -> bool:
    from cmx.mlperf.loadgen.test09 import passes

    return passes(text)


def _test04_passes(text: str) -> bool:
    from cmx.mlperf.loadgen.test04 import passes

    return passes(text)


def _test01(folder: Path, benchmark: str, metrics: Sequence[str]) -> list[str]:
    from cmx.mlperf.loadgen.test01 import checker_failures

    return checker_failures(folder, benchmark, metrics)


TESTS: dict[str, ComplianceTest] = {
    "TEST01": ComplianceTest("TEST01", ("verify_accuracy.txt", "verify_performance.txt"), _test01, True,
                             ("accuracy.txt", "baseline_accuracy.txt", "compliance_accuracy.txt")),
    "TEST04": ComplianceTest("TEST04", ("verify_performance.txt",),
                             _says_pass("verify_performance.txt", _test04_passes), True, copies_accuracy_log=False),
    "TEST06": ComplianceTest("TEST06", ("verify_accuracy.txt",), _says_pass("verify_accuracy.txt", _test06_passes),
                             False),
    "TEST07": ComplianceTest("TEST07", ("verify_accuracy.txt",), _says_pass("verify_accuracy.txt", _test07_passes),
                             True),
    "TEST09": ComplianceTest("TEST09", ("verify_output_len.txt",), _says_pass("verify_output_len.txt", _test09_passes),
                             True),
}
MODES = tuple(t.mode for t in TESTS.values())


class UnknownComplianceTest(CmxError):
    """A round names a compliance test cmx does not run."""


def compliance_test(name: str) -> ComplianceTest:
    """The test called `name` (TEST07) or by its mode (test07)."""
    found = TESTS.get(name.upper())
    if found is None:
        raise UnknownComplianceTest(f"cmx does not run compliance test {name}", hint=f"it runs {', '.join(TESTS)}")
    return found


def modes_of(names: Iterable[str]) -> tuple[str, ...]:
    """The app modes of the round's compliance tests: (TEST07, TEST09) -> (test07, test09)."""
    return tuple(compliance_test(n).mode for n in names)


def write_audit_config(mode: str, output: Path, benchmark: str,
                       test04_counts: Mapping[tuple[str, str], int] | None = None) -> Path:
    """Write the audit.config of the compliance test `mode` into `output`, where LoadGen reads it (`test04_counts`:
    TEST04's per-model query counts, by LoadGen model and scenario, from the round)."""
    from cmx.mlperf.loadgen.test06 import AUDIT_CONFIG_NAME

    if mode == "test06":
        from cmx.mlperf.loadgen.test06 import write_audit_config as write_test06

        return write_test06(output)
    if mode == "test01":
        from cmx.mlperf.loadgen.test01 import audit_config as test01_audit

        text = test01_audit(benchmark)
    elif mode == "test04":
        from cmx.mlperf.loadgen.test04 import audit_config as test04_audit

        text = test04_audit(test04_counts)
    else:
        from cmx.mlperf.loadgen.test07 import audit_config

        text = audit_config(compliance_test(mode).name, benchmark)
    path = Path(output) / AUDIT_CONFIG_NAME
    path.write_text(text, encoding="utf-8")
    return path


__all__ = ["MODES", "TESTS", "ComplianceTest", "Judge", "UnknownComplianceTest", "compliance_test", "modes_of",
           "write_audit_config"]
