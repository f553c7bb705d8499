"""Run an MLPerf Inference benchmark end to end: per scenario, its tests (in one harness process, on one
engine started for the scenario), their scoring, and a results tree that says what the run is worth.

The layout, under `results_dir`:

    <system>/<benchmark>/<Scenario>/
        user.conf             the user.conf every test of the scenario ran with
        performance/run_1/    LoadGen's logs of the performance run, result.json, harness.log (the harness
                              process's whole log, the engine's included: the scenario's first test)
        accuracy/             the accuracy run, and accuracy.txt (ROUGE, tokens per sample); each later
                              test's harness.log holds its own harness lines
        TEST06/ (TEST01/, TEST07/, TEST09/)  the round's compliance runs and their verification files
        cmx_run.json          the facts: short, tiny, compliant and why not, validity (cmx's verdict:
                              FAILED when a test went wrong) beside loadgen_validity (LoadGen's own),
                              problems, the sampling used beside the reference's, and where the run came
                              from (command, versions, system, model: RunOrigin)
    <system>/<benchmark>/<Scenario>.failed-<UTC time>/
                              an earlier attempt that failed or never finished, set aside (kept) when the
                              scenario is run again; the packager and the report skip it
    summary.txt               one line per test (the table `format_table` prints)

A short run (cmx's smoke profile) or one on the tiny model is never compliant, and cmx_run.json
says so. `run_app` refuses to report success when a test is INVALID, has errors in its log, or
(a compliance test) fails a check: it raises AppRunFailed naming each test and why, after writing everything.
The first line of that error is the cause (failed samples before LoadGen's complaints about their empty
answers), and such a test's validity is FAILED wherever it is written, whatever LoadGen said.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.errors import StepError
from cmx.mlperf.app_plan import AppConfigError
from cmx.mlperf.backends.base import GREEDY, Sampling
from cmx.mlperf.engines import engine_for_run
from cmx.mlperf.loadgen.compliance import MODES as COMPLIANCE_MODES
from cmx.mlperf.loadgen.harness import STOPPED_EARLY, ProgressCallback, evaluate_accuracy, run_tests, verify_test06
from cmx.mlperf.loadgen.harness_config import (
    API_KEY_ENV,
    MODES,
    EndpointSettings,
    EngineSettings,
    HarnessConfig,
    HarnessResult,
    LoadgenSource,
    VideoShape,
    recorded_validity,
)
from cmx.mlperf.loadgen.run_record import FAILED
from cmx.mlperf.loadgen.userconf import ShortProfile, UserConf, user_conf
from cmx.mlperf.provenance import RunOrigin
from cmx.mlperf.rounds import Round, load_round
from cmx.mlperf.run_summary import RunSummary, format_row, format_table
from cmx.mlperf.scoring.external import ExternalScorer
from cmx.mlperf.serving_stack import ServingStack
from cmx.secrets import Secret

if TYPE_CHECKING:
    from cmx.mlperf.backends.disaggregated import PrefillDecode, TopologyReport
    from cmx.mlperf.engines.base import Engine
    from cmx.mlperf.tune.findperf import FoundTarget

# a compliance test's run goes into its TEST0x folder
MODE_FOLDERS = {"performance": "performance/run_1", "accuracy": "accuracy", **{m: m.upper() for m in COMPLIANCE_MODES}}
CMX_RUN_JSON = "cmx_run.json"
# a failed attempt's scenario folder, set aside for its re-run: <Scenario>.failed-<UTC time of the attempt>
SET_ASIDE = ".failed-"
# what an attempt that never finished leaves in its scenario folder (no cmx_run.json yet)
ATTEMPT_ENTRIES = frozenset({"user.conf", *(m.split("/")[0] for m in MODE_FOLDERS.values())})
NEVER_MIXED = "cmx never mixes two runs' logs"
SUMMARY_TXT = "summary.txt"
SHORT_SAMPLES = 64
# A short Offline run issues about 1.1 x target_qps x min_duration samples and is VALID when it lasts min_duration:
# its safety margin (a machine up to 1.1 x target_qps fast) does not depend on min_duration, only its length does.
# A short Server/Interactive run is VALID only with >= 459 queries (early stopping at p99), so it asks for 480
SHORT_PROFILES = {
    "Offline": ShortProfile(min_duration_ms=500, samples=SHORT_SAMPLES, min_query_count=SHORT_SAMPLES),
    "Server": ShortProfile(min_duration_ms=4000, samples=SHORT_SAMPLES, min_query_count=480),
    "Interactive": ShortProfile(min_duration_ms=4000, samples=SHORT_SAMPLES, min_query_count=480),
    # a SingleStream run's early stopping at p90 with 99 % confidence needs 64 queries with at most one over the
    # estimate: one query at a time, so a short one asks for that many and no duration
    "SingleStream": ShortProfile(min_duration_ms=0, samples=SHORT_SAMPLES, min_query_count=SHORT_SAMPLES),
}
SHORT_TIMEOUT_S = 900.0


class AppRunFailed(StepError):
    """At least one test is INVALID, has errors in its log, or failed its checks."""


@dataclass(frozen=True)
class AppConfig:
    """Everything one app run needs, resolved (paths exist, names chosen)."""

    round: str
    benchmark: str
    device: str
    scenarios: tuple[str, ...]
    modes: tuple[str, ...]
    model: Path
    tokenizer: Path
    dataset: Path
    results_dir: Path
    system: str
    target_qps: Mapping[str, float | None]
    short: bool = False
    tiny: bool = False
    rows: int | None = None
    max_tokens: int = 1024
    engine: EngineSettings = field(default_factory=EngineSettings)
    backend: str = "vllm"     # vllm (in the harness process) or endpoint (an OpenAI-compatible server)
    endpoint: EndpointSettings | None = None  # the server; with backend endpoint and None, cmx starts vllm serve
    api_key: Secret | None = None              # the endpoint's; handed to the harness in its environment only
    server_log_dir: Path | None = None         # where the vllm serve cmx starts logs (default: results_dir)
    server_log: Path | None = None             # set by `serving` when cmx started the server
    server_python_path: tuple[Path, ...] = ()  # first on that server's PYTHONPATH (a CPU torchvision, for a VLM)
    serving_stack: ServingStack | None = None  # what serves endpoint_url, as `cmx deploy` described it
    prefill_decode: PrefillDecode | None = None  # with _endpoint and no URL: cmx starts this disaggregated topology
    topology: Callable[[], TopologyReport] | None = None  # set by `serving` when it started one: its report so far
    timeout_s: float | None = None
    eos_token_id: int | None = None  # the model's, for TEST06's EOS check (None: Llama 2's)
    origin: RunOrigin | None = None  # recorded in cmx_run.json for the submission packager
    sampling: Sampling = GREEDY      # what the backend samples with: the reference's unless overridden
    reference_sampling: Sampling | None = None  # the benchmark reference's (None: the same as `sampling`)
    found: Mapping[str, FoundTarget] = field(default_factory=dict)  # the targets find-performance measured
    loadgen: LoadgenSource | None = None  # get-loadgen's: the round's pin (None: the harness finds it)
    video: VideoShape | None = None  # a text-to-video run's shape where not the reference's (_tiny's)
    scorer: ExternalScorer | None = None  # VBench's environment and networks, for wan-2.2-t2v-a14b's accuracy

    def __post_init__(self) -> None:
        unknown = [m for m in self.modes if m not in MODES]
        if unknown or not self.modes:
            raise AppConfigError(f"unknown or no modes: {', '.join(unknown) or '(none)'}",
                                 hint=f"modes are {', '.join(MODES)}")
        engine_for_run(self)  # an unknown backend, or inputs its engine cannot honour, fail here
        if not self.scenarios:
            raise AppConfigError("no scenario to run", hint="choose one of _offline, _server, _interactive, "
                                                            "_all-scenarios")
        if self.serving_stack is not None and self.endpoint is None:
            raise AppConfigError("serving_stack describes the stack behind an endpoint_url, and none was given",
                                 hint="give --input endpoint_url=... with it (cmx deploy's Job does), or drop it")

    @property
    def chosen_engine(self) -> Engine:
        """The engine the backend and inputs ask for (cmx.mlperf.engines)."""
        return engine_for_run(self)

    @property
    def sampling_overrides(self) -> tuple[str, ...]:
        """The sampling fields the user set to other values than the reference's."""
        return self.sampling.differences(self.reference_sampling or self.sampling)

    def scenario_dir(self, scenario: str) -> Path:
        return self.results_dir / self.system / self.benchmark / scenario

    def run_dir(self, scenario: str, mode: str) -> Path:
        return self.scenario_dir(scenario) / MODE_FOLDERS[mode]


@dataclass(frozen=True)
class AppResult:
    results_dir: Path
    runs: list[RunSummary]
    table: str

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.runs)


Runner = Callable[..., list[HarnessResult]]  # one scenario's tests, in one harness process
Evaluator = Callable[..., Path]
Verifier = Callable[[Path, str, int | None], Path]


def scenario_user_conf(config: AppConfig, round_: Round, scenario: str) -> UserConf:
    qps = config.target_qps.get(scenario)
    if qps is None and not round_.benchmark(config.benchmark).scenario(scenario).latency_result:
        raise AppConfigError(f"no target_qps for {config.benchmark} {scenario}",
                             hint=f"give --input target_qps_{scenario.lower()}=N: the throughput you expect "
                                  "(samples/s); LoadGen sizes the run from it")
    short = short_profile(scenario, config.rows) if config.short else None
    return user_conf(round_, config.benchmark, scenario, target_qps=qps, short=short)


def short_profile(scenario: str, rows: int | None) -> ShortProfile:
    profile = SHORT_PROFILES[scenario]
    if rows is not None and rows < profile.samples:
        # fewer samples loaded, the same query: LoadGen issues the loaded ones again to fill an Offline query, so a
        # run of 4 rows still measures 64 samples (4 would measure little but the start, and TEST04's 20 would
        # then compare with that)
        return ShortProfile(min_duration_ms=profile.min_duration_ms, samples=rows,
                            min_query_count=profile.min_query_count, max_query_count=profile.max_query_count)
    return profile


def harness_config(config: AppConfig, scenario: str, mode: str, conf: Path) -> HarnessConfig:
    return HarnessConfig(model=config.model, dataset=config.dataset, scenario=scenario, mode=mode, user_conf=conf,
                         output=config.run_dir(scenario, mode), round=config.round, benchmark=config.benchmark,
                         device=config.device, max_tokens=config.max_tokens, rows=config.rows, engine=config.engine,
                         endpoint=config.endpoint, sampling=config.sampling, loadgen=config.loadgen,
                         video=config.video, scorer=config.scorer)


def run_scenario(config: AppConfig, round_: Round, scenario: str, *, runner: Runner = run_tests,
                 evaluate: Evaluator = evaluate_accuracy, verify: Verifier = verify_test06,
                 logger: logging.Logger | None = None,
                 on_progress: ProgressCallback | None = None) -> list[RunSummary]:
    """The scenario's tests in order, each scored; writes user.conf and cmx_run.json. `on_progress` hears
    each test's live progress (cmx.mlperf.loadgen.progress.RunProgress)."""
    log = logger or logging.getLogger(__name__)
    folder = config.scenario_dir(scenario)
    folder.mkdir(parents=True, exist_ok=True)
    conf = scenario_user_conf(config, round_, scenario)
    conf_path = conf.write(folder / "user.conf")
    tests = [harness_config(config, scenario, mode, conf_path) for mode in config.modes]
    log.info("%s: %s in one harness process on one engine (logs in %s)", scenario, ", ".join(config.modes), folder)
    env = {API_KEY_ENV: config.api_key.reveal()} if config.api_key else None
    results = runner(tests, timeout=config.timeout_s, logger=log, env=env, on_progress=on_progress)
    runs: list[RunSummary] = []
    for hc, result in zip(tests, results, strict=False):  # fewer results: the backend died, the last says so
        summary = score(config, round_, result, hc.output, evaluate=evaluate, verify=verify)
        log.info("%s", format_row(summary, whole_answers=not round_.benchmark(config.benchmark).token_latencies))
        runs.append(summary)
    write_cmx_run(config, round_, scenario, conf, runs)
    return runs


def score(config: AppConfig, round_: Round, result: HarnessResult, output: Path, *,
          evaluate: Evaluator = evaluate_accuracy, verify: Verifier = verify_test06) -> RunSummary:
    """A test's summary: the harness's verdict, plus ROUGE (accuracy) or the compliance test's checks."""
    problems = list(result.problems)
    rouge = None
    if result.mode == "accuracy" and (output / "mlperf_log_accuracy.json").is_file():
        rouge, more = _score_accuracy(config, round_, output, evaluate)
        problems += more
    if result.mode == "test06" and (output / "mlperf_log_accuracy.json").is_file():
        problems += _verify_test06(output, result.scenario, verify, config.eos_token_id)
    if result.mode in ("test01", "test07", "test09") and (output / "mlperf_log_accuracy.json").is_file():
        problems += _verify_compliance(config, round_, result, output)
    if result.mode == "test04" and (output / "mlperf_log_summary.txt").is_file():  # a performance run: no outputs
        problems += _verify_compliance(config, round_, result, output)
    # a missed accuracy target or a failed compliance check fails the test, whatever LoadGen said of its run
    validity = FAILED if len(problems) > len(result.problems) else recorded_validity(result.validity, bool(problems))
    return RunSummary(scenario=result.scenario, mode=result.mode, folder=str(output), validity=validity,
                      tokens_per_second=result.tokens_per_second, ttft_p99_ms=result.ttft_p99_ms,
                      tpot_p99_ms=result.tpot_p99_ms, rouge=rouge, problems=problems, details=dict(result.details),
                      loadgen_validity=result.loadgen_validity, latency_p99_ms=result.latency_p99_ms,
                      samples_per_second=result.samples_per_second, latency=result.latency,
                      latency_unit=result.latency_unit)


def _score_accuracy(config: AppConfig, round_: Round, output: Path,
                    evaluate: Evaluator) -> tuple[dict[str, float], list[str]]:
    from cmx.mlperf.scoring.accuracy_txt import meets_targets, read_accuracy_txt

    # only a benchmark scored apart (VBench) has a scorer; an Evaluator that scores in process need not take one
    apart = {"scorer": config.scorer} if config.scorer else {}
    values = read_accuracy_txt(evaluate(output, config.dataset, config.tokenizer, benchmark=config.benchmark,
                                        rows=config.rows, **apart))
    targets = round_.benchmark(config.benchmark).accuracy
    rouge = {k: float(values[k]) for k in targets.metrics if isinstance(values.get(k), (int, float))}
    if config.tiny:  # random weights: the scores say nothing, so they cannot fail the run
        return rouge, []
    return rouge, [f"accuracy: {s}" for s in meets_targets(values, targets)]


def _verify_test06(output: Path, scenario: str, verify: Verifier, eos_token_id: int | None) -> list[str]:
    from cmx.mlperf.loadgen.test06 import verify_accuracy_txt_passes

    text = verify(output, scenario, eos_token_id).read_text(encoding="utf-8")
    return [] if verify_accuracy_txt_passes(text) else [f"TEST06 failed a check (see {output / 'verify_accuracy.txt'})"]


def _verify_compliance(config: AppConfig, round_: Round, result: HarnessResult, output: Path) -> list[str]:
    from cmx.mlperf.loadgen import test01, test04, test07, test09
    from cmx.mlperf.loadgen.compliance import compliance_test

    mode, metrics = result.mode, round_.benchmark(config.benchmark).accuracy.metrics
    if mode == "test01":  # against this scenario's accuracy and performance runs, as run_verification.py -r does
        test01.verify_run(output, config.run_dir(result.scenario, "accuracy"),
                          config.run_dir(result.scenario, "performance"), config.dataset, config.tokenizer,
                          benchmark=config.benchmark, rows=config.rows)
    elif mode == "test04":  # against this scenario's performance run, as run_verification.py -r does
        test04.verify_run(output, config.run_dir(result.scenario, "performance"))
    elif mode == "test07":
        test07.verify_run(output, config.dataset, config.tokenizer, benchmark=config.benchmark, rows=config.rows)
    else:
        test09.verify_run(output, benchmark=config.benchmark)
    # random weights: a score, a length or an output says nothing, so it cannot fail the run; TEST04 compares the
    # SUT's speed on one sample repeated with its speed on all, which a cache shows on any weights
    if config.tiny and mode != "test04":
        return []
    return [f"{mode.upper()}: {why}" for why in compliance_test(mode).failures(output, config.benchmark, metrics)]


def compliance_problems(config: AppConfig, round_: Round, scenario: str, conf: UserConf,
                        runs: Sequence[RunSummary]) -> list[str]:
    """Why this scenario's results could not be submitted to the closed division (empty: they could)."""
    from cmx.mlperf.loadgen.compliance import modes_of

    reasons: list[str] = []
    if config.short:
        reasons.append("short run: cmx's smoke-test profile, far below the round's minimum duration and query count")
    if config.tiny:
        reasons.append("tiny random model and generated dataset: the results measure nothing")
    if config.rows is not None:
        reasons.append(f"only the first {config.rows} dataset rows were used")
    if config.sampling_overrides:  # the reference's generation is part of the benchmark (mlperf-rules: llama2's greedy)
        reasons.append(f"sampling overridden ({', '.join(config.sampling_overrides)}): the closed division generates "
                       "as the reference does")
    if config.video is not None:  # the reference's size, frames and steps are part of the benchmark
        reasons.append("video shape overridden (" + ", ".join(f"{k} {v}" for k, v in asdict(config.video).items()
                                                              if v is not None) + "): the closed division generates "
                       "as the reference does")
    reasons += [f"user.conf: {n}" for n in conf.noncompliance]
    done = {r.mode for r in runs}
    needed = ("performance", "accuracy", *modes_of(round_.benchmark(config.benchmark).compliance_tests))
    reasons += [f"no {m} run" for m in needed if m not in done]
    reasons += [f"{r.mode}: {p}" for r in runs for p in r.problems]
    perf = config.run_dir(scenario, "performance")
    if "performance" in done and (perf / "mlperf_log_detail.txt").is_file():
        from cmx.mlperf.loadgen.log import read_loadgen_run

        found = read_loadgen_run(perf).problems(round_, config.benchmark, compliant=True, scenario=scenario)
        reasons += [f"performance: {p}" for p in found if f"performance: {p}" not in reasons]
    return reasons


def write_cmx_run(config: AppConfig, round_: Round, scenario: str, conf: UserConf,
                  runs: Sequence[RunSummary]) -> Path:
    reasons = compliance_problems(config, round_, scenario, conf, runs)
    facts = {
        "round": config.round, "benchmark": config.benchmark, "scenario": scenario, "system": config.system,
        "device": config.device, "short": config.short, "tiny": config.tiny, "rows": config.rows,
        # the set the tests read: the packager loads it to ask the benchmark for its accuracy_files
        "dataset": str(config.dataset),
        "max_tokens": config.max_tokens, "target_qps": config.target_qps.get(scenario),
        "video": asdict(config.video) if config.video else None,
        "scorer": config.scorer.to_json() if config.scorer else None,
        # how the target was measured when the user gave none (cmx.mlperf.tune.measure); None: it was given
        "find_performance": found.to_json() if (found := config.found.get(scenario)) else None,
        "sampling": config.sampling.to_json(),
        "reference_sampling": (config.reference_sampling or config.sampling).to_json(),
        "sampling_overrides": list(config.sampling_overrides),
        "compliant": not reasons, "noncompliance": reasons,
        "ok": all(r.ok for r in runs),
        "validity": {r.mode: r.validity for r in runs},
        "loadgen_validity": {r.mode: r.loadgen_validity for r in runs},
        "problems": {r.mode: r.problems for r in runs if r.problems},
        "runs": [asdict(r) for r in runs],
        "engine": asdict(config.engine),
        "backend": backend_record(config, runs),
        "origin": config.origin.to_json() if config.origin else None,
    }
    path = config.scenario_dir(scenario) / CMX_RUN_JSON
    path.write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    return path


def backend_record(config: AppConfig, runs: Sequence[RunSummary]) -> dict[str, Any]:
    """How the SUT reached the model, for cmx_run.json and the packager, as its engine records it: in-process vLLM,
    Ray replicas, or an endpoint over HTTP with the server's software and version as the server reported them (no
    key, no secret URL part)."""
    return config.chosen_engine.record(config, runs)


@contextmanager
def serving(config: AppConfig, log: logging.Logger, *, tokenizer: bool = False) -> Iterator[AppConfig]:
    """The config to run: as given, or pointed at what its engine starts for the run (for the endpoint backend
    without a URL, a `vllm serve` of the model or a disaggregated topology), always stopped when the block ends.
    `tokenizer`: the server tokenizes text prompts too (MLCommons' client sends text), where cmx sends token ids."""
    with config.chosen_engine.serve(config, log, tokenizer) as served:
        yield config if served is None else replace(config, endpoint=served.endpoint, server_log=served.server_log,
                                                    topology=served.topology or config.topology)


def transfer_notes(report: TopologyReport | None) -> tuple[str, ...]:
    """The summary's line for a disaggregated run: how many prompt tokens the decode side loaded from the prefill
    side, and why, when none, the KV was not moved (none for a run on one server)."""
    if report is None:
        return ()
    label, moved = report.info.topology.label, report.transfer
    if moved is None:
        return (f"DISAGGREGATED {label}: the instances' KV transfer counters could not be read (see the log)",)
    if moved.happened:
        return (f"DISAGGREGATED {label}: the decode side loaded {moved.decode_loaded_tokens} of "
                f"{moved.decode_prompt_tokens} prompt tokens from the prefill side",)
    why = ("the prefill instances computed no prompt: the proxy's prefill requests failed, and it went on (see "
           "the proxy's and the prefill instances' logs)"
           if moved.prefill_prompt_tokens == 0 else
           "ExampleConnector moves only whole 128-token blocks of a prompt less its last token")
    return (f"DISAGGREGATED {label}: NO KV MOVED: the decode side computed every prompt itself; {why}",)


def run_app(config: AppConfig, *, runner: Runner = run_tests, evaluate: Evaluator = evaluate_accuracy,
            verify: Verifier = verify_test06, logger: logging.Logger | None = None,
            on_progress: ProgressCallback | None = None) -> AppResult:
    """Every scenario's tests; raises AppRunFailed (after writing the tree and summary.txt) when any failed."""
    log = logger or logging.getLogger(__name__)
    round_ = load_round(config.round)
    round_.benchmark(config.benchmark)  # an unknown benchmark fails before anything runs
    engine = config.chosen_engine
    engine.refuse(config)  # a benchmark the engine cannot run
    for scenario in config.scenarios:  # so does a missing target_qps
        scenario_user_conf(config, round_, scenario)
    # and an earlier run's folder, unless it holds a failed attempt: that one is set aside (each checked first)
    attempts = [a for a in (earlier_attempt(config.scenario_dir(s)) for s in config.scenarios) if a is not None]
    engine.preflight(config)  # a Ray cluster too small or not there fails now, not in each test's harness
    for attempt in attempts:
        set_aside(attempt, log)
    runs: list[RunSummary] = []
    with serving(config, log) as served:
        for scenario in config.scenarios:
            runs += run_scenario(served, round_, scenario, runner=runner, evaluate=evaluate, verify=verify,
                                 logger=logger, on_progress=on_progress)
            if any(STOPPED_EARLY in r.details for r in runs):
                break
        topology = served.topology() if served.topology else None
    notes = (*found_notes(config), *sampling_notes(config), *refusal_notes(runs), *transfer_notes(topology))
    table = format_table(runs, short=config.short or config.tiny, notes=notes,
                         whole_answers=not round_.benchmark(config.benchmark).token_latencies)
    config.results_dir.mkdir(parents=True, exist_ok=True)
    (config.results_dir / SUMMARY_TXT).write_text(table + "\n", encoding="utf-8")
    result = AppResult(config.results_dir, runs, table)
    if not result.ok:
        raise failure(runs, config.results_dir)
    return result


def refusal_notes(runs: Sequence[RunSummary]) -> tuple[str, ...]:
    """A line per test whose server refused requests (a chat benchmark's: answered empty, as its reference answers
    them, and scored as unparsable replies)."""
    return tuple(f"{r.scenario} {r.mode}: the server refused {n} request(s), answered empty and scored as unparsable "
                 "(see harness.log)" for r in runs if (n := r.details.get("refused_requests")))


def found_notes(config: AppConfig) -> tuple[str, ...]:
    """The summary's line per target find-performance measured (none when every target was given)."""
    return tuple(f"FIND-PERFORMANCE {config.found[s].line()}" for s in config.scenarios if s in config.found)


def sampling_notes(config: AppConfig) -> tuple[str, ...]:
    """The summary's line for a run whose sampling is not the reference's (none when it is)."""
    if not config.sampling_overrides:
        return ()
    reference = config.reference_sampling or config.sampling
    return (f"SAMPLING OVERRIDDEN: {config.sampling.describe()} (the reference: {reference.describe()})",)


def refuse_old_results(folder: Path, log: logging.Logger | None = None) -> Path | None:
    """Make `folder` ready for a run: nothing to do when it is empty or absent; a failed or unfinished attempt is
    set aside (its new path returned); anything else is refused (`earlier_attempt`)."""
    attempt = earlier_attempt(folder)
    return set_aside(attempt, log or logging.getLogger(__name__)) if attempt is not None else None


def earlier_attempt(folder: Path) -> Path | None:
    """None when the scenario folder `folder` is free (absent or empty); `folder` when it holds a cmx attempt that
    failed (its cmx_run.json says ok false) or never finished (no cmx_run.json; only user.conf and test folders).
    AppConfigError when it holds a successful run, or files cmx did not write there: logs of an earlier run beside
    new ones would be read as this run's, and a good result is never moved."""
    if not folder.is_dir() or not any(folder.iterdir()):
        return None
    facts_path = folder / CMX_RUN_JSON
    if facts_path.is_file():
        try:
            ok = json.loads(facts_path.read_text(encoding="utf-8")).get("ok")
        except (OSError, ValueError, AttributeError):
            raise AppConfigError(f"{folder} already holds results, and its {CMX_RUN_JSON} cannot be read",
                                 hint=f"look at the folder: remove it if the run failed, or give another --input "
                                      f"results_dir=DIR; {NEVER_MIXED}") from None
        if ok is False:
            return folder
        what = "of a successful run" if ok is True else f"(its {CMX_RUN_JSON} does not say whether the run succeeded)"
        raise AppConfigError(f"{folder} already holds results {what}",
                             hint=f"keep them: give another --input results_dir=DIR (or run only the scenarios that "
                                  f"failed); {NEVER_MIXED}")
    strangers = sorted(p.name for p in folder.iterdir() if p.name not in ATTEMPT_ENTRIES)
    if not strangers:
        return folder
    raise AppConfigError(f"{folder} already holds results (or files cmx did not write: {', '.join(strangers[:5])})",
                         hint=f"remove it, or give another --input results_dir=DIR; {NEVER_MIXED}")


def set_aside(folder: Path, log: logging.Logger) -> Path:
    """Move a failed attempt's scenario folder to `<Scenario>.failed-<UTC time of the attempt>` beside it (kept, and
    skipped by the packager and the report) and return the new path."""
    facts_path = folder / CMX_RUN_JSON
    what = "a failed attempt" if facts_path.is_file() else "an attempt that never finished"
    when = max(p.stat().st_mtime for p in (folder, facts_path) if p.exists())
    base = f"{folder.name}{SET_ASIDE}{datetime.fromtimestamp(when, timezone.utc):%Y%m%dT%H%M%SZ}"
    target, n = folder.with_name(base), 2
    while target.exists():
        target, n = folder.with_name(f"{base}-{n}"), n + 1
    folder.rename(target)
    log.warning("%s held %s: moved it aside to %s (kept; this run starts afresh)", folder, what, target)
    return target


def is_set_aside(folder: Path) -> bool:
    """Whether `folder` is a failed attempt `set_aside` moved: no result, for the packager or the report."""
    return SET_ASIDE in folder.name


def failure(runs: Sequence[RunSummary], results_dir: Path) -> AppRunFailed:
    """The error of a run with failed tests: its first line is the first failed test's first problem (the cause:
    failed samples come before LoadGen's complaints about their empty answers), then each failed test and why."""
    bad = [r for r in runs if not r.ok]
    first = bad[0]
    lines = [f"{first.scenario} {first.mode} {_shown_validity(first)}: {first.problems[0]}",
             f"{len(bad)} of {len(runs)} test(s) failed:"]
    for r in bad:
        lines.append(f"  {r.scenario} {r.mode} ({_shown_validity(r)}):")
        lines += [f"    - {p}" for p in r.problems]
    return AppRunFailed("\n".join(lines), hint=f"the logs are in {results_dir}; each test's harness.log and "
                                                "mlperf_log_detail.txt say more")


def _shown_validity(r: RunSummary) -> str:
    return recorded_validity(r.validity, True) or FAILED
