"""One result folder made by MLCommons' endpoint client ("Loadgen++", v6.1), checked as the official checker does.

The official checker (mlcommons/inference tools/submission/submission_checker at b66003e) treats a
scenario folder as the endpoint client's when it holds neither LoadGen detail log (performance/run_1/
and accuracy/mlperf_log_detail.txt); `is_client_folder` decides the same way, so a tree that mixes the
two formats is read folder by folder as the checker reads it. For such a folder the checker applies:

- the model: the round accepts client results for its ENDPOINTS_ALLOWED_MODELS only (v6.1);
- the scenario: config.yaml's type against the folder (offline in Offline, online in Server; Interactive
  is named by its folder);
- the seeds: dataloader_random_seed and scheduler_random_seed are LoadGen's sample-index and schedule seeds;
- min_duration_ms as configured, >= 600 s;
- latency: an LLM's Server and Interactive p99 TTFT and TPOT strictly under the limits, Qwen3-VL's p99
  end-to-end latency at most its constraint, all from the early-stopping estimates;
- the result: samples issued over the duration (Offline), qps (Server, Interactive), tps (an LLM's Server);
- accuracy: a score must be there, Qwen3-VL's at least its target (closed); the samples the accuracy run
  covered equal the scenario's accuracy set;
- compliance: a present audit/audit_<test>.json passes; TEST09's mean output length within its bounds;
- measurements.json and README.md, without user.conf.

Where the rules ask more than that checker looks at, this one is stricter, each under its own rule:
the measured duration (not only the configured one) reaches the minimum, every issued sample completed
and none failed, an Offline run issued the round's query size, and an Interactive folder holds an
online run. Accuracy scores other than Qwen3-VL's are not compared with a target by either checker: the
client's scales differ from accuracy.txt's, which is said as a warning.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx.mlperf.endpoints.results import ClientResult, ClientSummary, read_client_result
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

    @property
    def config(self) -> str:
        return self.path(self.result.config_file or self.result.folder / "config.yaml")

    @property
    def summary(self) -> str:
        return self.path(self.result.folder / "performance" / "result_summary.json")

    @property
    def accuracy(self) -> str:
        return self.path(self.result.folder / "accuracy" / "accuracy_results.json")


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
    mine += _compliance(result, bench, at)
    problems += mine
    failed_performance = any(p.severity == ERROR for p in performance)
    return ResultRow(division=sub.division, submitter=sub.name, system=folder.system, benchmark=folder.benchmark,
                     scenario=folder.scenario, path=relative(folder.path, root), metric=metric, units=units,
                     validity=None if result.summary is None else ("INVALID" if failed_performance else "VALID"),
                     accuracy=accuracy, problems=sum(1 for p in mine if p.severity == ERROR), system_facts=system,
                     weight_data_types=str(measured.get("weight_data_types") or ""),
                     harness="endpoint-client")


def _measurements(folder: ResultFolder, round_: Round, root: Path, out: list[Problem]) -> dict[str, Any]:
    """README.md and measurements.json (no user.conf: the client has none); the JSON ({} when unusable)."""
    paths = ResultPaths(folder.submitter.path, round_.layout, folder.system, folder.benchmark, folder.scenario)
    return measurement_files(paths, root, round_, out, user_conf=False)


def _performance(result: ClientResult, round_: Round, bench: Benchmark, rules: ScenarioRules, closed: bool,
                 at: _Where) -> list[Problem]:
    out: list[Problem] = []
    config, summary = result.config, result.summary
    if result.config_file is None:
        return out  # reported as missing: the official checker stops on it with a traceback
    allowed = TYPES[rules.name]
    if config.test_type not in allowed:
        stricter = rules.name == "Interactive"  # the checker names Interactive by its folder, whatever the type
        out.append(Problem(at.config, "endpoints.scenario",
                           f"type: {config.test_type} in a {rules.name} folder"
                           + (" (the official checker lets it pass; an Interactive result is an online run)"
                              if stricter else ""),
                           f"run {rules.name} with type: {allowed[0]} (the checker reads the scenario from it), or "
                           "put the result under the scenario it was run as"))
    seeds = round_.seeds
    for key, found, want in (("dataloader_random_seed", config.dataloader_seed, seeds.sample_index_rng_seed),
                             ("scheduler_random_seed", config.scheduler_seed, seeds.schedule_rng_seed)):
        if found != want:
            out.append(Problem(at.config, "endpoints.seeds", f"settings.runtime.{key} is {found}, not {want}",
                               f"give submission_ref: {{ruleset: mlperf-inference-{round_.name}}} in the client's "
                               "config (it sets the round's seeds), and run again"))
    if config.min_duration_ms is None or config.min_duration_ms < rules.min_duration_ms:
        out.append(Problem(at.config, "endpoints.min-duration",
                           f"settings.runtime.min_duration_ms is {config.min_duration_ms}; {round_.name} needs at "
                           f"least {rules.min_duration_ms}", "leave min_duration_ms at the client's 600000 and run "
                                                              "again"))
    if summary is None:
        return out
    if summary.duration_ns is not None and summary.duration_ns < rules.min_duration_ms * 1_000_000:
        out.append(Problem(at.summary, "endpoints.duration",
                           f"the run lasted {summary.duration_ns / 1e9:.1f} s, under the "
                           f"{rules.min_duration_ms / 1000:g} s minimum (the official checker reads only the "
                           "configured minimum; the client does not enforce it, it sizes the sample count from it)",
                           "issue more samples (settings.runtime.n_samples_to_issue, or a higher target_qps for the "
                           "sizing) so that the run lasts the minimum"))
    out += _completion(summary, at)
    if rules.name == "Offline" and closed and rules.min_query_count and (summary.issued or 0) < rules.min_query_count:
        out.append(Problem(at.summary, "endpoints.sample-count",
                           f"the Offline run issued {summary.issued} samples; {round_.name} {bench.name} needs at "
                           f"least {rules.min_query_count} (the official checker skips this for the client's results)",
                           "issue at least the dataset once (settings.runtime.n_samples_to_issue)"))
    out += _latency(summary, round_, rules, at)
    return out


def _completion(summary: ClientSummary, at: _Where) -> list[Problem]:
    """Stricter than the official checker, which never reads n_samples_failed: LoadGen's logs of a run where
    a sample failed would carry an error."""
    why = []
    if summary.failed:
        why.append(f"{summary.failed} samples failed")
    if summary.state not in (None, "complete"):
        why.append(f"the run's state is {summary.state!r}")
    if summary.issued is not None and summary.completed is not None and summary.completed < summary.issued:
        why.append(f"{summary.completed} of {summary.issued} issued samples completed")
    if not why:
        return []
    return [Problem(at.summary, "endpoints.incomplete", "; ".join(why) + " (the official checker does not look)",
                    "find why requests failed (the client's events.jsonl and the server's log) and run again")]


def _latency(summary: ClientSummary, round_: Round, rules: ScenarioRules, at: _Where) -> list[Problem]:
    out = []
    where = f"{round_.name} {rules.name}"
    if rules.latency is not None:  # an LLM: TTFT and TPOT, each strictly under its limit
        limits = ((summary.ttft_p99_ns, rules.latency.ttft_p99_ns, "TTFT", "ttft"),
                  (summary.tpot_p99_ns, rules.latency.tpot_p99_ns, "TPOT", "tpot"))
        for found, limit, label, key in limits:
            if found is None:
                out.append(Problem(at.summary, "endpoints.latency-limit",
                                   f"no early-stopping p99 {label} ({key}.early_stopping_percentiles)",
                                   "stream the answers (model_params.streaming: on), keep early stopping on and run "
                                   "enough samples for a p99 estimate"))
            elif found >= limit:
                out.append(Problem(at.summary, "endpoints.latency-limit",
                                   f"{label} p99 {found / 1e6:.1f} ms is over the {where} limit of {limit / 1e6:g} ms",
                                   "lower the load (target_qps or concurrency) until the p99 is within the limit"))
    elif rules.target_latency_max_ms is not None:  # judged on whole answers (Qwen3-VL)
        limit_ns = rules.target_latency_max_ms * 1e6
        if summary.latency_p99_ns is None:
            out.append(Problem(at.summary, "endpoints.latency-limit",
                               "no early-stopping p99 latency (latency.early_stopping_percentiles)",
                               "keep early stopping on and run enough samples for a p99 estimate"))
        elif summary.latency_p99_ns > limit_ns:
            out.append(Problem(at.summary, "endpoints.latency-limit",
                               f"p99 latency {summary.latency_p99_ns / 1e6:.1f} ms is over the {where} limit of "
                               f"{rules.target_latency_max_ms:g} ms",
                               "lower the load (target_qps or concurrency) until the p99 is within the limit"))
    return out


def _metric(result: ClientResult, bench: Benchmark, rules: ScenarioRules, at: _Where,
            out: list[Problem]) -> tuple[float | None, str]:
    """The checker's result (RESULT_FIELD_ENDPOINTS, and an LLM Server's tokens/s); the row shows an LLM's tokens/s
    in every scenario (the official CSV labels its Offline issued samples/s as Tokens/s)."""
    summary = result.summary
    if summary is None or result.config_file is None:
        return None, "Tokens/s" if bench.token_latencies else "Samples/s"
    offline = rules.name == "Offline"
    needed = summary.issued_per_second if offline else (summary.qps or summary.issued_per_second)
    missing = "n_samples_issued and duration_ns" if offline else "qps"
    if needed is None:
        out.append(Problem(at.summary, "endpoints.result", f"no {missing} to compute the result from",
                           "copy result_summary.json of a completed run"))
    if bench.token_latencies and rules.name == "Server" and summary.tps is None:
        out.append(Problem(at.summary, "endpoints.result", "no tps (output tokens/s), the result of an LLM's Server",
                           "give the client the model's tokenizer so that it counts output tokens"))
    if bench.token_latencies:
        return summary.tps, "Tokens/s"
    return needed, "Samples/s" if offline else "Queries/s"


def _accuracy(result: ClientResult, bench: Benchmark, rules: ScenarioRules, closed: bool, at: _Where,
              out: list[Problem]) -> dict[str, float]:
    if result.scores is None:
        return {}
    score = result.first_score
    if score is None:
        out.append(Problem(at.accuracy, "accuracy.unreadable", "no accuracy score (accuracy_scores[].score)",
                           "run the client's accuracy dataset and copy accuracy_results.json"))
        return {}
    targets = bench.accuracy_for(rules.name)
    found = _numbers(score, targets.metrics)
    if closed and bench.name == "qwen3-vl-235b-a22b":  # the one the official checker compares
        metric = targets.metrics[0]
        value, minimum = found.get(metric), targets.minimum(metric)
        if value is None:
            out.append(Problem(at.accuracy, "accuracy.unreadable", f"the score {score!r} has no {metric}",
                               "copy accuracy_results.json as the client wrote it"))
        elif minimum is not None and value < minimum:
            out.append(Problem(at.accuracy, "accuracy.target", f"{metric} is {value:g}, below the minimum of "
                                                               f"{minimum:g}",
                               "closed needs the round's accuracy; submit to open or fix the model"))
    elif closed:
        out.append(Problem(at.accuracy, "accuracy.unchecked",
                           f"the score {score!r} is not compared with {bench.name}'s target by the official checker "
                           "(nor by cmx: the client's scale is not accuracy.txt's)",
                           "compare it with the reference's accuracy yourself before submitting", WARNING))
    covered, want = result.accuracy_samples, bench.accuracy_samples_for(rules.name)
    if covered != want:
        out.append(Problem(at.accuracy, "accuracy.coverage", f"the accuracy run covered {covered} samples, not all "
                                                             f"{want} of {bench.name} {rules.name}",
                           "run the accuracy dataset whole (no samples limit, one repeat)"))
    return found


def _numbers(score: Any, metrics: tuple[str, ...]) -> dict[str, float]:
    """The score as numbers by metric, read as the official checker reads it: a number (or a numeric string) is
    the first metric's; in a dict, the checker's name of the metric (F1_HIERARCHICAL), its lower case, its last
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
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _compliance(result: ClientResult, bench: Benchmark, at: _Where) -> list[Problem]:
    """A present audit file passes; TEST09's mean output length is within its bounds. The official checker applies
    both in every division, and needs no audit file but TEST04's (a benchmark cmx does not have)."""
    out = []
    for test in bench.compliance_tests:
        name = AUDIT_NAMES.get(test)
        if name is not None and result.audit(name).is_file():
            verdict = _json(result.audit(name))
            where = at.path(result.audit(name))
            if verdict.get("test") != name:
                out.append(Problem(where, "endpoints.audit", f"its test is {verdict.get('test')!r}, not {name!r}",
                                   f"copy the {test} audit's own file"))
            elif not verdict.get("passed"):
                out.append(Problem(where, "endpoints.audit", f"the {test} audit did not pass",
                                   "see the audit's verify file for why, fix it and run the audit again"))
        if test == "TEST09" and result.summary is not None:
            low, high = test09_bounds(audit_config("TEST09", bench.name))
            mean = result.summary.mean_output_tokens
            if mean is None or not low <= mean <= high:
                out.append(Problem(at.summary, "test09.check",
                                   f"mean output length {mean} tokens is outside TEST09's {low:g} to {high:g}"
                                   if mean is not None else "no mean output length (output_sequence_lengths.avg)",
                                   "run with the reference's generation settings (no max_new_tokens below the "
                                   "reference's) and the model's tokenizer, so that the client counts output tokens"))
    return out


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
