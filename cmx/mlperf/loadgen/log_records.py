"""What LoadGen's logs say about one test, as records: its entries, settings, results, summary and the run
(`LoggedRun`), which the reader (log.py) makes and the rules (findings.py) judge; both stand on this module."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx.mlperf.rounds import Seeds

# The LoadGen scenarios whose result must meet early stopping (the official checker's
# Config.uses_early_stopping; an Interactive run is a LoadGen Server run)
EARLY_STOPPING_SCENARIOS = ("Server", "SingleStream", "MultiStream")
MULTIPLE_CONF = "Multiple conf files are used"
AUDIT_FOUND = "Found Audit Config file"


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
    samples_per_second: float | None       # Offline: samples/s; Server: completed samples/s; SingleStream: queries
    #                                        issued per second, LoadGen's overhead included
    scheduled_samples_per_second: float | None
    tokens_per_second: float | None        # Offline: tokens/s; Server, SingleStream: completed tokens/s
    query_count: int | None
    generated_query_count: int | None
    generated_samples_per_query: int | None
    latency: Latencies
    ttft: Latencies | None                 # Server with token latencies
    tpot: Latencies | None
    # SingleStream's result (the checker's RESULT_FIELD_NEW early_stopping_latency_ss): the latency early stopping
    # bounds its 90th percentile by, at 99 % confidence; 0 where too few queries ran for an estimate
    early_stopping_latency_ns: int | None = None


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
class LoggedRun:
    """One LoadGen test as its logs tell it (log.LoadgenRun adds what is wrong with it)."""

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


__all__ = ["AUDIT_FOUND", "EARLY_STOPPING_SCENARIOS", "MULTIPLE_CONF", "Latencies", "LogEntry", "LoggedRun",
           "RunResults", "RunSettings", "Summary"]
