"""Compliance TEST01 (accuracy in performance mode): the audit.config, and the two verifications
run_verification.py runs, with the Part III fallback for a non-deterministic SUT.

TEST01 is a performance-mode run whose audit.config makes LoadGen log a random sample of the outputs
(`accuracy_log_sampling_target` of them, about) to mlperf_log_accuracy.json. Then, as
compliance/TEST01/run_verification.py does (mlcommons/inference b66003e):

- `compare_outputs` compares each logged output with the same sample's output in the accuracy run's
  log, as verify_accuracy.py does in its default (JSON) mode: the first element of each, read with
  the benchmark's dtype (`--dtype`; a speech model's labels are int64). It passes when no sample differs and
  at least one matched. verify_accuracy.txt is the script's output, line for line.
- `compare_performance` compares the run's score with the performance run's: within 10 %, the same
  scenario, both runs VALID, and for Server the same target latency (the script's looser 20 % is for
  SingleStream and MultiStream latencies, edge scenarios cmx does not run). verify_performance.txt is
  the script's output.
- When the outputs differ (batching can change the numerics), the README's Part III applies:
  `verify_run` scores the accuracy run's records of the sampled samples (`baseline_records`, what
  create_accuracy_baseline.sh extracts) and the TEST01 log itself with the benchmark's accuracy
  script; baseline_accuracy.txt and compliance_accuracy.txt hold the two, and the submission checker
  accepts the test when each metric's two values differ by at most 1 % (0.1 % for a 99.9 target:
  `checker_failures`, which judges the files as compliance_check.py does).

The checker reads verify_accuracy.txt, verify_performance.txt, accuracy/ and performance/run_1/.

Where cmx is stricter than the scripts: two empty outputs are no match (verify_accuracy.py counts them as one), so
a TEST01 run whose every sampled output matched only as empty fails; and a run the verification compares that
failed (the harness's result.json: failed samples, cmx's verdict FAILED, no sample: run_record.run_failures) fails
both files, each reason a `TEST FAIL: ...` line, and Part III is not tried. A server answering 500 to everything
makes 64 empty answers in each run, which the script calls equal.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cmx.errors import CmxError
from cmx.mlperf.loadgen.accuracy_log import AccuracyRecord, read_accuracy_log
from cmx.mlperf.loadgen.log import LoadgenRun, read_loadgen_run
from cmx.mlperf.loadgen.run_record import ACCURACY_LOG, ACCURACY_TXT, FAIL_REASON, fail_reasons, run_failures
from cmx.mlperf.loadgen.test06 import AUDIT_HEADER
from cmx.tools.fs import sha256_file

# compliance/TEST01/<benchmark>/audit.config: the same seed for every benchmark, a sampling target each (the
# benchmark's declaration states it: test01_sampling_target)
AUDIT_SEED = 720381539243781796

VERIFY_ACCURACY_TXT = "verify_accuracy.txt"
VERIFY_PERFORMANCE_TXT = "verify_performance.txt"
BASELINE_TXT = "baseline_accuracy.txt"
COMPLIANCE_TXT = "compliance_accuracy.txt"
BASELINE_LOG = "mlperf_log_accuracy_baseline.json"  # create_accuracy_baseline.sh's name
PASS = "TEST PASS"

# verify_accuracy.py --dtype: how the first element of an output is read
_DTYPES = {"byte": "<b", "int32": "<i", "int64": "<q", "float32": "<f"}
SCORE_TOLERANCE = 0.10  # verify_performance.py: Offline and Server within 10 % of the performance run


class Test01Error(CmxError):
    """TEST01 cannot be set up or verified: no audit.config for the benchmark, an unknown dtype."""


def audit_config(benchmark: str) -> str:
    """compliance/TEST01/<benchmark>/audit.config: performance mode, logging a seeded sample of the outputs."""
    from cmx.mlperf.benchmarks import UnknownBenchmark, benchmark_for

    try:
        target = benchmark_for(benchmark).test01_sampling_target
    except UnknownBenchmark:
        target = None
    if target is None:
        raise Test01Error(f"cmx has no TEST01 audit.config for {benchmark}",
                          hint="add its accuracy_log_sampling_target (compliance/TEST01/<benchmark>/audit.config in "
                               "mlcommons/inference) to the benchmark's declaration as test01_sampling_target")
    return (f"{AUDIT_HEADER}*.*.mode = 2\n*.*.accuracy_log_rng_seed = {AUDIT_SEED}\n"
            f"*.*.accuracy_log_sampling_target = {target}\n")


# --- accuracy: the sampled outputs against the accuracy run's ---------------------------------------

@dataclass(frozen=True)
class AccuracyComparison:
    """verify_accuracy.py's counts."""

    acc_log_entries: int
    acc_log_duplicate_keys: int
    acc_log_data_mismatch: int
    perf_log_entries: int
    perf_log_qsl_idx_match: int
    perf_log_data_mismatch: int
    missing_qsl_idxs: int
    empty_matches: int = 0          # matched samples whose output is empty in both logs (not counted by the script)

    @property
    def passed(self) -> bool:
        return self.perf_log_data_mismatch == 0 and self.perf_log_qsl_idx_match > self.empty_matches

    def reasons(self) -> list[str]:
        """cmx's reasons for a failure the script does not explain ([] when it passes, or fails on a mismatch)."""
        if self.perf_log_data_mismatch:
            return []
        if self.perf_log_qsl_idx_match == 0:
            return [f"none of the TEST01 run's {self.perf_log_entries} sampled outputs is of a sample the accuracy "
                    "run logged"]
        if self.empty_matches == self.perf_log_qsl_idx_match:
            return [f"every one of the {self.empty_matches} sampled outputs is empty in both runs: failed samples, "
                    "not equal outputs"]
        return []


def _first(data: bytes, dtype: str) -> int | float | None:
    fmt = _DTYPES[dtype]
    size = struct.calcsize(fmt)
    if len(data) % size:
        raise Test01Error(f"an output of {len(data)} bytes is not a whole number of {dtype} values",
                          hint="verify with the dtype the SUT answers LoadGen in (labels: int64, token ids: int32)")
    return struct.unpack_from(fmt, data)[0] if data else None


def compare_outputs(accuracy: Sequence[AccuracyRecord], test: Sequence[AccuracyRecord],
                    dtype: str) -> AccuracyComparison:
    """The TEST01 log's outputs against the accuracy log's, counted as verify_accuracy.py counts them: a sample
    matches when both outputs are empty or their first elements are equal; each TEST01 output then stands for its
    sample, so a repeat is compared with the one before it."""
    if dtype not in _DTYPES:
        raise Test01Error(f"unknown dtype {dtype!r} for TEST01", hint=f"one of {', '.join(_DTYPES)}")
    results: dict[int, bytes] = {}
    duplicates = acc_mismatch = matched = mismatched = missing = empty = 0
    for record in accuracy:
        if record.qsl_idx in results:
            duplicates += 1
            acc_mismatch += results[record.qsl_idx] != record.data
        else:
            results[record.qsl_idx] = record.data
    for record in test:
        if record.qsl_idx in results:
            matched += 1
            ours, theirs = record.data, results[record.qsl_idx]
            if not ours or not theirs:
                mismatched += bool(ours) != bool(theirs)
                empty += not ours and not theirs
            elif _first(ours, dtype) != _first(theirs, dtype):
                mismatched += 1
        else:
            missing += 1
        results[record.qsl_idx] = record.data
    return AccuracyComparison(len(accuracy), duplicates, acc_mismatch, len(test), matched, mismatched, missing, empty)


def format_verify_accuracy_txt(c: AccuracyComparison, failures: Sequence[str] = ()) -> str:
    """verify_accuracy.txt: what verify_accuracy.py prints; its verdict, when the test fails for a reason it does not
    give (`failures`: the compared runs', then `c.reasons()`), is a `TEST FAIL: <reason>` line for each."""
    reasons = [*failures, *c.reasons()]
    verdict = [FAIL_REASON + r for r in reasons] if reasons else [PASS if c.passed else "TEST FAIL"]
    lines = ["Verifying accuracy. This might take a while...", "Reading accuracy mode results...",
             "Reading performance mode results...", f"num_acc_log_entries = {c.acc_log_entries}",
             f"num_acc_log_duplicate_keys = {c.acc_log_duplicate_keys}",
             f"num_acc_log_data_mismatch = {c.acc_log_data_mismatch}", f"num_perf_log_entries = {c.perf_log_entries}",
             f"num_perf_log_qsl_idx_match = {c.perf_log_qsl_idx_match}",
             f"num_perf_log_data_mismatch = {c.perf_log_data_mismatch}",
             f"num_missing_qsl_idxs = {c.missing_qsl_idxs}", *verdict, ""]
    return "\n".join(lines) + "\n"


def baseline_records(accuracy: Sequence[AccuracyRecord], test: Sequence[AccuracyRecord]) -> list[AccuracyRecord]:
    """create_accuracy_baseline.sh: the accuracy run's records (repeats included) of the samples TEST01 logged."""
    sampled = {r.qsl_idx for r in test}
    return [r for r in accuracy if r.qsl_idx in sampled]


def write_accuracy_log(records: Sequence[AccuracyRecord], path: Path) -> Path:
    """Records as LoadGen writes mlperf_log_accuracy.json (what a benchmark's accuracy script reads)."""
    rows = []
    for r in records:
        row: dict[str, object] = {"seq_id": r.seq_id, "qsl_idx": r.qsl_idx, "data": r.data.hex().upper()}
        if r.token_count is not None:
            row["token_count"] = r.token_count
        rows.append(row)
    path.write_text(json.dumps(rows, indent=0) + "\n", encoding="utf-8")
    return path


def within_delta(baseline: Mapping[str, float], compliance: Mapping[str, float], metrics: Sequence[str],
                 delta_percent: float) -> list[str]:
    """The submission checker's Part III test: each metric nonzero in both, and |1 - baseline/compliance| in %
    at most `delta_percent`. The metrics that fail it, each with why ([]: it passes)."""
    out = []
    for metric in metrics:
        b, c = baseline.get(metric, 0.0), compliance.get(metric, 0.0)
        if not b or not c:
            out.append(f"{metric} is {b} in the baseline and {c} in the TEST01 run: the checker needs both nonzero")
        elif abs(1 - b / c) * 100 > delta_percent:
            out.append(f"{metric} is {b} in the baseline and {c} in the TEST01 run, {abs(1 - b / c) * 100:.3f} % "
                       f"apart (at most {delta_percent} %)")
    return out


def delta_percent(benchmark: str) -> float:
    """configuration.py get_delta_perc: 0.1 % for a 99.9 target, else 1 %."""
    return 0.1 if "99.9" in benchmark else 1.0


# --- performance: the TEST01 run's score against the performance run's --------------------------------

@dataclass(frozen=True)
class PerformanceComparison:
    reference_score: float | None
    test_score: float | None
    failure: str | None  # verify_performance.py's "TEST FAIL: ..." line, None when it passes

    @property
    def passed(self) -> bool:
        return self.failure is None


def compare_performance(reference_detail: Path, test_detail: Path) -> PerformanceComparison:
    """verify_performance.py: both runs VALID, the same scenario (and Server target latency), and the TEST01
    score within 10 % of the performance run's."""
    ref, test = read_loadgen_run(reference_detail), read_loadgen_run(test_detail)
    for run, path in ((ref, reference_detail), (test, test_detail)):
        if not run.valid:
            return PerformanceComparison(None, None, f"TEST FAIL: Invalid results in {path}")
    if ref.scenario != test.scenario:
        return PerformanceComparison(None, None, "TEST FAIL: Test and reference scenarios do not match!")
    if ref.scenario == "Server" and ref.settings.target_latency_ns != test.settings.target_latency_ns:
        return PerformanceComparison(None, None, "TEST FAIL: Server target latency mismatch")
    ref_score, test_score = _score(ref), _score(test)
    ok = ref_score * (1 - SCORE_TOLERANCE) <= test_score <= ref_score * (1 + SCORE_TOLERANCE)
    return PerformanceComparison(ref_score, test_score, None if ok else "TEST FAIL: Test score invalid")


def _score(run: LoadgenRun) -> float:
    """RESULT_FIELD of verify_performance.py: samples/s for Offline and Server (SingleStream and MultiStream, judged
    by their early-stopping latency, are edge scenarios cmx does not run)."""
    if run.scenario in ("Offline", "Server"):
        value = run.results.samples_per_second
    else:
        raise Test01Error(f"TEST01 of a {run.scenario} run is not supported by cmx",
                          hint="cmx runs Offline and Server; SingleStream and MultiStream are edge scenarios")
    if value is None:
        raise Test01Error(f"{run.path} has no result_samples_per_second",
                          hint="the run did not finish; run TEST01 again")
    return value


def format_verify_performance_txt(c: PerformanceComparison, failures: Sequence[str] = ()) -> str:
    """verify_performance.txt: what verify_performance.py prints; a `TEST FAIL: <reason>` line for each of `failures`
    (the compared runs') as well, and then no TEST PASS."""
    lines = ["Verifying performance."]
    if c.reference_score is not None:
        lines += [f"Reference score = {c.reference_score}", f"Test score = {c.test_score}"]
    lines += [FAIL_REASON + f for f in failures]
    if c.failure or not failures:
        lines.append(c.failure or PASS)
    return "\n".join(lines) + "\n"


# --- the whole verification ------------------------------------------------------------------------

def checker_failures(folder: Path, benchmark: str, metrics: Sequence[str]) -> list[str]:
    """compliance_check.py's TEST01 verdict on a folder holding verify_accuracy.txt, verify_performance.txt and, for
    Part III, baseline_accuracy.txt and compliance_accuracy.txt (in accuracy/, or beside the others in a run's
    folder): why it fails, [] when it passes. `metrics` are the round's accuracy metrics of the benchmark."""
    from cmx.mlperf.scoring.accuracy_txt import parse_accuracy_txt

    out = []
    verify = folder / VERIFY_ACCURACY_TXT
    text = verify.read_text(encoding="utf-8", errors="replace") if verify.is_file() else ""
    if not verify.is_file():
        out.append(f"{VERIFY_ACCURACY_TXT} is missing: run the TEST01 verification")
    elif PASS in (line.strip() for line in text.splitlines()):
        pass
    elif reasons := fail_reasons(text):  # a failed run, or outputs empty on both sides: Part III cannot help
        out += [f"{VERIFY_ACCURACY_TXT}: {r}" for r in reasons]
    else:
        found: dict[str, dict[str, float]] = {}
        for name in (BASELINE_TXT, COMPLIANCE_TXT):
            path = next((p for p in (folder / "accuracy" / name, folder / name) if p.is_file()), None)
            if path is None:
                out.append(f"TEST01's outputs differ from the accuracy run's and there is no {name} (Part III of "
                           "compliance/TEST01/README.md)")
                continue
            values = parse_accuracy_txt(path.read_text(encoding="utf-8", errors="replace"))
            found[name] = {k: float(v) for k, v in values.items() if isinstance(v, (int, float))}
        if len(found) == 2:
            out += within_delta(found[BASELINE_TXT], found[COMPLIANCE_TXT], metrics, delta_percent(benchmark))
    perf = folder / VERIFY_PERFORMANCE_TXT
    if not perf.is_file():
        out.append(f"{VERIFY_PERFORMANCE_TXT} is missing: run the TEST01 verification")
    elif PASS not in (perf_text := perf.read_text(encoding="utf-8", errors="replace")):
        out.append(f"{VERIFY_PERFORMANCE_TXT} does not say TEST PASS: "
                   + ("; ".join(fail_reasons(perf_text)) or "the TEST01 run's score is not within 10 % of the "
                      "performance run's, or a run is INVALID"))
    return out


def verify_run(output_dir: Path, accuracy_dir: Path, performance_dir: Path, dataset: Path, tokenizer_dir: Path, *,
               benchmark: str, rows: int | None = None) -> Path:
    """run_verification.py on a TEST01 run: verify_accuracy.txt and verify_performance.txt beside its logs, against
    the accuracy run in `accuracy_dir` and the performance run in `performance_dir`. Where the outputs differ, Part
    III: baseline_accuracy.txt, compliance_accuracy.txt and accuracy.txt (the TEST01 log's score) beside them too.
    Returns the folder; its verdict is `checker_failures` of it, as the submission checker reads the files."""
    from cmx.mlperf.benchmarks import benchmark_for

    bench = benchmark_for(benchmark)
    output_dir = Path(output_dir)
    for needed, what in ((Path(accuracy_dir) / ACCURACY_LOG, "accuracy"),
                         (Path(performance_dir) / "mlperf_log_detail.txt", "performance")):
        if not needed.is_file():
            raise Test01Error(f"TEST01 is verified against the {what} run, and {needed} is missing",
                              hint=f"run the {what} test first (the _valid mode runs performance, accuracy and TEST01 "
                                   "in that order)")
    test_log = output_dir / ACCURACY_LOG
    accuracy, test = read_accuracy_log(Path(accuracy_dir) / ACCURACY_LOG), read_accuracy_log(test_log)
    comparison = compare_outputs(accuracy, test, bench.response_dtype)
    failed = run_failures(output_dir, "the TEST01 run")
    accuracy_failures = [*failed, *run_failures(Path(accuracy_dir), "the accuracy run")]
    (output_dir / VERIFY_ACCURACY_TXT).write_text(format_verify_accuracy_txt(comparison, accuracy_failures),
                                                  encoding="utf-8")
    performance = compare_performance(Path(performance_dir) / "mlperf_log_detail.txt",
                                      output_dir / "mlperf_log_detail.txt")
    performance_failures = [*failed, *run_failures(Path(performance_dir), "the performance run")]
    (output_dir / VERIFY_PERFORMANCE_TXT).write_text(format_verify_performance_txt(performance, performance_failures),
                                                     encoding="utf-8")
    if not comparison.passed and not accuracy_failures and not comparison.reasons():
        data = bench.load_dataset(dataset)
        if rows is not None:
            data = data.limit(min(rows, len(data)))
        baseline_log = write_accuracy_log(baseline_records(accuracy, test), output_dir / BASELINE_LOG)
        # accuracy.txt of the TEST01 log is its compliance_accuracy.txt (what submitters copy there)
        for log, names in ((baseline_log, (BASELINE_TXT,)), (test_log, (COMPLIANCE_TXT, ACCURACY_TXT))):
            text = bench.format_accuracy_txt(bench.score(log, data, tokenizer_dir), sha256_file(log))
            for name in names:
                (output_dir / name).write_text(text, encoding="utf-8")
    return output_dir


__all__ = [
    "AUDIT_SEED",
    "BASELINE_LOG",
    "BASELINE_TXT",
    "COMPLIANCE_TXT",
    "VERIFY_ACCURACY_TXT",
    "VERIFY_PERFORMANCE_TXT",
    "AccuracyComparison",
    "PerformanceComparison",
    "Test01Error",
    "audit_config",
    "baseline_records",
    "checker_failures",
    "compare_outputs",
    "compare_performance",
    "delta_percent",
    "format_verify_accuracy_txt",
    "format_verify_performance_txt",
    "verify_run",
    "within_delta",
    "write_accuracy_log",
]
