"""Run one scenario's LoadGen tests (performance, accuracy, compliance tests) in this process on one backend, and
judge each test's logs.

LoadGen's `TestSettings.FromConfig` may read a user.conf once per process (a second call writes
"Multiple conf files are used" into the next run's log, which fails the accuracy check). The tests
of one scenario share their user.conf, so one process reads it once and runs them in turn on one
backend, started and warmed up once (an engine load, minutes for a large model on GPUs, is paid once
per scenario, not once per test):

    python -m cmx.mlperf.loadgen.harness --config OUT/performance/run_1/harness_config.json \
                                         --config OUT/accuracy/harness_config.json

Each config file is a `HarnessConfig` as JSON (written by `run_tests`); all share the scenario,
user.conf, model and backend. The benchmark (cmx.mlperf.benchmarks) loads the dataset and scores the
accuracy log; the backend is vLLM in this process, or an OpenAI-compatible endpoint
(`HarnessConfig.endpoint`), whose API key comes from the environment variable CMX_ENDPOINT_API_KEY,
never from a file or the command line.

Callers use `run_tests(...)` (or `run_test` for one), which starts that process and returns each test's
`HarnessResult`; they never call FromConfig themselves. The process builds and warms up the backend
before LoadGen's first timed window, runs each test with tracing off, writes its `result.json` into
its output folder as soon as it ends, prints one verdict line per test, and exits non-zero when any
test has problems (INVALID, errors in the detail log, failed samples). A compliance test (TEST01, TEST04, TEST06,
TEST07, TEST09) writes its audit.config into its output folder for its run only and removes it
afterwards; LoadGen applies it to that test's copy of the settings. `evaluate_accuracy` and
`verify_test06` turn an accuracy or TEST06 run's log into accuracy.txt and verify_accuracy.txt
(test01, test04, test07 and test09.verify_run do it for theirs).

When the backend dies during a Server or Interactive test, the SUT stops it (cmx.mlperf.loadgen.sut):
the harness stops waiting for LoadGen, sets LoadGen's unfinished logs aside (`mlperf_log_*.unfinished.*`:
no reader may take them for a finished run), writes a failed result whose first problem names what
died, runs none of the scenario's later tests, and ends the process at once.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from cmx.errors import CmxError
from cmx.mlperf.backends.base import VIDEO_FOLDER
from cmx.mlperf.loadgen.harness_config import (
    PERFORMANCE_RULES,
    URL_ENV,
    HarnessConfig,
    HarnessError,
    HarnessResult,
    endpoint_environment,
    verdict_of,
)
from cmx.mlperf.loadgen.run_record import ACCURACY_LOG, ACCURACY_TXT, FAILED, RESULT_JSON
from cmx.mlperf.scoring.external import ExternalScorer
from cmx.secrets import Redactor, redacting_formatter

if TYPE_CHECKING:
    from cmx.mlperf.backends.base import Backend
    from cmx.mlperf.loadgen.progress import RunProgress
    from cmx.mlperf.loadgen.sut import OfflineSUT, ServerSUT
    from cmx.mlperf.rounds import ScenarioRules

HARNESS_LOG = "harness.log"
LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
INTERVAL_S = 1.0  # how often the caller looks at a running harness
CONFIG_JSON = "harness_config.json"
VERIFY_TXT = "verify_accuracy.txt"
IDLE_TIMEOUT_S = 600.0  # LoadGen returned; samples still in flight after this are a bug
STOPPED_EARLY = "stopped_early"  # the result's details key when the test was stopped (the backend died)
LOADGEN_LOGS = ("mlperf_log_detail.txt", "mlperf_log_summary.txt", ACCURACY_LOG, "mlperf_log_trace.json")

# --- in the harness process ---------------------------------------------------------------------

def build_backend(config: HarnessConfig, logger: logging.Logger, environ: Mapping[str, str] | None = None) -> Backend:
    """The backend of the engine the config asks for (cmx.mlperf.engines), not started; an endpoint's API key comes
    from the environment (`environ`, default this process's: `cmx pareto` builds one in its own process, with
    endpoint_environment's values)."""
    from cmx.mlperf.engines import engine_for_harness

    return engine_for_harness(config).build(config, logger, os.environ if environ is None else environ)


def loadgen_settings(lg: Any, config: HarnessConfig, loadgen_model: str, loadgen_scenario: str) -> Any:
    """LoadGen's TestSettings from the user.conf: FromConfig, once per process (`run_in_process` sets each test's
    mode on the one object; LoadGen applies a compliance test's audit.config to a copy of it)."""
    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, loadgen_scenario)
    rc = settings.FromConfig(str(config.user_conf), loadgen_model, loadgen_scenario)
    if rc not in (None, 0):
        raise HarnessError(f"LoadGen could not read {config.user_conf} (FromConfig returned {rc})")
    return settings


def test_mode(lg: Any, mode: str) -> Any:
    """LoadGen's mode for a cmx test: a compliance test is a performance run its audit.config reshapes."""
    return lg.TestMode.AccuracyOnly if mode == "accuracy" else lg.TestMode.PerformanceOnly


def check_one_scenario(configs: Sequence[HarnessConfig]) -> None:
    """The tests of one process share what the process reads once: the scenario, user.conf, model and backend."""
    if not configs:
        raise HarnessError("the harness was given no test to run")
    first = configs[0]
    shared = ("scenario", "user_conf", "model", "round", "benchmark", "device", "engine", "endpoint", "sampling",
              "max_tokens", "loadgen")
    for other in configs[1:]:
        differ = [name for name in shared if getattr(other, name) != getattr(first, name)]
        if differ:
            raise HarnessError(f"the tests of one harness process must share {', '.join(differ)}: "
                               f"{first.mode} and {other.mode} do not",
                               hint="run tests of another scenario or backend in a harness process of their own")
    outputs = [c.output for c in configs]
    if len(set(outputs)) != len(outputs):
        raise HarnessError("two tests of one harness process write to the same folder",
                           hint="give each test its own output folder")


def log_settings(lg: Any, output: Path) -> Any:
    log = lg.LogSettings()
    log.log_output.outdir = str(output)
    log.log_output.copy_summary_to_stdout = False
    log.enable_trace = False  # its default (True) writes a large trace file
    return log


def remove_empty_trace(output: Path) -> None:
    """LoadGen creates mlperf_log_trace.json even with tracing off; an empty one is noise in a result folder."""
    trace = output / "mlperf_log_trace.json"
    if trace.is_file() and trace.stat().st_size == 0:
        trace.unlink()


def set_aside_unfinished_logs(output: Path) -> list[str]:
    """Rename the logs of a LoadGen test that was stopped before it ended (mlperf_log_detail.txt becomes
    mlperf_log_detail.unfinished.txt): kept for a look, but no reader takes them for a finished run's.
    Returns the new names."""
    kept = []
    for path in (output / name for name in LOADGEN_LOGS):
        if path.is_file():
            kept.append(path.rename(path.with_name(f"{path.stem}.unfinished{path.suffix}")).name)
    return kept


def audit_config_path(config: HarnessConfig) -> Path:
    """Where this run's audit.config goes: LoadGen applies it only if the file exists."""
    from cmx.mlperf.loadgen.test06 import AUDIT_CONFIG_NAME

    return config.output / AUDIT_CONFIG_NAME


@contextlib.contextmanager
def audit_query_count(settings: Any, config: HarnessConfig, rules: ScenarioRules,
                      logger: logging.Logger) -> Iterator[None]:
    """A TEST04 run's min_query_count from its audit.config's line for this model and scenario, which LoadGen (reading
    the file with the model "*") skips and the reference's SUT applies (cmx.mlperf.loadgen.test04); the shared
    settings get their own count back afterwards, for the scenario's later tests."""
    from cmx.mlperf.loadgen.test04 import audit_min_query_count, run_min_query_count

    audit = audit_config_path(config)
    count = (audit_min_query_count(audit.read_text(encoding="utf-8"), rules.loadgen_model, rules.loadgen_scenario)
             if config.mode == "test04" and audit.is_file() else None)
    if count is None:
        yield
        return
    own = int(settings.min_query_count)
    settings.min_query_count = run_min_query_count(count, own,
                                                   full_duration=settings.min_duration_ms >= rules.min_duration_ms)
    logger.info("TEST04: min_query_count %d (the audit.config's %d for %s %s; user.conf's %d)",
                settings.min_query_count, count, rules.loadgen_model, rules.loadgen_scenario, own)
    try:
        yield
    finally:
        settings.min_query_count = own


def harness_redactor(environ: Mapping[str, str]) -> Redactor:
    """What the harness process keeps out of every file it writes and line it prints: the secrets it was given in
    its environment (the API key, the endpoint URL's credentials, a Hugging Face token), in whatever a server
    echoes back too."""
    return Redactor.of([environ.get(URL_ENV, "")], environment=environ)


def run_in_process(configs: Sequence[HarnessConfig], logger: logging.Logger) -> list[HarnessResult]:
    """Run the tests in this process, in order, on one backend (the harness process's job; call it once per
    process). Each test's result.json is written as soon as the test ends, so a caller reading them sees each
    test finish; a test with problems does not stop the ones after it."""
    from cmx.mlperf.loadgen.binding import import_loadgen
    from cmx.mlperf.rounds import load_round

    check_one_scenario(configs)
    first = configs[0]
    rules = load_round(first.round).benchmark(first.benchmark).scenario(first.scenario)
    for config in configs:
        config.output.mkdir(parents=True, exist_ok=True)
        audit = audit_config_path(config)
        if audit.exists():
            raise HarnessError(f"a stray {audit} would silently change this run",
                               hint="it belongs to a compliance run that did not finish; remove it")
    lg = import_loadgen(first.loadgen, first.round)  # the round's pin: get-loadgen's cached folder, or this Python's

    # the first test's progress covers the engine's start-up: its clock and file are the first test's
    clock, progress = start_progress(first)
    began = time.monotonic()
    try:
        backend = build_backend(first, logger)
        info = backend.start()
    except BaseException:
        progress.stop()
        raise
    start_seconds = time.monotonic() - began
    results: list[HarnessResult] = []
    try:
        settings = loadgen_settings(lg, first, rules.loadgen_model, rules.loadgen_scenario)
        for i, config in enumerate(configs):
            if i:
                clock, progress = start_progress(config)
            with own_log(config, first, logger) if i else contextlib.nullcontext():
                result = run_one(lg, config, settings, backend, clock, progress, logger,
                                 start_seconds=start_seconds if i == 0 else 0.0,
                                 details={"engine_reused": i > 0, **info.details,
                                          "warmup_requests": info.warmup_requests if i == 0 else 0,
                                          "engines": len(info.engines)})
                result.write(config.output / RESULT_JSON, harness_redactor(os.environ))
                logger.info("%s", result.verdict())
            results.append(result)
            if STOPPED_EARLY in result.details:  # the backend died: every later test would fail as it starts
                break
    finally:
        backend.stop()
    return results


def start_progress(config: HarnessConfig) -> tuple[Any, Any]:
    """A test's sample clock, and the writer of its progress.json, writing from now on."""
    from cmx.mlperf.loadgen.progress import PROGRESS_JSON, ProgressWriter, RunShape, SampleClock

    clock = SampleClock()
    return clock, ProgressWriter(config.output / PROGRESS_JSON, clock, RunShape(config.scenario, config.mode)).start()


@contextlib.contextmanager
def own_log(config: HarnessConfig, first: HarnessConfig, logger: logging.Logger) -> Iterator[None]:
    """A later test's harness lines also go to a harness.log in its own folder (the engine's output stays in the
    first test's, the process's log), beginning with where that is."""
    handler = logging.FileHandler(config.output / HARNESS_LOG, mode="w", encoding="utf-8")
    handler.setFormatter(redacting_formatter(LOG_FORMAT, harness_redactor(os.environ)))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        logger.info("the %s %s test runs in the harness process of the %s test, on the engine it started; the "
                    "process's whole log, the engine's included, is %s", config.scenario, config.mode, first.mode,
                    first.output / HARNESS_LOG)
        yield
    finally:
        root.removeHandler(handler)
        handler.close()


def run_one(lg: Any, config: HarnessConfig, settings: Any, backend: Backend, clock: Any, progress: Any,
            logger: logging.Logger, *, start_seconds: float, details: dict[str, Any]) -> HarnessResult:
    """One LoadGen test on the started backend: its dataset, QSL and SUT, its audit.config (a compliance test),
    LoadGen's run, and the judgement of its logs. `progress` is already writing; it is stopped here."""
    from cmx.mlperf.benchmarks import benchmark_for, dataset_for_test
    from cmx.mlperf.loadgen.compliance import write_audit_config
    from cmx.mlperf.loadgen.progress import SAMPLES_CSV, run_shape
    from cmx.mlperf.loadgen.sut import QSL, LoadgenTest, make_sut
    from cmx.mlperf.rounds import load_round

    bench = load_round(config.round).benchmark(config.benchmark)
    plugin = benchmark_for(config.benchmark)
    audit = audit_config_path(config)
    began = time.monotonic()
    try:
        dataset = dataset_for_test(plugin, config.dataset, config.mode)
        if config.rows is not None:
            dataset = dataset.limit(config.rows)
        settings.mode = test_mode(lg, config.mode)
        progress.shape = run_shape(settings, config.scenario, config.mode, len(dataset))
        before = dict(backend.details())
        qsl = QSL(plugin.prompt_source(dataset, config.model), bench.performance_sample_count, logger)
        sut = make_sut(config.scenario, lg, backend, qsl, config.max_tokens, logger, clock,
                       plugin.response_encoder(config.model), first_tokens=bool(settings.use_token_latencies),
                       videos=config.output / VIDEO_FOLDER)
        test = LoadgenTest(lambda: lg.StartTestWithLogSettings(sut.handle, qsl.handle, settings,
                                                               log_settings(lg, config.output), str(audit)))
        began = time.monotonic()
        try:
            sut.start()
            qsl.construct(lg)
            sut.construct()
            if config.mode.startswith("test"):
                write_audit_config(config.mode, config.output, config.benchmark,
                                   {(r.loadgen_model, r.loadgen_scenario): r.test04_min_query_count
                                    for r in bench.scenarios if r.test04_min_query_count is not None})
            logger.info("LoadGen %s %s test starts", config.scenario, config.mode)
            with audit_query_count(settings, config, bench.scenario(config.scenario), logger):
                ended = test.run(sut)  # False: the SUT stopped the test (the backend died) and LoadGen runs on
            if ended and not sut.wait_idle(IDLE_TIMEOUT_S):
                logger.error("samples still outstanding %.0f s after LoadGen returned", IDLE_TIMEOUT_S)
        finally:
            audit.unlink(missing_ok=True)
            remove_empty_trace(config.output)
            sut.stop()
            if not test.running:  # a stopped test is still inside LoadGen, which holds both
                sut.destroy()
                qsl.destroy(lg)
    finally:
        test_seconds = time.monotonic() - began
        progress.stop()
        clock.write_samples(config.output / SAMPLES_CSV)
    during = this_test(before, dict(backend.details()))
    details = {"backend": config.backend, **details, "rows": len(dataset), "max_tokens": config.max_tokens,
               "sampling": config.sampling.to_json(), **during}
    if not ended:
        logger.error("%s; the test stopped %.1f s in, before LoadGen's schedule ended", sut.dead_line(), test_seconds)
        return stopped_early(config, sut, start_seconds, test_seconds, details)
    result = judge(config, sut.errors, sut.completed, start_seconds, test_seconds, details)
    dead = sut.dead_line()  # the backend died, and LoadGen returned anyway (Offline, or its schedule had ended)
    if dead is None:
        return result
    return dataclasses.replace(result, problems=[dead, *result.problems], validity=FAILED)


def stopped_early(config: HarnessConfig, sut: OfflineSUT | ServerSUT, start_seconds: float, test_seconds: float,
                  details: dict[str, Any]) -> HarnessResult:
    """The result of a test the SUT stopped because the backend died: LoadGen gave no verdict, its logs
    are set aside as unfinished, and the first problem is what died."""
    kept = set_aside_unfinished_logs(config.output)
    dead = sut.dead_line() or "the test was stopped before LoadGen ended it"
    then = (f"the test stopped there, {test_seconds:.1f} s in, so LoadGen wrote no summary"
            + (f"; its unfinished logs are kept as {', '.join(kept)}" if kept else ""))
    return HarnessResult(
        scenario=config.scenario, mode=config.mode, validity=FAILED, loadgen_validity=None, problems=[dead, then],
        samples_per_second=None, tokens_per_second=None, ttft_p99_ms=None, tpot_p99_ms=None,
        completed_samples=sut.completed, failed_samples=len(sut.errors), start_seconds=round(start_seconds, 3),
        test_seconds=round(test_seconds, 3),
        details={**details, STOPPED_EARLY: {"reason": dead, "unfinished_logs": kept}})


def this_test(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The backend's details for one test: what it reports after the test, its per-replica sample and token
    counts, and the chats refused, less those of earlier tests on the same backend (the counts run from the backend's
    start)."""
    if isinstance(refused := after.get("refused_requests"), int):
        after = {**after, "refused_requests": refused - int(before.get("refused_requests") or 0)}
    replicas, earlier = after.get("replicas"), before.get("replicas")
    if not isinstance(replicas, list) or not isinstance(earlier, list):
        return after
    counted = {r.get("index"): r for r in earlier if isinstance(r, dict)}
    own = []
    for r in replicas:
        prior = counted.get(r.get("index"), {}) if isinstance(r, dict) else {}
        own.append({**r, **{k: r[k] - prior.get(k, 0) for k in ("samples", "tokens")
                            if isinstance(r.get(k), int) and isinstance(prior.get(k, 0), int)}}
                   if isinstance(r, dict) else r)
    return {**after, "replicas": own}


def judge(config: HarnessConfig, errors: list[Any], completed: int, start_seconds: float, test_seconds: float,
          details: dict[str, Any]) -> HarnessResult:
    """The run's result from LoadGen's logs in `config.output` and the SUT's own error record. Failed samples come
    first among the problems: they are the cause, and LoadGen's complaints about the empty answers follow from it."""
    from cmx.mlperf.loadgen.log import read_loadgen_run
    from cmx.mlperf.rounds import load_round

    run = read_loadgen_run(config.output)
    round_ = load_round(config.round)
    rules = round_.benchmark(config.benchmark).scenario(config.scenario)
    findings = run.findings(round_, config.benchmark, compliant=False, scenario=config.scenario,
                            compliance_test=config.mode.upper() if config.mode.startswith("test") else None)
    problems = [failed_samples_problem(errors, completed)] if errors else []
    problems += [f.text for f in findings]
    broken = bool(errors) or any(f.rule not in PERFORMANCE_RULES for f in findings)
    r = run.results
    return HarnessResult(
        scenario=config.scenario, mode=config.mode, validity=verdict_of(r.validity, bool(problems), broken),
        loadgen_validity=r.validity, problems=problems,
        samples_per_second=r.samples_per_second, tokens_per_second=r.tokens_per_second,
        ttft_p99_ms=r.ttft.p99_ms if r.ttft else None, tpot_p99_ms=r.tpot.p99_ms if r.tpot else None,
        latency_p99_ms=r.latency.p99_ms if rules.loadgen_scenario == "Server" and r.ttft is None else None,
        latency=rules.in_latency_unit(r.early_stopping_latency_ns)
        if rules.latency_result and r.early_stopping_latency_ns is not None else None,
        latency_unit=(rules.latency_unit or "ms") if rules.latency_result else None,
        completed_samples=completed, failed_samples=len(errors), start_seconds=round(start_seconds, 3),
        test_seconds=round(test_seconds, 3), details=details)


def failed_samples_problem(errors: list[Any], completed: int) -> str:
    """One line: why the first sample failed (the root cause; its hint is in harness.log), then how many did."""
    lines = (line.strip() for line in str(errors[0].message).splitlines())
    first = "; ".join(line for line in lines if line and not line.startswith("hint:"))
    return f"{first} ({len(errors)} of {max(completed, len(errors))} samples failed in the backend and were " \
           "answered empty)"


def parse_args(argv: list[str] | None = None) -> list[HarnessConfig]:
    p = argparse.ArgumentParser(prog="python -m cmx.mlperf.loadgen.harness", description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, action="append", required=True,
                   help="a HarnessConfig as JSON (run_tests writes them); repeated, one per test, run in order")
    a = p.parse_args(argv)
    configs = []
    for path in a.config:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            raise HarnessError(f"cannot read the harness config: {err}", where=str(path)) from None
        configs.append(HarnessConfig.from_json(text))
    return configs


def main(argv: list[str] | None = None) -> int:
    redactor = harness_redactor(os.environ)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format=LOG_FORMAT)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(redacting_formatter(LOG_FORMAT, redactor))
    logger = logging.getLogger("cmx.mlperf.loadgen.harness")
    try:
        results = run_in_process(parse_args(argv), logger)
    except CmxError as err:
        print(f"harness: {redactor.redact(err.render())}", file=sys.stderr)
        return 2
    code = 0 if all(r.ok for r in results) else 1
    if any(STOPPED_EARLY in r.details for r in results):
        end_now(code)
    return code


def end_now(code: int) -> None:
    """Exit at once, with the output flushed: a stopped LoadGen test's thread still sleeps through its schedule,
    and an ordinary exit would run LoadGen's C++ teardown under it."""
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


# --- in the caller's process --------------------------------------------------------------------

ProgressCallback = Callable[["RunProgress"], None]


def run_test(config: HarnessConfig, *, timeout: float | None = None, logger: logging.Logger | None = None,
             env: dict[str, str] | None = None, on_progress: ProgressCallback | None = None) -> HarnessResult:
    """Run one test in a harness process of its own (`run_tests` with one config)."""
    return run_tests([config], timeout=timeout, logger=logger, env=env, on_progress=on_progress)[0]


def run_tests(configs: Sequence[HarnessConfig], *, timeout: float | None = None, logger: logging.Logger | None = None,
              env: dict[str, str] | None = None, on_progress: ProgressCallback | None = None) -> list[HarnessResult]:
    """Run one scenario's tests, in order, in one harness process and return each one's result (problems
    included; a HarnessError when the process wrote no result for one). A test stopped because the backend died
    is the last: the list ends with it. The process's output goes to the first
    test's harness.log; `on_progress` hears each test's progress about once a second while it runs; `timeout`
    is per test. The process leads a process group of its own, registered with the run that calls this
    (cmx.tools.procs), which stops it and all it started on Ctrl-C."""
    from cmx.mlperf.loadgen.progress import PROGRESS_JSON, follow, waiting_for
    from cmx.tools.procs import spawn, stop

    check_one_scenario(configs)
    log = logger or logging.getLogger(__name__)
    env = {**(env or {}), **endpoint_environment(configs[0].endpoint)}
    # the process's output (its engine's, a traceback's) is written to harness.log through what it was given
    redactor = harness_redactor({**os.environ, **env})
    args: list[str] = []
    for config in configs:
        config.output.mkdir(parents=True, exist_ok=True)
        (config.output / RESULT_JSON).unlink(missing_ok=True)
        (config.output / PROGRESS_JSON).unlink(missing_ok=True)
        args += config.argv(config.output / CONFIG_JSON)
    log_path = configs[0].output / HARNESS_LOG
    cmd = [sys.executable, "-m", "cmx.mlperf.loadgen.harness", *args]
    log.info("harness: %s", redactor.redact(" ".join(cmd)))
    limit = None if timeout is None else timeout * len(configs)
    with log_path.open("w", encoding="utf-8") as out:
        # in a process group of its own, registered with the run (cmx.tools.procs): on Ctrl-C the run stops it and
        # everything it started (vLLM's engine processes, a local Ray instance) from the main thread
        proc = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, **env}, text=True,
                     errors="replace", bufsize=1)
        copier = copy_redacted(proc, out, redactor)
        try:
            wait = waiting_for(proc, limit)
            for config in configs:  # each test's progress in turn; the next starts once this one's result is written
                follow(until_written(wait, config.output / RESULT_JSON), config.output / PROGRESS_JSON,
                       on_progress or (lambda p: None))
            wait_exit(proc, wait)
            stop(proc)  # it has exited; what it started may not have (and the run need not stop it again)
        except subprocess.TimeoutExpired:
            stop(proc)
            raise HarnessError(f"the harness ran over {limit} s ({timeout} s for each of its {len(configs)} tests)",
                               where=str(log_path)) from None
        except BaseException:  # a failing callback: never leave the harness running
            stop(proc)
            raise
        finally:
            copier.join(COPY_JOIN_S)  # the family is stopped: the pipe's last lines are in, or never come
    results: list[HarnessResult] = []
    for config in configs:
        path = config.output / RESULT_JSON
        if results and STOPPED_EARLY in results[-1].details:  # the backend died: the later tests never ran
            break
        if not path.is_file():
            tail = log_path.read_text(encoding="utf-8", errors="replace")[-4000:]
            raise HarnessError(f"the harness exited {proc.returncode} without a result for the {config.scenario} "
                               f"{config.mode} test:\n{tail}", where=str(log_path))
        results.append(HarnessResult.read(path))
    return results


COPY_JOIN_S = 10.0  # how long the harness's last output may take to reach harness.log once its family is stopped


def copy_redacted(proc: subprocess.Popen[str], out: TextIO, redactor: Redactor) -> threading.Thread:
    """A thread that writes the process's output, line by line, redacted, into `out` (harness.log) until the pipe
    closes: no secret the process holds reaches the file, whatever prints it (a server's echoed error, a
    traceback, the engine's own logging)."""
    def copy() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(redactor.redact(line))
            out.flush()

    thread = threading.Thread(target=copy, name="harness-log", daemon=True)
    thread.start()
    return thread


def until_written(wait: Callable[[float], bool], result: Path) -> Callable[[float], bool]:
    """`follow`'s wait for one test of a harness process: done once its result is written or the process exited."""
    return lambda seconds: wait(seconds) or result.is_file()


def wait_exit(proc: subprocess.Popen[Any], wait: Callable[[float], bool]) -> None:
    """Wait for the harness process to exit (its last result is written; the backend is stopping)."""
    while not wait(INTERVAL_S):
        pass


def evaluate_accuracy(output_dir: Path, dataset: Path, tokenizer_dir: Path, *, benchmark: str = "",
                      rows: int | None = None, jobs: int = 1, scorer: ExternalScorer | None = None) -> Path:
    """Score an accuracy run's log as the benchmark's reference does (outputs decoded with the
    tokenizer, special tokens skipped) and write accuracy.txt beside it. No `benchmark`: the harness round's
    default_benchmark. `scorer`: the environment of a scorer that runs apart (VBench), for the benchmark that
    needs one."""
    from cmx.mlperf.benchmarks import benchmark_for
    from cmx.mlperf.loadgen.harness_config import HARNESS_ROUND
    from cmx.mlperf.rounds import load_round
    from cmx.tools.fs import sha256_file

    bench = benchmark_for(benchmark or load_round(HARNESS_ROUND).default_benchmark)
    log_path = Path(output_dir) / ACCURACY_LOG
    data = bench.load_dataset(dataset)
    if rows is not None:
        data = data.limit(rows)
    values = bench.score(log_path, data, tokenizer_dir, jobs=jobs, scorer=scorer)
    path = Path(output_dir) / ACCURACY_TXT
    path.write_text(bench.format_accuracy_txt(values, sha256_file(log_path)), encoding="utf-8")
    return path


def verify_test06(output_dir: Path, scenario: str, eos_token_id: int | None = None) -> Path:
    """Check a TEST06 run's accuracy log and write verify_accuracy.txt beside it. `eos_token_id` is the
    model's (run_verification.py's --eos_token_id); None is its default, Llama 2's 2."""
    from cmx.mlperf.loadgen.test06 import EOS_TOKEN_ID, format_verify_accuracy_txt, verify

    result = verify(Path(output_dir) / ACCURACY_LOG, scenario, EOS_TOKEN_ID if eos_token_id is None else eos_token_id)
    path = Path(output_dir) / VERIFY_TXT
    path.write_text(format_verify_accuracy_txt(result), encoding="utf-8")
    return path


if __name__ == "__main__":
    sys.exit(main())
