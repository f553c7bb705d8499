"""Compliance TEST06 for LLMs: the audit.config LoadGen reads, and the checks of the accuracy log it samples.

TEST06 is a performance-mode run with `AUDIT_CONFIG_TEST06` in LoadGen's working folder:
LoadGen then logs about 100 sampled outputs to mlperf_log_accuracy.json. `verify` repeats the
checks of mlcommons/inference `compliance/TEST06/run_verification.py` on that log, in
cmx's own code and naming every sample that fails:

- first token (not in Offline, where it reads "Skipped"): the token(s) LoadGen recorded at
  FirstTokenComplete (`token_data`) equal the first token(s) of the completed output;
- EOS: an output ends with at most one EOS token (index 0 is never counted, so an output of
  exactly two EOS tokens passes, as in the reference);
- sample length: the `token_count` the SUT reported equals the number of tokens logged.

`format_verify_accuracy_txt` writes exactly the four lines the script writes, which the
submission checker compares line by line.

Where cmx is stricter than the script: a log with no records is an error (the script passes
it, although it means the audit config was not read), a record without `token_count`
fails the length check (the script stops with a KeyError and writes no verify_accuracy.txt),
and so does a record with no tokens: a sample that failed and was answered empty (the script's
0 == 0 passes it). A run that failed (the harness's result.json: run_record.run_failures) gets
no check lines at all, which the checker needs: its reasons, as `TEST FAIL: ...` lines, then
the failed line.
The token ids are read as int32, what the cmx harness logs (the script's `--dtype int32`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from cmx.errors import CmxError
from cmx.mlperf.loadgen.accuracy_log import AccuracyRecord, read_accuracy_log
from cmx.mlperf.loadgen.run_record import FAIL_REASON, run_failures

# the comment every compliance/TEST0x/audit.config of mlcommons/inference opens with
AUDIT_HEADER = """\
# The format of this config file is 'key = value'.
# The key has the format 'model.scenario.key'. Value is mostly int64_t.
# Model maybe '*' as wildcard. In that case the value applies to all models.
# All times are in milli seconds

# mode dictionary (0 = submission, 1 = accuracy, 2 = performance, 3 = find peak perf)
"""
# compliance/TEST06/audit.config in mlcommons/inference, line for line
AUDIT_CONFIG_TEST06 = AUDIT_HEADER + """\
*.*.mode = 2
*.*.accuracy_log_rng_seed = 720381539243781796
*.*.accuracy_log_sampling_target = 100
*.*.min_query_count = 100
*.*.min_duration = 0
# Turn off equal issue mode for TEST06
*.*.sample_concatenate_permutation = 0
"""
AUDIT_CONFIG_NAME = "audit.config"  # LoadGen looks for this name in its working folder
EOS_TOKEN_ID = 2  # Llama 2's </s>
SCENARIOS = ("Offline", "Server", "Interactive", "SingleStream", "MultiStream")

FIRST_TOKEN_LINE = "First token check pass: {}"
EOS_LINE = "EOS check pass: {}"
LENGTH_LINE = "Sample length check pass: {}"
COMPLETE_LINE = "TEST06 verification complete"
FAILED_LINE = "TEST06 verification failed"


class Test06Error(CmxError):
    """TEST06 cannot be verified: an unknown scenario (log problems raise AccuracyLogError)."""

    __test__ = False  # not a pytest test class


@dataclass(frozen=True)
class Check:
    """One TEST06 check: passed True or False, or None when skipped; `problems` names failing samples."""

    passed: bool | None
    problems: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """What verify_accuracy.txt says: True, False or Skipped."""
        return "Skipped" if self.passed is None else str(self.passed)


@dataclass(frozen=True)
class Test06Result:
    """The three checks of one TEST06 accuracy log."""

    __test__ = False  # not a pytest test class

    scenario: str
    samples: int
    first_token: Check
    eos: Check
    sample_length: Check
    run_failures: tuple[str, ...] = ()   # the run failed: its checks prove nothing

    @property
    def passed(self) -> bool:
        """True when the run did not fail and no check failed (a skipped first-token check passes, as the checker
        reads it)."""
        return not self.run_failures and all(check.passed is not False
                                             for check in (self.first_token, self.eos, self.sample_length))

    @property
    def problems(self) -> list[str]:
        return [*self.run_failures, *self.first_token.problems, *self.eos.problems, *self.sample_length.problems]


def write_audit_config(folder: Path | str) -> Path:
    """Write audit.config into `folder` (where LoadGen runs) and return its path."""
    path = Path(folder) / AUDIT_CONFIG_NAME
    path.write_text(AUDIT_CONFIG_TEST06, encoding="utf-8")
    return path


def verify(accuracy_log_path: Path | str, scenario: str, eos_token_id: int = EOS_TOKEN_ID) -> Test06Result:
    """Check the accuracy log of a TEST06 run made in `scenario` (Interactive counts as Server), and the harness's
    record of the run beside it."""
    if scenario not in SCENARIOS:
        raise Test06Error(f"unknown scenario {scenario!r}", hint=f"use one of {', '.join(SCENARIOS)}")
    failed = tuple(run_failures(Path(accuracy_log_path).parent, "the TEST06 run"))
    records = read_accuracy_log(accuracy_log_path)
    first_token = Check(None) if scenario == "Offline" else _first_token_check(records)
    return Test06Result(scenario, len(records), first_token, _eos_check(records, eos_token_id),
                        _length_check(records), failed)


def format_verify_accuracy_txt(result: Test06Result) -> str:
    """verify_accuracy.txt, line for line what run_verification.py writes; for a run that failed, its reasons and the
    failed line only (no check passes for it)."""
    if result.run_failures:
        return "".join(f"{FAIL_REASON}{reason}\n" for reason in result.run_failures) + f"{FAILED_LINE}\n"
    lines = [
        FIRST_TOKEN_LINE.format(result.first_token.verdict),
        EOS_LINE.format(result.eos.verdict),
        LENGTH_LINE.format(result.sample_length.verdict),
        COMPLETE_LINE if result.passed else FAILED_LINE,
    ]
    return "".join(f"{line}\n" for line in lines)


def verify_accuracy_txt_passes(text: str) -> bool:
    """Whether the submission checker accepts this verify_accuracy.txt (its compliance_check reading)."""
    lines = {line.strip() for line in text.splitlines()}
    first_token = FIRST_TOKEN_LINE.format(True) in lines or FIRST_TOKEN_LINE.format("Skipped") in lines
    return first_token and EOS_LINE.format(True) in lines and LENGTH_LINE.format(True) in lines


def _first_token_check(records: list[AccuracyRecord]) -> Check:
    def problem(record: AccuracyRecord) -> str | None:
        first = record.first_tokens
        if first is None:
            return f"{_name(record)} has no token_data: the SUT must call FirstTokenComplete in this scenario"
        tokens = record.tokens
        # the reference compares position by position over the shorter of the two
        if any(a != b for a, b in zip(tokens, first, strict=False)):
            return (f"{_name(record)}: LoadGen recorded first token(s) {first}, "
                    f"but the output starts with {tokens[:len(first)]}")
        return None

    return _check(records, problem)


def _eos_check(records: list[AccuracyRecord], eos_token_id: int) -> Check:
    def problem(record: AccuracyRecord) -> str | None:
        count = _trailing_eos(record.tokens, eos_token_id)
        if count >= 2:
            return (f"{_name(record)} ends with {count} EOS tokens ({eos_token_id}): at most one is allowed; "
                    f"stop generating at the first EOS")
        return None

    return _check(records, problem)


def _length_check(records: list[AccuracyRecord]) -> Check:
    def problem(record: AccuracyRecord) -> str | None:
        if record.token_count is None:
            return f"{_name(record)} has no token_count: pass n_tokens to QuerySampleResponse"
        if record.n_tokens == 0:
            return f"{_name(record)} logged no tokens: the sample failed and was answered empty"
        if record.token_count != record.n_tokens:
            return (f"{_name(record)} reports token_count {record.token_count} but logs "
                    f"{record.n_tokens} tokens")
        return None

    return _check(records, problem)


def _trailing_eos(tokens: list[int], eos_token_id: int) -> int:
    """EOS tokens at the end of `tokens`, not counting position 0 (the reference's `while i > 0`)."""
    count = 0
    for i in range(len(tokens) - 1, 0, -1):
        if tokens[i] != eos_token_id:
            break
        count += 1
    return count


def _check(records: Iterable[AccuracyRecord], problem: Callable[[AccuracyRecord], str | None]) -> Check:
    problems = tuple(p for p in map(problem, records) if p is not None)
    return Check(not problems, problems)


def _name(record: AccuracyRecord) -> str:
    return f"sample qsl_idx {record.qsl_idx} (seq_id {record.seq_id})"
