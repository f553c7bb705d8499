"""One result folder made by MLCommons' endpoint client ("Loadgen++", v6.1), checked as the official checker does.

The official checker (mlcommons/inference tools/submission/submission_checker at b66003e) treats a
scenario folder as the endpoint client's when it holds neither LoadGen detail log (performance/run_1/
and accuracy/mlperf_log_detail.txt); `is_client_folder` decides the same way, so a tree that mixes the
two formats is read folder by folder as the checker reads it. For such a folder the checker applies:

- the fields, each where the checker's parsers find it (cmx.mlperf.endpoints.results): result_summary.json or
  accuracy_results.json first, at the dotted name and then its alternative path, then config.yaml; a value is
  compared as written (a seed or a duration written as a string fails, as it does there);
- the model: the round accepts client results for its ENDPOINTS_ALLOWED_MODELS only (v6.1);
- the scenario: effective_scenario (config.yaml's type) against the folder (offline in Offline, online in
  Server; Interactive is named by its folder);
- the seeds: the sample-index and schedule seeds (config.yaml's dataloader_random_seed, scheduler_random_seed);
- min_duration_ms as configured, >= 600 s;
- latency: an LLM's Server and Interactive p99 TTFT and TPOT strictly under the limits, Qwen3-VL's p99
  end-to-end latency at most its constraint, all from the early-stopping estimates;
- the result: samples issued over the duration (Offline), qps (Server, Interactive), tps (an LLM's Server),
  above 0 (a 0 is NoResults there);
- failed samples of the accuracy run (result.failed, n_samples_failed, then config.yaml's result.failed);
- accuracy: a score must be there, Qwen3-VL's at least its target (closed); the samples the accuracy run
  covered equal the scenario's accuracy set;
- compliance: a present audit/audit_<test>.json passes (TEST04's is required where the round accepts the
  client's results for a benchmark with TEST04); TEST09's mean output length within its bounds;
- measurements.json and README.md, without user.conf.

Where the rules ask more than that checker looks at, this one is stricter, each finding saying "cmx's rule":
the measured duration (not only the configured one) reaches the minimum, no sample of the performance run
failed (the checker reads the count there but lets it pass), an Offline run issued the round's query size,
an Interactive folder holds an online run, and no judged number is NaN or infinite (some of the checker's
comparisons let a NaN pass). Accuracy scores other than Qwen3-VL's are not compared with a target by either
checker: the client's scales differ from accuracy.txt's, which is said as a warning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx.mlperf.endpoints.results import (
    ACCURACY,
    COMPLETED,
    FAILED,
    SUMMARY,
    YAML_FIELD_MAP,
    ClientResult,
    Fields,
    Found,
    echo,
    number,
    read_client_result,
    read_mapping,
    whole,
)
from cmx.mlperf.loadgen.test07 import audit_config
from cmx.mlperf.loadgen.test09 import bounds as test09_bounds
from cmx.mlperf.rounds import Benchmark, Round, ScenarioRules
from cmx.mlperf.scoring.accuracy_txt import CHECKER_NAMES
from cmx.mlperf.submission.check.layout import ResultFolder
from cmx.mlperf.submission.check.model import ERROR, WARNING, Problem, ResultRow
from cmx.mlperf.submission.check.result import measurement_files
from cmx.mlperf.submission.tree import DETAIL_LOG, ResultPaths, relative

CLIENT = "MLCommons' endpoint client"
# constants.py ENDPOINTS_COMPLIANCE_MAPPING: a compliance test's audit name in the client's audit/ folder
AUDIT_NAMES = {"TEST01": "accuracy_in_performance_test", "TEST04": "output_caching_test",
               "TEST06": "consistency_output_test", "TEST07": "accuracy_in_performance_full_test",
               "TEST08": "accuracy_in_performance_dlrmv3_test"}
# config.yaml's type for each scenario folder (the checker maps online to Server, names Interactive by folder)
TYPES = {"Offline": ("offline",), "Server": ("online",), "Interactive": ("online", "submission", "interactive")}


def is_client_folder(result_dir: Path) -> bool:
    """The checker's test: neither LoadGen detail log is there."""
    return not (result_dir / "performance" / "run_1" / DETAIL_LOG).is_file() and \
        not (result_dir / "accuracy" / DETAIL_LOG).is_file()


@dataclass(frozen=True)
class _Where:
    root: Path
    result: ClientResult

    def path(self, file: Path | None = None) -> str:
        return relative(file or self.result.folder, self.root)

    def field(self, found: Found | None, fallback: Path) -> str:
        """The file that answered for a field (or the one that should have)."""
        return self.path(found.file if found is not None else fallback)

    @property
    def summary_file(self) -> Path:
        return self.result.folder / SUMMARY

    @property
    def summary(self) -> str:
        return self.path(self.summary_file)

    @property
    def accuracy(self) -> str:
        return self.path(self.result.folder / ACCURACY)


def check_client_result(folder: ResultFolder, root: Path, round_: Round, system: dict[str, Any],
                        problems: list[Problem]) -> ResultRow:
    """Every rule for one endpoint-client result, appending to `problems`; its row in the table and the CSV."""
    sub, bench_name = folder.submitter, folder.official or folder.benchmark
    closed = sub.division != "open"
    bench = round_.benchmark(bench_name)
    rules = bench.scenario(folder.scenario)
    result = read_client_result(folder.path)
    at = _Where(root, result)
    mine: list[Problem] = []
    if bench_name not in round_.endpoints_benchmarks:
        accepted = ", ".join(round_.endpoints_benchmarks) or "none"
        mine.append(Problem(at.path(), "endpoints.model",
                            f"a result of {CLIENT} (no LoadGen logs), which {round_.name} does not accept for "
                            f"{bench_name} (it accepts them for: {accepted})",
                            "run the benchmark with LoadGen (cmx run) and package its logs"))
    for path, why in result.unreadable:
        rule = "layout.missing-file" if why == "missing" else "endpoints.unreadable"
        mine.append(Problem(at.path(path), rule, why, f"copy it from {CLIENT}'s report folder of the run"))
    measured = _measurements(folder, round_, root, mine)
    power = folder.path / "performance" / "power"
    if power.is_dir():
        mine.append(Problem(at.path(power), "power.unchecked",
                            "a power measurement beside an endpoint client's result: the official checker's power "
                            "check reads LoadGen logs (performance/run_1), which this result has none of",
                            "submit power with a LoadGen run, or remove the folder"))
    performance = _performance(result, round_, bench, rules, closed, at)
    mine += performance
    metric, units = _metric(result, bench, rules, at, mine)
    accuracy = _accuracy(result, bench, rules, closed, at, mine)
    mine += _compliance(result, bench, at, accepted=bench_name in round_.endpoints_benchmarks)
    problems += mine
    failed_performance = any(p.severity == ERROR for p in performance)
    return ResultRow(division=sub.division, submitter=sub.name, system=folder.system, benchmark=folder.benchmark,
                     scenario=folder.scenario, path=relative(folder.path, root), metric=metric, units=units,
                     validity=None if not result.summary_read else ("INVALID" if failed_performance else "VALID"),
                     accuracy=accuracy, problems=sum(1 for p in mine if p.severity == ERROR), system_facts=system,
                     weight_data_types=str(measured.get("weight_data_types") or ""),
                     harness="endpoint-client")


def _measurements(folder: ResultFolder, round_: Round, root: Path, out: list[Problem]) -> dict[str, Any]:
    """README.md and measurements.json (no user.conf: the client has none); the JSON ({} when unusable)."""
    paths = ResultPaths(folder.submitter.path, round_.layout, folder.system, folder.benchmark, folder.scenario)
    return measurement_files(paths, root, round_, out, user_conf=False)


NAN_NOTE = ("cmx's rule: the official checker compares a NaN or an infinity as it finds it, and some of its "
            "comparisons let one pass")


def _what(found: Found | None, name: str) -> str:
    """`key is value` for a finding, or that the field is missing (with the checker's name for it)."""
    if found is None:
        return f"no {name}"
    return f"{found.key} is {echo(found.value)}"


def _non_finite(found: Found | None) -> bool:
    return found is not None and isinstance(found.value, float) and not math.isfinite(found.value)


def _performance(result: ClientResult, round_: Round, bench: Benchmark, rules: ScenarioRules, closed: bool,
                 at: _Where) -> list[Problem]:
    out: list[Problem] = []
    fields = result.performance
    scenario = fields.get("effective_scenario")
    allowed = TYPES[rules.name]
    if scenario is None or not isinstance(scenario.value, str) or scenario.value not in allowed:
        lax = rules.name == "Interactive" or (scenario is not None and isinstance(scenario.value, str)
                                              and scenario.value.lower() in (rules.name.lower(), *allowed))
        out.append(Problem(at.field(scenario, fields.yaml_file), "endpoints.scenario",
                           f"{_what(scenario, 'type (effective_scenario)')} in a {rules.name} folder"
                           + (" (cmx's rule: the client writes offline or online; the official checker lets this "
                              "pass, naming the scenario by its folder or ignoring case)" if lax else ""),
                           f"run {rules.name} with type: {allowed[0]} (the checker reads the scenario from it), or "
                           "put the result under the scenario it was run as"))
    seeds = round_.seeds
    for name, want in (("effective_sample_index_rng_seed", seeds.sample_index_rng_seed),
                       ("effective_schedule_rng_seed", seeds.schedule_rng_seed)):
        found = fields.get(name)
        value = None if found is None else found.value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != want:
            kind = " (a string: the checker compares the seed as written)" if isinstance(value, str) else ""
            out.append(Problem(at.field(found, fields.yaml_file), "endpoints.seeds",
                               f"{_what(found, YAML_FIELD_MAP[name])}{kind}, not {want}",
                               f"give submission_ref: {{ruleset: mlperf-inference-{round_.name}}} in the client's "
                               "config (it sets the round's seeds), leave no other value of it in the result files, "
                               "and run again"))
    configured = fields.get("min_duration_ms")
    minimum = number(configured.value) if configured is not None else None
    if minimum is None or minimum < rules.min_duration_ms:
        note = f" ({NAN_NOTE})" if _non_finite(configured) else ""
        out.append(Problem(at.field(configured, fields.yaml_file), "endpoints.min-duration",
                           f"{_what(configured, 'settings.runtime.min_duration_ms')}; {round_.name} needs a number of "
                           f"at least {rules.min_duration_ms}{note}",
                           "leave min_duration_ms at the client's 600000 and run again"))
    if not result.summary_read:
        return out
    measured = fields.get("duration_ns")
    duration = number(measured.value) if measured is not None else None
    if duration is not None and duration < rules.min_duration_ms * 1_000_000:
        out.append(Problem(at.field(measured, at.summary_file), "endpoints.duration",
                           f"the run lasted {duration / 1e9:.1f} s, under the {rules.min_duration_ms / 1000:g} s "
                           "minimum (cmx's rule: the official checker reads only the configured minimum; the client "
                           "does not enforce it, it sizes the sample count from it)",
                           "issue more samples (settings.runtime.n_samples_to_issue, or a higher target_qps for the "
                           "sizing) so that the run lasts the minimum"))
    out += _completion(result, at)
    issued = fields.get("generated_query_count")
    count = number(issued.value) if issued is not None else None
    if rules.name == "Offline" and closed and rules.min_query_count and (count or 0) < rules.min_query_count:
        out.append(Problem(at.field(issued, at.summary_file), "endpoints.sample-count",
                           f"the Offline run issued {echo(issued.value) if issued else 'no'} samples; {round_.name} "
                           f"{bench.name} needs at least {rules.min_query_count} (cmx's rule: the official checker "
                           "skips this for the client's results)",
                           "issue at least the dataset once (settings.runtime.n_samples_to_issue)"))
    out += _latency(fields, round_, rules, at)
    return out


def _failed(found: Found | None) -> bool:
    """The checker's has_error(): (num_errors or 0) != 0, so "0" as a string, or a NaN, counts as failed."""
    return found is not None and bool(found.value) and found.value != 0


def _completion(result: ClientResult, at: _Where) -> list[Problem]:
    """Failed samples: the official checker fails them in the accuracy run (AccuracyCheck.loadgen_errors_check
    reads result.failed, n_samples_failed, then config.yaml's result.failed) and lets them pass in the
    performance run (its performance check acts only on LoadGen's error messages, which the client has none
    of). cmx fails both, and a run that did not complete: LoadGen's logs of such a run would carry an error."""
    out = []
    in_accuracy = result.accuracy.get(FAILED)
    if _failed(in_accuracy):
        out.append(Problem(at.field(in_accuracy, result.accuracy.yaml_file), "endpoints.incomplete",
                           f"the accuracy run: {_what(in_accuracy, 'n_samples_failed')} (failed samples)",
                           "find why requests failed (the client's events.jsonl and the server's log) and run "
                           "accuracy again"))
    fields = result.performance
    why, where = [], fields.get(FAILED)
    if _failed(where):
        why.append(f"{_what(where, 'n_samples_failed')} (failed samples)")
    state = fields.json_data.get("state")
    if state not in (None, "complete"):
        why.append(f"the run's state is {echo(state)}")
    completed, issued = fields.get(COMPLETED), fields.get("generated_query_count")
    done, total = (number(f.value) if f is not None else None for f in (completed, issued))
    if done is not None and total is not None and done < total:
        why.append(f"{done:g} of {total:g} issued samples completed")
    if why:
        out.append(Problem(at.field(where, at.summary_file), "endpoints.incomplete",
                           "the performance run: " + "; ".join(why) + " (cmx's rule: the official checker lets a "
                           "performance run with failed samples pass)",
                           "find why requests failed (the client's events.jsonl and the server's log) and run again"))
    return out


def _latency(fields: Fields, round_: Round, rules: ScenarioRules, at: _Where) -> list[Problem]:
    out = []
    where = f"{round_.name} {rules.name}"
    if rules.latency is not None:  # an LLM: TTFT and TPOT, each strictly under its limit
        for name, limit, label in (("ttft", rules.latency.ttft_p99_ns, "TTFT"),
                                   ("tpot", rules.latency.tpot_p99_ns, "TPOT")):
            found = fields.get(f"{name}.early_stopping_percentiles.99.0")
            value = number(found.value) if found is not None else None
            if value is None:
                out.append(Problem(at.field(found, at.summary_file), "endpoints.latency-limit",
                                   f"{_what(found, f'{name}.early_stopping_percentiles.99.0')}: no early-stopping p99 "
                                   f"{label} in nanoseconds",
                                   "stream the answers (model_params.streaming: on), keep early stopping on and run "
                                   "enough samples for a p99 estimate"))
            elif value >= limit:
                out.append(Problem(at.field(found, at.summary_file), "endpoints.latency-limit",
                                   f"{label} p99 {value / 1e6:.1f} ms is over the {where} limit of {limit / 1e6:g} ms",
                                   "lower the load (target_qps or concurrency) until the p99 is within the limit"))
    elif rules.target_latency_max_ms is not None:  # judged on whole answers (Qwen3-VL)
        found = fields.get("latency.early_stopping_percentiles.99.0")
        value = number(found.value) if found is not None else None
        if value is None:
            note = f" ({NAN_NOTE})" if _non_finite(found) else ""
            out.append(Problem(at.field(found, at.summary_file), "endpoints.latency-limit",
                               f"{_what(found, 'latency.early_stopping_percentiles.99.0')}: no early-stopping p99 "
                               f"latency in nanoseconds{note}",
                               "keep early stopping on and run enough samples for a p99 estimate"))
        elif value > rules.target_latency_max_ms * 1e6:
            out.append(Problem(at.field(found, at.summary_file), "endpoints.latency-limit",
                               f"p99 latency {value / 1e6:.1f} ms is over the {where} limit of "
                               f"{rules.target_latency_max_ms:g} ms",
                               "lower the load (target_qps or concurrency) until the p99 is within the limit"))
    return out


def _as_float(found: Found | None) -> float | None:
    """The checker's float() of a result field: a number or a numeric string; None where float() raises."""
    if found is None or isinstance(found.value, (dict, list)):
        return None
    if isinstance(found.value, str) and len(found.value) > 40:
        return None
    try:
        return float(found.value)
    except (TypeError, ValueError, OverflowError):
        return None


def _metric(result: ClientResult, bench: Benchmark, rules: ScenarioRules, at: _Where,
            out: list[Problem]) -> tuple[float | None, str]:
    """The checker's result (RESULT_FIELD_ENDPOINTS, and an LLM Server's tokens/s); the row shows an LLM's tokens/s
    in every scenario (the official CSV labels its Offline issued samples/s as Tokens/s). A result of 0 is
    NoResults to the checker; cmx also refuses a negative or non-finite one."""
    fields = result.performance
    if not result.summary_read:
        return None, "Tokens/s" if bench.token_latencies else "Samples/s"
    count_f, duration_f = fields.get("generated_query_count"), fields.get("duration_ns")
    count, duration = (number(f.value) if f is not None else None for f in (count_f, duration_f))
    per_second = count / (duration / 1e9) if count and duration else None
    offline = rules.name == "Offline"
    qps_f = fields.get("qps")
    needed = per_second if offline else (_as_float(qps_f) if qps_f is not None else per_second)
    if needed is None or not math.isfinite(needed) or needed <= 0:
        what = (f"n_samples_issued {echo(count_f.value) if count_f else 'missing'} over duration_ns "
                f"{echo(duration_f.value) if duration_f else 'missing'}" if offline or qps_f is None
                else _what(qps_f, "qps"))
        out.append(Problem(at.field(qps_f if qps_f is not None and not offline else count_f, at.summary_file),
                           "endpoints.result", f"no positive result to report: {what}",
                           "copy result_summary.json of a completed run"))
    tokens = None
    if bench.token_latencies:
        tps_f = fields.get("tps")
        tokens = _as_float(tps_f)
        if rules.name == "Server" and (tokens is None or not math.isfinite(tokens) or tokens <= 0):
            out.append(Problem(at.field(tps_f, at.summary_file), "endpoints.result",
                               f"{_what(tps_f, 'tps')}: no positive output tokens/s, the result of an LLM's Server",
                               "give the client the model's tokenizer so that it counts output tokens"))
        return (tokens if tokens is not None and math.isfinite(tokens) else None), "Tokens/s"
    return (needed if needed is not None and math.isfinite(needed) else None), \
        "Samples/s" if offline else "Queries/s"


def _accuracy(result: ClientResult, bench: Benchmark, rules: ScenarioRules, closed: bool, at: _Where,
              out: list[Problem]) -> dict[str, float]:
    if result.scores is None:
        return {}
    if any(not isinstance(entry, dict) for entry in result.scores):
        out.append(Problem(at.accuracy, "accuracy.unreadable", "an entry of accuracy_scores is not a mapping (the "
                                                               "official checker stops on it)",
                           "copy accuracy_results.json as the client wrote it"))
        return {}
    score = next((e.get("score") for e in result.scores if e.get("score") is not None), None)
    found: dict[str, float] = {}
    if score is None:
        out.append(Problem(at.accuracy, "accuracy.unreadable", "no accuracy score (accuracy_scores[].score)",
                           "run the client's accuracy dataset and copy accuracy_results.json"))
    else:
        targets = bench.accuracy_for(rules.name)
        found = _numbers(score, targets.metrics)
        if closed and bench.endpoints_accuracy_checked:  # the round says the official checker compares it
            metric = targets.metrics[0]
            value, minimum = found.get(metric), targets.minimum(metric)
            if value is None:
                out.append(Problem(at.accuracy, "accuracy.unreadable",
                                   f"the score {echo(score)} has no finite number for {metric} (a NaN or a boolean "
                                   "is cmx's refusal: the official checker compares them as numbers)",
                                   "copy accuracy_results.json as the client wrote it"))
            elif minimum is not None and value < minimum:
                out.append(Problem(at.accuracy, "accuracy.target", f"{metric} is {value:g}, below the minimum of "
                                                                   f"{minimum:g}",
                                   "closed needs the round's accuracy; submit to open or fix the model"))
        elif closed:
            out.append(Problem(at.accuracy, "accuracy.unchecked",
                               f"the score {echo(score)} is not compared with {bench.name}'s target by the official "
                               "checker (nor by cmx: the client's scale is not accuracy.txt's)",
                               "compare it with the reference's accuracy yourself before submitting", WARNING))
    covered, want = _accuracy_samples(result), bench.accuracy_samples_for(rules.name)
    if covered is ... or covered != want or isinstance(covered, bool):
        shown = "a count the checker cannot read" if covered is ... else echo(covered)
        out.append(Problem(at.accuracy, "accuracy.coverage", f"the accuracy run covered {shown} samples, not all "
                                                             f"{want} of {bench.name} {rules.name}",
                           "run the accuracy dataset whole (no samples limit, one repeat)"))
    return found


def _accuracy_samples(result: ClientResult) -> Any:
    """The checker's count of the accuracy run: the sum of int(total_samples) (else response_counts.issued) over
    the accuracy datasets, else n_samples_issued as found (accuracy_results.json, then config.yaml). `...` where
    its int() would raise."""
    counts = []
    for entry in result.scores or ():
        if entry.get("dataset_type") not in (None, "accuracy"):
            continue
        raw = entry.get("total_samples")
        if raw is None:
            responses = entry.get("response_counts", {})
            if not isinstance(responses, dict):
                return ...
            raw = responses.get("issued")
        if raw is not None:
            count = whole(raw)
            if count is None:
                return ...
            counts.append(count)
    if counts:
        return sum(counts)
    issued = result.accuracy.get("n_samples_issued")
    return None if issued is None else issued.value


def _numbers(score: Any, metrics: tuple[str, ...]) -> dict[str, float]:
    """The score as finite numbers by metric, read as the official checker reads it: a number (or a numeric string)
    is the first metric's; in a dict, the checker's name of the metric (F1_HIERARCHICAL), its lower case, its last
    word, then f1, score and accuracy, the first number found."""
    value = _number(score)
    if value is not None:
        return {metrics[0]: value} if metrics else {}
    if not isinstance(score, dict):
        return {}
    out = {}
    for metric in metrics:
        name = CHECKER_NAMES.get(metric, metric)
        for key in (name, name.lower(), name.split("_")[-1].lower(), "f1", "score", "accuracy"):
            found = _number(score.get(key))
            if found is not None:
                out[metric] = found
                break
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, str) and len(value) <= 40:
        try:
            value = float(value)
        except ValueError:
            return None
    return number(value)


def _compliance(result: ClientResult, bench: Benchmark, at: _Where, *, accepted: bool = True) -> list[Problem]:
    """A present audit file passes; TEST09's mean output length is within its bounds. The official checker applies
    both in every division, and needs no audit file but TEST04's, of a benchmark whose client results the round
    accepts (`accepted`; compliance_check.py endpoint_audit_file_required: the text-to-video benchmark)."""
    out = []
    for test in bench.compliance_tests:
        name = AUDIT_NAMES.get(test)
        if name is not None and test == "TEST04" and accepted and not result.audit(name).is_file():
            out.append(Problem(at.path(result.audit(name)), "endpoints.audit", "missing",
                               f"the official checker needs {CLIENT}'s {test} audit ({name}) for this benchmark: run "
                               "it and copy its audit file into the result's audit/ folder"))
        if name is not None and result.audit(name).is_file():
            verdict = read_mapping(result.audit(name), [], below=result.folder) or {}
            where = at.path(result.audit(name))
            if verdict.get("test") != name:
                out.append(Problem(where, "endpoints.audit", f"its test is {echo(verdict.get('test'))}, not {name!r}",
                                   f"copy the {test} audit's own file"))
            elif not verdict.get("passed"):
                out.append(Problem(where, "endpoints.audit", f"the {test} audit did not pass",
                                   "see the audit's verify file for why, fix it and run the audit again"))
        if test == "TEST09" and result.summary_read:
            low, high = test09_bounds(audit_config("TEST09", bench.name))
            found = result.performance.get("output_sequence_lengths.avg")
            mean = number(found.value) if found is not None else None
            if mean is None or not low <= mean <= high:
                note = f" ({NAN_NOTE})" if _non_finite(found) else ""
                out.append(Problem(at.field(found, at.summary_file), "test09.check",
                                   f"mean output length {mean:g} tokens is outside TEST09's {low:g} to {high:g}"
                                   if mean is not None else
                                   f"{_what(found, 'output_sequence_lengths.avg')}: no mean output length{note}",
                                   "run with the reference's generation settings (no max_new_tokens below the "
                                   "reference's) and the model's tokenizer, so that the client counts output tokens"))
    return out
