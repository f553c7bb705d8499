"""Read LoadGen's detail and summary logs, and say in plain sentences what is wrong with a run.

What LoadGen writes (mlcommons-loadgen 6.0.15: logging.h, results.cc, test_settings_internal.cc):

- The detail log is one `:::MLLOG {json}` line per entry: `key`, `value`, `time_ms`,
  `namespace`, `event_type` and `metadata` with `is_error`, `is_warning`, `file`, `line_no`,
  `pid`, `tid`. Errors have `is_error: true` and a key `error_runtime`, `error_invalid_config`,
  `error_invalid_test_settings` or `error_uncommitted_loadgen_changes`; warnings have
  `is_warning: true` and the key `warning_generic_message`. Doubles are streamed by C++, so an
  infinite or undefined value reads `inf`/`nan`, which is not JSON; this reader accepts them.
- The requested and effective settings are `requested_*` and `effective_*` entries;
  `requested_use_token_latencies` (and, for Server, `requested_server_ttft_latency` /
  `requested_server_tpot_latency`) are written only when token latencies are on.
- A performance run ends with `result_validity` (VALID/INVALID), `result_min_duration_met`,
  `result_min_queries_met`, `early_stopping_met`, `result_perf_constraints_met` (Server),
  `result_invalid_reason`, then the metrics and `num_errors`. An accuracy run writes none of
  these; its summary holds only the warning and error counts.
- An error from `FromConfig` (a bad user.conf, or "Multiple conf files are used") is logged
  before the test starts and lands in the next test's log.

`read_loadgen_run(folder)` returns a `LoadgenRun`; `LoadgenRun.problems(round, benchmark,
compliant)` says, sentence by sentence, why a run is INVALID, broken or not compliant (the rules
are in cmx.mlperf.loadgen.findings).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from cmx.errors import CmxError
from cmx.mlperf.loadgen.findings import Finding, run_findings
from cmx.mlperf.loadgen.log_records import (
    AUDIT_FOUND,
    Latencies,
    LogEntry,
    LoggedRun,
    RunResults,
    RunSettings,
    Summary,
)
from cmx.mlperf.rounds import Benchmark, Round, Seeds

MARKER = ":::MLLOG"
DETAIL_LOG = "mlperf_log_detail.txt"
SUMMARY_LOG = "mlperf_log_summary.txt"
PERCENTILES = ("50.00", "90.00", "95.00", "97.00", "99.00", "99.90")


class LoadgenLogError(CmxError):
    """A LoadGen log is missing, unreadable, or not a LoadGen detail log."""


class LoadgenRun(LoggedRun):
    """One LoadGen test as its logs tell it, and what is wrong with it."""

    def problems(self, round_: Round, benchmark: Benchmark | str, compliant: bool, *,
                 scenario: str | None = None, compliance_test: str | None = None) -> list[str]:
        """Plain sentences saying why this run is INVALID, broken, or (when `compliant`) not
        compliant with `round_`; [] when there is nothing to say.

        `scenario` is the benchmark's scenario (Offline, Server, Interactive); by default it is
        read from the log, an Interactive run being recognised by its TTFT/TPOT settings.
        `compliance_test="TEST06"` judges the run as that test's audit run."""
        return [f.text for f in self.findings(round_, benchmark, compliant, scenario=scenario,
                                              compliance_test=compliance_test)]

    def findings(self, round_: Round, benchmark: Benchmark | str, compliant: bool, *,
                 scenario: str | None = None, compliance_test: str | None = None) -> list[Finding]:
        """`problems`, each with the rule it breaks (`loadgen.seeds`, `loadgen.min-duration`, ...)."""
        return run_findings(self, round_, benchmark, compliant, scenario=scenario, compliance_test=compliance_test)


# --- reading ------------------------------------------------------------------------------

def read_loadgen_run(path: Path | str) -> LoadgenRun:
    """The run whose logs are in `path` (a folder with mlperf_log_detail.txt, or that file);
    mlperf_log_summary.txt beside it is read when present."""
    path = Path(path)
    detail = path / DETAIL_LOG if path.is_dir() else path
    if not detail.is_file():
        raise LoadgenLogError(f"no LoadGen detail log at {detail}",
                              hint="LoadGen writes mlperf_log_detail.txt into LogSettings.log_output.outdir")
    summary_path = detail.with_name(SUMMARY_LOG)
    summary = parse_summary(_bounded_text(summary_path)) if summary_path.is_file() else None
    return parse_detail(_bounded_text(detail), path=detail, summary=summary)


MAX_LOG_BYTES = 50 * 1024 * 1024  # the submission checker's limit on any file; a real run's detail log is < 1 MB


def _bounded_text(path: Path) -> str:
    """The text of a LoadGen log, refused past MAX_LOG_BYTES: a log is never held whole when it is that large."""
    with open(path, "rb") as f:
        data = f.read(MAX_LOG_BYTES + 1)
    if len(data) > MAX_LOG_BYTES:
        raise LoadgenLogError(f"{path.name} is over {MAX_LOG_BYTES // 2**20} MB, more than any LoadGen run writes; "
                              "cmx did not read it", where=str(path), hint="copy the log again from the run")
    return data.decode("utf-8", errors="replace")


def parse_entries(text: str, *, where: str = "detail log") -> list[LogEntry]:
    """Every `:::MLLOG` entry of a detail log, in order. Other lines are skipped; a marked
    line that is not JSON (even with C++'s inf/nan) is an error naming its line."""
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.startswith(MARKER):
            continue
        record = _json_record(line[len(MARKER):], f"{where}:{number}")
        meta = record.get("metadata") or {}
        entries.append(LogEntry(
            key=str(record.get("key", "")), value=record.get("value"), time_ms=record.get("time_ms"),
            is_error=bool(meta.get("is_error")), is_warning=bool(meta.get("is_warning")),
            file=str(meta.get("file", "")), line_no=int(meta.get("line_no") or 0),
        ))
    return entries


def parse_detail(text: str, *, path: Path | None = None, summary: Summary | None = None) -> LoadgenRun:
    """A LoadgenRun from the text of mlperf_log_detail.txt."""
    entries = parse_entries(text, where=str(path) if path else "detail log")
    if not entries:
        raise LoadgenLogError("no :::MLLOG lines: not a LoadGen detail log", where=str(path) if path else None)
    first: dict[str, Any] = {}
    for entry in entries:
        first.setdefault(entry.key, entry.value)
    full_version = _str(first.get("loadgen_version"))
    return LoadgenRun(
        path=path,
        loadgen_version=full_version.split(" @ ")[0].strip() if full_version else None,
        loadgen_version_full=full_version,
        sut_name=_str(first.get("sut_name")),
        qsl_total_count=_int(first.get("qsl_reported_total_count")),
        qsl_performance_count=_int(first.get("qsl_reported_performance_count")),
        settings=_settings(first),
        results=_results(first),
        errors=tuple(e for e in entries if e.is_error),
        warnings=tuple(e for e in entries if e.is_warning),
        audit_config_used=any(e.is_warning and AUDIT_FOUND in str(e.value) for e in entries),
        summary=summary,
    )


_SUMMARY_LINE = re.compile(r"^\s*([^:]+?)\s*:\s*(.*?)\s*$")
_COUNT_LINE = re.compile(r"^(No|\d+) (warning|error)s? encountered", re.IGNORECASE)


def parse_summary(text: str) -> Summary:
    """mlperf_log_summary.txt as labelled fields plus the error and warning counts."""
    fields: dict[str, str] = {}
    errors = warnings = None
    for line in text.splitlines():
        count = _COUNT_LINE.match(line.strip())
        if count:
            number = 0 if count.group(1) == "No" else int(count.group(1))
            if count.group(2).lower() == "error":
                errors = number
            else:
                warnings = number
            continue
        match = _SUMMARY_LINE.match(line)
        if match and not line.startswith("="):
            fields.setdefault(match.group(1), match.group(2))
    return Summary(tuple(fields.items()), errors, warnings)


def _json_record(body: str, where: str) -> dict[str, Any]:
    try:
        try:
            record = json.loads(body)
        except json.JSONDecodeError:  # C++ streams non-finite doubles as inf / -inf / nan / -nan
            record = json.loads(re.sub(r'(?<=[:\[,])(\s*)(-?)(inf|nan)(?=\s*[,\]}])', _json_constant, body))
    except json.JSONDecodeError as exc:
        raise LoadgenLogError(f"a :::MLLOG line is not JSON ({exc.msg})", where=where) from None
    except RecursionError:  # a value nested thousands deep
        raise LoadgenLogError("a :::MLLOG line nests too deep to read", where=where) from None
    if not isinstance(record, dict):
        raise LoadgenLogError("a :::MLLOG line is not a JSON object", where=where)
    return record


def _json_constant(match: re.Match[str]) -> str:
    space, sign, word = match.groups()
    if word == "nan":
        return f"{space}NaN"
    return f"{space}{sign}Infinity"


def _settings(v: dict[str, Any]) -> RunSettings:
    seeds = None
    if all(f"effective_{k}" in v for k in ("qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed")):
        seeds = Seeds(int(v["effective_qsl_rng_seed"]), int(v["effective_sample_index_rng_seed"]),
                      int(v["effective_schedule_rng_seed"]))
    return RunSettings(
        scenario=_str(v.get("effective_scenario")),
        mode=_str(v.get("effective_test_mode")),
        seeds=seeds,
        target_qps=_float(v.get("effective_target_qps")),
        samples_per_query=_int(v.get("effective_samples_per_query")),
        min_duration_ms=_int(v.get("effective_min_duration_ms")),
        max_duration_ms=_int(v.get("effective_max_duration_ms")),
        min_query_count=_int(v.get("effective_min_query_count")),
        requested_min_query_count=_int(v.get("requested_min_query_count")),
        max_query_count=_int(v.get("effective_max_query_count")),
        performance_sample_count=_int(v.get("effective_performance_sample_count")),
        accuracy_sample_count=_int(v.get("effective_accuracy_sample_count")),
        sample_concatenate_permutation=_bool(v.get("effective_sample_concatenate_permutation")),
        use_token_latencies=bool(v.get("requested_use_token_latencies", False)),
        ttft_latency_ns=_int(v.get("requested_server_ttft_latency")),
        tpot_latency_ns=_int(v.get("requested_server_tpot_latency")),
        target_latency_ns=_int(v.get("effective_target_latency_ns")),
        accuracy_log_rng_seed=_int(v.get("effective_accuracy_log_rng_seed")),
        accuracy_log_sampling_target=_int(v.get("effective_accuracy_log_sampling_target")),
    )


# where each scenario's throughput is (results.cc, PerformanceSummary::LogDetail): Offline's samples and tokens per
# second of its one query; Server's completed samples and tokens per second; SingleStream's queries per second with
# LoadGen's overhead (its result is a latency: early_stopping_latency_ss) and completed tokens per second
_SAMPLES_PER_SECOND = {"Offline": "result_samples_per_second", "Server": "result_completed_samples_per_sec",
                       "SingleStream": "result_qps_with_loadgen_overhead"}


def _results(v: dict[str, Any]) -> RunResults:
    scenario = str(v.get("effective_scenario"))
    completed = scenario in ("Server", "SingleStream")
    return RunResults(
        validity=_str(v.get("result_validity")),
        min_duration_met=_bool(v.get("result_min_duration_met")),
        min_queries_met=_bool(v.get("result_min_queries_met")),
        perf_constraints_met=_bool(v.get("result_perf_constraints_met")),
        early_stopping_met=_bool(v.get("early_stopping_met")),
        invalid_reason=_str(v.get("result_invalid_reason")),
        early_stopping=_str(v.get("early_stopping_result")),
        early_stopping_ttft=_str(v.get("early_stopping_ttft_result")),
        early_stopping_tpot=_str(v.get("early_stopping_tpot_result")),
        samples_per_second=_float(v.get(_SAMPLES_PER_SECOND.get(scenario, "result_samples_per_second"))),
        scheduled_samples_per_second=_float(v.get("result_scheduled_samples_per_sec")),
        tokens_per_second=_float(v.get("result_completed_tokens_per_second" if completed
                                       else "result_tokens_per_second")),
        query_count=_int(v.get("result_query_count")),
        generated_query_count=_int(v.get("generated_query_count")),
        generated_samples_per_query=_int(v.get("generated_samples_per_query")),
        latency=_latencies(v, "result_min_latency_ns", "result_mean_latency_ns", "result_max_latency_ns",
                           "result_{}_percentile_latency_ns"),
        ttft=_logged_latencies(v, "result_first_token_min_latency_ns", "result_first_token_mean_latency_ns",
                               "result_first_token_max_latency_ns", "result_first_token_{}_percentile_latency_ns"),
        tpot=_logged_latencies(v, "result_time_to_output_token_min", "result_time_to_output_token_mean",
                               "result_time_to_output_token_max", "result_time_per_output_token_{}_percentile_ns"),
        early_stopping_latency_ns=_int(v.get("early_stopping_latency_ss")),
    )


def _latencies(v: dict[str, Any], lo: str, mean: str, hi: str, pattern: str) -> Latencies:
    percentiles = [_int(v.get(pattern.format(p))) for p in PERCENTILES]
    return Latencies(_int(v.get(lo)), _int(v.get(mean)), _int(v.get(hi)), *percentiles)


def _logged_latencies(v: dict[str, Any], lo: str, mean: str, hi: str, pattern: str) -> Latencies | None:
    """The token latencies, None where the log has none of them (they are logged with use_token_latencies)."""
    keys = [lo, mean, hi, *(pattern.format(p) for p in PERCENTILES)]
    return None if all(_int(v.get(k)) is None for k in keys) else _latencies(v, lo, mean, hi, pattern)


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError, OverflowError):  # a string, or inf/nan
        return None


def _float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _bool(value: Any) -> bool | None:
    return None if value is None else bool(value)
