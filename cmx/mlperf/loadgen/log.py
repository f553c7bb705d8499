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
compliant)` says, sentence by sentence, why a run is INVALID, broken or not compliant.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx.errors import CmxError
from cmx.mlperf.loadgen.userconf import TEST06_AUDIT
from cmx.mlperf.rounds import Benchmark, Round, ScenarioRules, Seeds, round_for_seeds

MARKER = ":::MLLOG"
# The LoadGen scenarios whose result must meet early stopping (the official checker's
# Config.uses_early_stopping; an Interactive run is a LoadGen Server run)
EARLY_STOPPING_SCENARIOS = ("Server", "SingleStream", "MultiStream")
DETAIL_LOG = "mlperf_log_detail.txt"
SUMMARY_LOG = "mlperf_log_summary.txt"
MULTIPLE_CONF = "Multiple conf files are used"
AUDIT_FOUND = "Found Audit Config file"
PERCENTILES = ("50.00", "90.00", "95.00", "97.00", "99.00", "99.90")


class LoadgenLogError(CmxError):
    """A LoadGen log is missing, unreadable, or not a LoadGen detail log."""


@dataclass(frozen=True)
class LogEntry:
    """One `:::MLLOG` line of the detail log."""

    key: str
    value: Any
    time_ms: float | None
    is_error: bool
    is_warning: bool
    file: str
    line_no: int


@dataclass(frozen=True)
class Latencies:
    """Min, mean, max and the percentiles LoadGen reports, in nanoseconds (None where not logged)."""

    min_ns: int | None
    mean_ns: int | None
    max_ns: int | None
    p50_ns: int | None
    p90_ns: int | None
    p95_ns: int | None
    p97_ns: int | None
    p99_ns: int | None
    p999_ns: int | None

    @property
    def p99_ms(self) -> float | None:
        return None if self.p99_ns is None else self.p99_ns / 1e6


@dataclass(frozen=True)
class RunSettings:
    """The settings LoadGen ran with (`effective_*`, and the token-latency settings it requested)."""

    scenario: str | None
    mode: str | None                       # PerformanceOnly, AccuracyOnly, ...
    seeds: Seeds | None
    target_qps: float | None
    samples_per_query: int | None
    min_duration_ms: int | None
    max_duration_ms: int | None
    min_query_count: int | None            # Offline: LoadGen sets it to 1; see requested_min_query_count
    requested_min_query_count: int | None
    max_query_count: int | None
    performance_sample_count: int | None
    accuracy_sample_count: int | None      # LoadGen 6.x; None in older logs
    sample_concatenate_permutation: bool | None
    use_token_latencies: bool
    ttft_latency_ns: int | None            # Server with token latencies
    tpot_latency_ns: int | None
    target_latency_ns: int | None          # LoadGen's target_latency (0 when token latencies judge instead)
    accuracy_log_rng_seed: int | None
    accuracy_log_sampling_target: int | None


@dataclass(frozen=True)
class RunResults:
    """What a performance run measured, and LoadGen's verdict on it."""

    validity: str | None                   # VALID / INVALID; None for an accuracy run
    min_duration_met: bool | None
    min_queries_met: bool | None
    perf_constraints_met: bool | None      # Server only
    early_stopping_met: bool | None
    invalid_reason: str | None
    early_stopping: str | None             # LoadGen's early-stopping verdict without token latencies
    early_stopping_ttft: str | None        # ... and per token latency with them
    early_stopping_tpot: str | None
    samples_per_second: float | None       # Offline: samples/s; Server: completed samples/s
    scheduled_samples_per_second: float | None
    tokens_per_second: float | None        # Offline: tokens/s; Server: completed tokens/s
    query_count: int | None
    generated_query_count: int | None
    generated_samples_per_query: int | None
    latency: Latencies
    ttft: Latencies | None                 # Server with token latencies
    tpot: Latencies | None


@dataclass(frozen=True)
class Summary:
    """mlperf_log_summary.txt: the `label : value` lines (first of each) and the error and warning counts."""

    fields: tuple[tuple[str, str], ...]
    error_count: int | None
    warning_count: int | None

    def get(self, label: str) -> str | None:
        for key, value in self.fields:
            if key == label:
                return value
        return None

    @property
    def result(self) -> str | None:
        return self.get("Result is")

    @property
    def scenario(self) -> str | None:
        return self.get("Scenario")

    @property
    def mode(self) -> str | None:
        return self.get("Mode")

    @property
    def early_stopping_met(self) -> bool | None:
        """The summary's "Early stopping satisfied: Yes/NO" (every performance run writes it)."""
        value = self.get("Early stopping satisfied")
        return None if value is None else value.strip().lower() == "yes"


@dataclass(frozen=True)
class Finding:
    """One thing wrong with a run: the rule it breaks (a stable id) and a sentence saying what and what to do."""

    rule: str
    text: str


def _tagged(rule: str, texts: list[str]) -> list[Finding]:
    return [Finding(rule, t) for t in texts]


@dataclass(frozen=True)
class LoadgenRun:
    """One LoadGen test as its logs tell it."""

    path: Path | None
    loadgen_version: str | None            # "6.0.15"
    loadgen_version_full: str | None       # "6.0.15 @ 3546c66b9e"
    sut_name: str | None                   # what the SUT calls itself (a network SUT must say "Network SUT")
    qsl_total_count: int | None
    qsl_performance_count: int | None
    settings: RunSettings
    results: RunResults
    errors: tuple[LogEntry, ...]
    warnings: tuple[LogEntry, ...]
    audit_config_used: bool
    summary: Summary | None

    @property
    def scenario(self) -> str | None:
        return self.settings.scenario

    @property
    def mode(self) -> str | None:
        return self.settings.mode

    @property
    def is_performance(self) -> bool:
        return self.mode == "PerformanceOnly"

    @property
    def valid(self) -> bool:
        return self.results.validity == "VALID"

    @property
    def multiple_conf_files(self) -> bool:
        return any(MULTIPLE_CONF in str(e.value) for e in self.errors)

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
        bench = round_.benchmark(benchmark) if isinstance(benchmark, str) else benchmark
        rules = bench.scenario(scenario or self._guess_scenario(bench))
        out = _tagged("loadgen.error", _error_problems(self.errors))
        out += _tagged("loadgen.logs-disagree", _summary_problems(self))
        out += _tagged("loadgen.seeds", _seed_problems(self, round_))
        out += _tagged("loadgen.audit", _audit_problems(self, compliance_test))
        if self.is_performance and compliance_test is None:
            out += _tagged("loadgen.invalid", _validity_problems(self))
            out += _tagged("loadgen.early-stopping", _early_stopping_problems(self))
            out += _tagged("loadgen.tokens", _token_problems(self, bench))
            out += _tagged("loadgen.latency-limit", _latency_limit_problems(self, round_, rules))
        if compliant and compliance_test is None:
            out += _compliance_problems(self, round_, bench, rules)
        return out

    def _guess_scenario(self, bench: Benchmark) -> str:
        if self.scenario != "Server":
            return self.scenario or "Offline"
        for rules in bench.scenarios:
            if rules.loadgen_scenario == "Server" and rules.latency and \
                    self.settings.ttft_latency_ns == rules.latency.ttft_p99_ns and \
                    self.settings.tpot_latency_ns == rules.latency.tpot_p99_ns:
                return rules.name
        return "Server"


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
    summary = parse_summary(summary_path.read_text(encoding="utf-8", errors="replace")) \
        if summary_path.is_file() else None
    return parse_detail(detail.read_text(encoding="utf-8", errors="replace"), path=detail, summary=summary)


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
        record = json.loads(body)
    except json.JSONDecodeError:
        try:  # C++ streams non-finite doubles as inf / -inf / nan / -nan
            record = json.loads(re.sub(r'(?<=[:\[,])(\s*)(-?)(inf|nan)(?=\s*[,\]}])', _json_constant, body))
        except json.JSONDecodeError as exc:
            raise LoadgenLogError(f"a :::MLLOG line is not JSON ({exc.msg})", where=where) from None
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


def _results(v: dict[str, Any]) -> RunResults:
    server = v.get("effective_scenario") == "Server"
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
        samples_per_second=_float(v.get("result_completed_samples_per_sec" if server else "result_samples_per_second")),
        scheduled_samples_per_second=_float(v.get("result_scheduled_samples_per_sec")),
        tokens_per_second=_float(v.get("result_completed_tokens_per_second" if server else "result_tokens_per_second")),
        query_count=_int(v.get("result_query_count")),
        generated_query_count=_int(v.get("generated_query_count")),
        generated_samples_per_query=_int(v.get("generated_samples_per_query")),
        latency=_latencies(v, "result_min_latency_ns", "result_mean_latency_ns", "result_max_latency_ns",
                           "result_{}_percentile_latency_ns"),
        ttft=_latencies(v, "result_first_token_min_latency_ns", "result_first_token_mean_latency_ns",
                        "result_first_token_max_latency_ns", "result_first_token_{}_percentile_latency_ns",
                        optional=True),
        tpot=_latencies(v, "result_time_to_output_token_min", "result_time_to_output_token_mean",
                        "result_time_to_output_token_max", "result_time_per_output_token_{}_percentile_ns",
                        optional=True),
    )


def _latencies(v: dict[str, Any], lo: str, mean: str, hi: str, pattern: str,
               optional: bool = False) -> Latencies | None:
    percentiles = [_int(v.get(pattern.format(p))) for p in PERCENTILES]
    values = [_int(v.get(lo)), _int(v.get(mean)), _int(v.get(hi)), *percentiles]
    if optional and all(x is None for x in values):
        return None
    return Latencies(*values)


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


# --- judging ------------------------------------------------------------------------------

# What an error message means and what to do, by a fragment of LoadGen's text.
_ERROR_ADVICE: tuple[tuple[str, str], ...] = (
    (MULTIPLE_CONF, ("TestSettings.FromConfig was called more than once in this process; run each LoadGen "
                     "test in a fresh process, and any error in an accuracy log fails the checker")),
    ("n_tokens argument missing", ("the SUT completed samples without n_tokens, so LoadGen counted 0 tokens; pass "
                                   "n_tokens (all output tokens, the first included) to QuerySampleResponse")),
    ("Number of tokens need to be greater than 1",
     ("the SUT reported n_tokens < 2 and LoadGen counted 0 tokens for those samples; n_tokens counts all output "
      "tokens and must be >= 2")),
    ("negative number of tokens", "the SUT reported a negative n_tokens"),
    ("before it's first token latency", ("call FirstTokenComplete for a sample before QuerySamplesComplete in "
                                         "Server and Interactive runs")),
    ("complete a sample twice", "the SUT completed the same sample more than once"),
    ("Max query count reached", "max_query_count in user.conf ended the run early"),
    ("Max test duration reached", "max_duration in user.conf ended the run early"),
    ("Ran out of generated queries", "LoadGen ran out of queries before min_duration: raise target_qps in user.conf"),
    ("Too many outstanding queries", "more queries were outstanding than max_async_queries allows"),
    ("uncommitted changes", "this LoadGen was built from a modified source tree; install the released package"),
    ("can't open file", "LoadGen could not open the user.conf it was given"),
    ("value needs to be integer or double", "a user.conf value is not a plain number (an inline comment?)"),
    ("expected 'key=value'", "a user.conf line is not 'key = value'"),
    ("Invalid value passed to Mode", "the mode key of a conf file is not 0, 1, 2 or 3"),
    ("PerfClock and system_clock differ", "the machine's clocks drifted during the run"),
)


def _error_problems(errors: tuple[LogEntry, ...]) -> list[str]:
    counts = Counter(str(e.value) for e in errors)
    out = []
    for message, count in counts.items():
        times = f" ({count} times)" if count > 1 else ""
        advice = next((a for fragment, a in _ERROR_ADVICE if fragment in message), None)
        out.append(f"LoadGen logged an error{times}: \"{message}\"" + (f": {advice}." if advice else "."))
    return out


def _summary_problems(run: LoadgenRun) -> list[str]:
    """The summary and the detail log come from the same test; when they disagree, one was edited or cut."""
    summary = run.summary
    if summary is None:
        return []
    out = []
    if summary.error_count is not None and summary.error_count != len(run.errors):
        out.append(f"the summary counts {summary.error_count} errors but the detail log holds {len(run.errors)}: "
                   "the two logs are not from the same run, or one was cut.")
    if summary.result is not None and summary.result != run.results.validity:
        out.append(f"the summary says {summary.result} but the detail log says {run.results.validity}.")
    detail_met, summary_met = run.results.early_stopping_met, summary.early_stopping_met
    if detail_met is not None and summary_met is not None and detail_met != summary_met:
        out.append(f"the summary says early stopping was {'' if summary_met else 'not '}satisfied but the detail "
                   f"log says early_stopping_met is {str(detail_met).lower()}.")
    return out


def _seed_problems(run: LoadgenRun, round_: Round) -> list[str]:
    seeds = run.settings.seeds
    if seeds is None:
        return ["the log does not say which RNG seeds LoadGen used (no effective_*_rng_seed entries)."]
    if seeds == round_.seeds:
        return []
    owner = round_for_seeds(seeds)
    whose = f"those of {owner.name}" if owner else "not those of any known round"
    version = f" (LoadGen {run.loadgen_version})" if run.loadgen_version else ""
    return [(f"the RNG seeds{version} are {whose}, not {round_.name}'s: a wrong seed fails the check in every "
             f"division; install {round_.loadgen_requirement}.")]


def _audit_problems(run: LoadgenRun, compliance_test: str | None) -> list[str]:
    if compliance_test is None and run.audit_config_used:
        return [("LoadGen found an audit.config in the working directory and let it override the settings: "
                 "that file belongs to a compliance run only; remove it and run again.")]
    if compliance_test is not None and not run.audit_config_used:
        return [f"this {compliance_test} run used no audit.config: LoadGen reads it from the working directory."]
    if compliance_test == "TEST06":
        s = run.settings
        seen = {"mode": run.mode, "accuracy_log_rng_seed": s.accuracy_log_rng_seed,
                "accuracy_log_sampling_target": s.accuracy_log_sampling_target,
                "sample_concatenate_permutation": s.sample_concatenate_permutation}
        wanted = {"mode": "PerformanceOnly", "accuracy_log_rng_seed": TEST06_AUDIT["accuracy_log_rng_seed"],
                  "accuracy_log_sampling_target": TEST06_AUDIT["accuracy_log_sampling_target"],
                  "sample_concatenate_permutation": bool(TEST06_AUDIT["sample_concatenate_permutation"])}
        return [f"the TEST06 run had {key} = {seen[key]}, not {wanted[key]} as its audit.config sets"
                for key in wanted if seen[key] != wanted[key]]
    return []


def _validity_problems(run: LoadgenRun) -> list[str]:
    r, s = run.results, run.settings
    if r.validity is None:
        return ["the performance log has no result (result_validity): the run did not finish."]
    if r.validity == "VALID":
        return []
    reason = (r.invalid_reason or "").strip().rstrip(".")
    if not reason and r.early_stopping_met is False:
        reason = "early stopping not met"
    out = [f"LoadGen marked the result INVALID{': ' + reason if reason else ''}."]
    if r.min_duration_met is False:
        ran = f" (the SUT took {_ms(r.latency.max_ns)})" if run.scenario == "Offline" and r.latency.max_ns else ""
        out.append(f"min duration not met: the run was shorter than min_duration = {s.min_duration_ms} ms{ran}; "
                   "raise target_qps so LoadGen issues more work.")
    if r.min_queries_met is False:
        out.append(f"min query count not met: LoadGen issued {r.query_count} queries, fewer than min_query_count = "
                   f"{s.min_query_count}; the test ended early.")
    if r.perf_constraints_met is False:
        out += _constraint_sentences(run)
    return out


def _early_stopping_problems(run: LoadgenRun) -> list[str]:
    """The official checker fails a Server (and so Interactive) result whose early-stopping condition was not
    met, whatever the rest of the log says; LoadGen writes the verdict and how many more queries it needs."""
    if run.scenario not in EARLY_STOPPING_SCENARIOS:
        return []
    r = run.results
    met = r.early_stopping_met
    if met is None and run.summary is not None:
        met = run.summary.early_stopping_met
    if met is None:
        return [f"the {run.scenario} log does not say whether LoadGen's early-stopping condition was met (no "
                "early_stopping_met): the checker fails a result without it; copy the whole log of a finished run."]
    if met:
        return []
    verdicts = [(label, text) for label, text in (("TTFT", r.early_stopping_ttft), ("TPOT", r.early_stopping_tpot),
                                                  ("latency", r.early_stopping)) if text and "unsuccessful" in text]
    counts = "; ".join(f"{label}: {_early_stopping_counts(text)}" for label, text in verdicts)
    if not counts:
        counts = "LoadGen's own early-stopping lines do not say why: was the log edited?"
    return [f"LoadGen's early-stopping condition was not met ({counts})"]


_PROCESSED = re.compile(r"Processed (\d+) queries")
_NEEDED = re.compile(r"at least (\d+) more queries")


def _early_stopping_counts(text: str) -> str:
    """LoadGen's bulleted early-stopping message as its numbers: 'processed 592 queries, needs at least 64491 more'."""
    processed, needed = _PROCESSED.search(text), _NEEDED.search(text)
    if processed and needed:
        return (f"processed {processed.group(1)} queries, would need at least {needed.group(1)} more with every one "
                "under the limit")
    parts = [" ".join(p.split()).rstrip(".") for p in text.split("*")]
    return "; ".join(p for p in parts if p and p != "Run unsuccessful") or "unsuccessful"


def _constraint_sentences(run: LoadgenRun) -> list[str]:
    r, s = run.results, run.settings
    out = []
    if r.ttft and r.ttft.p99_ns is not None and s.ttft_latency_ns and r.ttft.p99_ns > s.ttft_latency_ns:
        out.append(f"TTFT p99 over limit: {_ms(r.ttft.p99_ns)} > {_ms(s.ttft_latency_ns)} (the run's ttft_latency); "
                   "lower target_qps.")
    if r.tpot and r.tpot.p99_ns is not None and s.tpot_latency_ns and r.tpot.p99_ns > s.tpot_latency_ns:
        out.append(f"TPOT p99 over limit: {_ms(r.tpot.p99_ns)} > {_ms(s.tpot_latency_ns)} (the run's tpot_latency); "
                   "lower target_qps.")
    return out or ["the Server latency constraints were not met; lower target_qps."]


def _token_problems(run: LoadgenRun, bench: Benchmark) -> list[str]:
    if not bench.token_latencies:
        return []
    r = run.results
    out = []
    if not run.settings.use_token_latencies:
        out.append(f"token latencies were off (use_token_latencies): {bench.name} reports tokens/s, TTFT and TPOT.")
    elif not r.tokens_per_second:
        out.append("0 tokens/s: LoadGen counted no output tokens (the SUT did not pass n_tokens, or passed < 2); "
                   "the checker would show this result as NoResults.")
    if run.scenario == "Server" and run.settings.use_token_latencies and (r.ttft is None or r.ttft.p99_ns is None):
        out.append("the Server log has no first-token latencies: call FirstTokenComplete for every sample.")
    return out


def _latency_limit_problems(run: LoadgenRun, round_: Round, rules: ScenarioRules) -> list[str]:
    """The round's own p99 limits, checked by cmx: the official checker reads an Interactive
    run as a Server run and applies the Server limits to it."""
    limits, r = rules.latency, run.results
    if limits is None or run.scenario != "Server":
        return []
    out = []
    if r.ttft and r.ttft.p99_ns is not None and r.ttft.p99_ns >= limits.ttft_p99_ns:
        out.append(f"TTFT p99 {_ms(r.ttft.p99_ns)} is over the {round_.name} {rules.name} limit of "
                   f"{limits.ttft_p99_ms:g} ms.")
    if r.tpot and r.tpot.p99_ns is not None and r.tpot.p99_ns >= limits.tpot_p99_ns:
        out.append(f"TPOT p99 {_ms(r.tpot.p99_ns)} is over the {round_.name} {rules.name} limit of "
                   f"{limits.tpot_p99_ms:g} ms.")
    return out


def _compliance_problems(run: LoadgenRun, round_: Round, bench: Benchmark, rules: ScenarioRules) -> list[Finding]:
    s, name = run.settings, f"{round_.name} {bench.name} {rules.name}"
    out = []
    if run.scenario is not None and run.scenario != rules.loadgen_scenario:
        out.append(Finding("loadgen.scenario",
                           f"the log's scenario is {run.scenario}, but {rules.name} runs as {rules.loadgen_scenario}."))
    if run.is_performance:
        if s.min_duration_ms is not None and s.min_duration_ms < rules.min_duration_ms:
            out.append(Finding("loadgen.min-duration", f"min_duration was {s.min_duration_ms} ms; {name} needs at "
                                                       f"least {rules.min_duration_ms} ms."))
        if rules.min_query_count and s.samples_per_query is not None and s.samples_per_query < rules.min_query_count:
            out.append(Finding("loadgen.sample-count", f"the Offline query had {s.samples_per_query} samples; "
                                                       f"{name} needs at least {rules.min_query_count}."))
        if s.performance_sample_count is not None and s.performance_sample_count < bench.performance_sample_count:
            out.append(Finding("loadgen.sample-count", f"performance_sample_count was {s.performance_sample_count}; "
                                                       f"{name} needs {bench.performance_sample_count}."))
        if bench.equal_issue and s.sample_concatenate_permutation is False:
            out.append(Finding("loadgen.equal-issue", f"equal-issue mode (sample_concatenate_permutation) was off; "
                                                      f"{name} runs with it on."))
        out += _tagged("loadgen.latency-setting", _latency_setting_problems(run, rules, name))
    else:
        covered = s.accuracy_sample_count if s.accuracy_sample_count is not None else run.qsl_total_count
        if covered is not None and covered != bench.dataset_size:
            out.append(Finding("accuracy.coverage", f"the accuracy run covered {covered} samples, not all "
                                                    f"{bench.dataset_size} of {bench.name}."))
    return out


def _latency_setting_problems(run: LoadgenRun, rules: ScenarioRules, name: str) -> list[str]:
    s, limits = run.settings, rules.latency
    out = []
    top = rules.target_latency_max_ms
    if top is not None and s.target_latency_ns is not None and s.target_latency_ns > top * 1_000_000:
        out.append(f"target_latency was {s.target_latency_ns / 1e6:.0f} ms; the checker allows at most {top:g} ms for {name}: "
                   "remove target_latency from user.conf.")
    if limits is None or run.scenario != "Server" or not s.use_token_latencies:
        return out
    if s.ttft_latency_ns == limits.ttft_p99_ns and s.tpot_latency_ns == limits.tpot_p99_ns:
        return out
    out.append(f"LoadGen judged the run against TTFT {_ms(s.ttft_latency_ns)} / TPOT {_ms(s.tpot_latency_ns)}, not "
               f"{name}'s {limits.ttft_p99_ms:g} / {limits.tpot_p99_ms:g} ms: check the LoadGen model name "
               f"({rules.loadgen_model}) and remove ttft_latency/tpot_latency from user.conf.")
    return out


def _ms(ns: int | None) -> str:
    return "?" if ns is None else f"{ns / 1e6:.4g} ms"
