"""Judge one LoadGen run against a round: each thing wrong with it as a Finding, a rule id and a sentence
saying what to do.

The rules, by id: `loadgen.error` (errors in the detail log), `loadgen.logs-disagree` (summary
and detail log say different things), `loadgen.seeds`, `loadgen.audit`, and for a performance
run `loadgen.invalid`, `loadgen.early-stopping`, `loadgen.tokens`, `loadgen.latency-limit`;
for a compliant run also the round's minimums (duration, queries, samples) and settings.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from cmx.mlperf.loadgen.log_records import (
    EARLY_STOPPING_SCENARIOS,
    MULTIPLE_CONF,
    LogEntry,
    LoggedRun,
)
from cmx.mlperf.loadgen.userconf import TEST06_AUDIT
from cmx.mlperf.rounds import Benchmark, Round, ScenarioRules, round_for_seeds


@dataclass(frozen=True)
class Finding:
    """One thing wrong with a run: the rule it breaks (a stable id) and a sentence saying what and what to do."""

    rule: str
    text: str


def _tagged(rule: str, texts: list[str]) -> list[Finding]:
    return [Finding(rule, t) for t in texts]


def run_findings(run: LoggedRun, round_: Round, benchmark: Benchmark | str, compliant: bool, *,
                 scenario: str | None = None, compliance_test: str | None = None) -> list[Finding]:
    """What is wrong with `run` (LoadgenRun.findings)."""
    bench = round_.benchmark(benchmark) if isinstance(benchmark, str) else benchmark
    rules = bench.scenario(scenario or guess_scenario(run, bench))
    out = _tagged("loadgen.error", _error_problems(run.errors))
    out += _tagged("loadgen.logs-disagree", _summary_problems(run))
    out += _tagged("loadgen.seeds", _seed_problems(run, round_))
    out += _tagged("loadgen.audit", _audit_problems(run, compliance_test))
    if run.is_performance and compliance_test is None:
        out += _tagged("loadgen.invalid", _validity_problems(run))
        out += _tagged("loadgen.early-stopping", _early_stopping_problems(run))
        out += _tagged("loadgen.tokens", _token_problems(run, bench))
        out += _tagged("loadgen.latency-limit", _latency_limit_problems(run, round_, rules))
    if compliant and compliance_test is None:
        out += _compliance_problems(run, round_, bench, rules)
    return out


def guess_scenario(run: LoggedRun, bench: Benchmark) -> str:
    """The benchmark scenario of a run: its LoadGen scenario, an Interactive run being recognised by its TTFT/TPOT."""
    if run.scenario != "Server":
        return run.scenario or "Offline"
    for rules in bench.scenarios:
        if rules.loadgen_scenario == "Server" and rules.latency and \
                run.settings.ttft_latency_ns == rules.latency.ttft_p99_ns and \
                run.settings.tpot_latency_ns == rules.latency.tpot_p99_ns:
            return rules.name
    return "Server"


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


def _summary_problems(run: LoggedRun) -> list[str]:
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


def _seed_problems(run: LoggedRun, round_: Round) -> list[str]:
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


def _audit_problems(run: LoggedRun, compliance_test: str | None) -> list[str]:
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


def _validity_problems(run: LoggedRun) -> list[str]:
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


def _early_stopping_problems(run: LoggedRun) -> list[str]:
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
                                                  ("latency", r.early_stopping))
                if text and ("unsuccessful" in text or _TOO_FEW.search(text))]
    counts = "; ".join(f"{label}: {_early_stopping_counts(text)}" for label, text in verdicts)
    if not counts:
        counts = "LoadGen's own early-stopping lines do not say why: was the log edited?"
    return [f"LoadGen's early-stopping condition was not met ({counts})"]


_PROCESSED = re.compile(r"Processed (\d+) queries")
_NEEDED = re.compile(r"at least (\d+) more queries")
# SingleStream's (and MultiStream's) message when too few queries ran for any estimate (results.cc EarlyStopping)
_TOO_FEW = re.compile(r"Only processed (\d+) queries.*?at least (\d+) queries", re.DOTALL)


def _early_stopping_counts(text: str) -> str:
    """LoadGen's bulleted early-stopping message as its numbers: 'processed 592 queries, needs at least 64491 more'."""
    if too_few := _TOO_FEW.search(text):
        return (f"processed {too_few.group(1)} queries, and an estimate needs at least {too_few.group(2)}: raise "
                "min_query_count")
    processed, needed = _PROCESSED.search(text), _NEEDED.search(text)
    if processed and needed:
        return (f"processed {processed.group(1)} queries, would need at least {needed.group(1)} more with every one "
                "under the limit")
    parts = [" ".join(p.split()).rstrip(".") for p in text.split("*")]
    return "; ".join(p for p in parts if p and p != "Run unsuccessful") or "unsuccessful"


def _constraint_sentences(run: LoggedRun) -> list[str]:
    r, s = run.results, run.settings
    out = []
    if r.ttft and r.ttft.p99_ns is not None and s.ttft_latency_ns and r.ttft.p99_ns > s.ttft_latency_ns:
        out.append(f"TTFT p99 over limit: {_ms(r.ttft.p99_ns)} > {_ms(s.ttft_latency_ns)} (the run's ttft_latency); "
                   "lower target_qps.")
    if r.tpot and r.tpot.p99_ns is not None and s.tpot_latency_ns and r.tpot.p99_ns > s.tpot_latency_ns:
        out.append(f"TPOT p99 over limit: {_ms(r.tpot.p99_ns)} > {_ms(s.tpot_latency_ns)} (the run's tpot_latency); "
                   "lower target_qps.")
    return out or ["the Server latency constraints were not met; lower target_qps."]


def _token_problems(run: LoggedRun, bench: Benchmark) -> list[str]:
    if not bench.token_latencies:
        return []
    r = run.results
    out = []
    if not run.settings.use_token_latencies:
        out.append(f"token latencies were off (use_token_latencies): {bench.name} reports tokens/s, TTFT and TPOT.")
    elif not r.tokens_per_second:
        out.append("0 tokens/s: LoadGen counted no output tokens (the SUT did not pass n_tokens, or passed < 2); "
                   "the checker would show this result as NoResults.")
    if run.scenario in ("Server", "SingleStream") and run.settings.use_token_latencies and \
            (r.ttft is None or r.ttft.p99_ns is None):
        out.append(f"the {run.scenario} log has no first-token latencies: call FirstTokenComplete for every sample.")
    return out


def _latency_limit_problems(run: LoggedRun, round_: Round, rules: ScenarioRules) -> list[str]:
    """The round's own p99 limits, checked by cmx: the official checker reads an Interactive
    run as a Server run and applies the Server limits to it. A run judged on whole answers: its p99 latency."""
    limits, r = rules.latency, run.results
    if run.scenario != "Server":
        return []
    whole = rules.target_latency_ms
    if whole is not None and r.latency.p99_ns is not None and r.latency.p99_ns > whole * 1_000_000:
        return [f"latency p99 {_ms(r.latency.p99_ns)} is over the {round_.name} {rules.name} limit of {whole:g} ms "
                "(end to end)."]
    if limits is None:
        return []
    out = []
    if r.ttft and r.ttft.p99_ns is not None and r.ttft.p99_ns >= limits.ttft_p99_ns:
        out.append(f"TTFT p99 {_ms(r.ttft.p99_ns)} is over the {round_.name} {rules.name} limit of "
                   f"{limits.ttft_p99_ms:g} ms.")
    if r.tpot and r.tpot.p99_ns is not None and r.tpot.p99_ns >= limits.tpot_p99_ns:
        out.append(f"TPOT p99 {_ms(r.tpot.p99_ns)} is over the {round_.name} {rules.name} limit of "
                   f"{limits.tpot_p99_ms:g} ms.")
    return out


def _compliance_problems(run: LoggedRun, round_: Round, bench: Benchmark, rules: ScenarioRules) -> list[Finding]:
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
        # LoadGen logs the accuracy_sample_count *setting* (effective_accuracy_sample_count) even when the QSL
        # holds fewer samples (a 96-row set under a setting of 4395): it covers no more than the QSL has
        counts = [c for c in (s.accuracy_sample_count, run.qsl_total_count) if c is not None]
        covered = min(counts) if counts else None
        if covered is not None and covered != bench.accuracy_sample_count:
            out.append(Finding("accuracy.coverage", f"the accuracy run covered {covered} samples, not all "
                                                    f"{bench.accuracy_sample_count} of {bench.name}."))
    return out


def _latency_setting_problems(run: LoggedRun, rules: ScenarioRules, name: str) -> list[str]:
    s, limits = run.settings, rules.latency
    out = []
    top = rules.target_latency_max_ms
    if top is not None and s.target_latency_ns is not None and s.target_latency_ns > top * 1_000_000:
        out.append(f"target_latency was {s.target_latency_ns / 1e6:.0f} ms; "
                   f"the checker allows at most {top:g} ms for {name}: "
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
