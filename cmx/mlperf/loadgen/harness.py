"""Run ONE LoadGen test in this process (performance, accuracy or a compliance test) on a backend, and judge its logs.

LoadGen's `TestSettings.FromConfig` may be called once per process (a second call writes
"Multiple conf files are used" into the next run's log, which fails the accuracy check), so each
test is its own process:

    python -m cmx.mlperf.loadgen.harness --config OUT/harness_config.json

The config file is a `HarnessConfig` as JSON (written by `run_test`); the benchmark
(cmx.mlperf.benchmarks) loads the dataset and scores the accuracy log; the backend is vLLM in
this process, or an OpenAI-compatible endpoint (`HarnessConfig.endpoint`), whose API key comes
from the environment variable CMX_ENDPOINT_API_KEY, never from the file or the command line.

Callers use `run_test(...)`, which starts that process and returns its `HarnessResult`; they never
call FromConfig themselves. The process builds and warms up the backend before LoadGen's timed
window, runs the test with tracing off, writes `result.json` into the output folder, prints one
verdict line, and exits non-zero when the run has problems (INVALID, errors in the detail log,
failed samples). A compliance test (TEST06, TEST07, TEST09) writes its audit.config into the output
folder for its run only and removes it afterwards. `evaluate_accuracy` and `verify_test06` turn
an accuracy or TEST06 run's log into accuracy.txt and verify_accuracy.txt (test07.verify_run and
test09.verify_run do it for theirs).
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.errors import CmxError
from cmx.mlperf.loadgen.harness_config import API_KEY_ENV, HarnessConfig, HarnessError, HarnessResult

if TYPE_CHECKING:
    from cmx.mlperf.backends.base import Backend
    from cmx.mlperf.loadgen.progress import RunProgress

RESULT_JSON = "result.json"
CONFIG_JSON = "harness_config.json"
ACCURACY_LOG = "mlperf_log_accuracy.json"
ACCURACY_TXT = "accuracy.txt"
VERIFY_TXT = "verify_accuracy.txt"
IDLE_TIMEOUT_S = 600.0  # LoadGen returned; samples still in flight after this are a bug

# --- in the harness process ---------------------------------------------------------------------

def build_backend(config: HarnessConfig, logger: logging.Logger) -> Backend:
    """The backend the config names: vLLM in this process as the device profile describes it (streaming for
    Server and Interactive), or the endpoint, with its API key from the environment."""
    if config.endpoint is not None:
        from cmx.mlperf.backends.endpoint import EndpointBackend, EndpointConfig
        from cmx.secrets import Secret

        key = os.environ.get(API_KEY_ENV)
        e = config.endpoint
        return EndpointBackend(EndpointConfig(url=e.url, model=e.model, api_key=Secret(key) if key else None,
                                              request_timeout_s=e.request_timeout_s,
                                              max_concurrency=e.max_concurrency, tokenizer=config.model,
                                              sampling=config.sampling),
                               logger)
    from cmx.mlperf.backends.vllm import VllmBackend, VllmBackendConfig

    engine = config.engine
    backend_config = VllmBackendConfig(model=config.model, options=engine.options(config.device),
                                       streaming=config.scenario != "Offline", max_model_len=engine.max_model_len,
                                       output_tokens_estimate=min(config.max_tokens, 300), sampling=config.sampling)
    if engine.on_ray:
        from cmx.mlperf.backends.ray_replicas import RayReplicaBackend

        return RayReplicaBackend(engine.replicas_config(backend_config), logger)
    return VllmBackend(backend_config, logger)


def loadgen_settings(lg: Any, config: HarnessConfig, loadgen_model: str, loadgen_scenario: str) -> Any:
    """LoadGen's TestSettings from the user.conf: FromConfig, once (this process runs one test)."""
    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, loadgen_scenario)
    rc = settings.FromConfig(str(config.user_conf), loadgen_model, loadgen_scenario)
    if rc not in (None, 0):
        raise HarnessError(f"LoadGen could not read {config.user_conf} (FromConfig returned {rc})")
    # TEST06 is a performance run; its audit.config overrides the rest
    settings.mode = lg.TestMode.AccuracyOnly if config.mode == "accuracy" else lg.TestMode.PerformanceOnly
    return settings


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


def audit_config_path(config: HarnessConfig) -> Path:
    """Where this run's audit.config goes: LoadGen applies it only if the file exists."""
    from cmx.mlperf.loadgen.test06 import AUDIT_CONFIG_NAME

    return config.output / AUDIT_CONFIG_NAME


def run_in_process(config: HarnessConfig, logger: logging.Logger) -> HarnessResult:
    """Run the test in this process (the harness process's job; call it once per process)."""
    import mlperf_loadgen as lg

    from cmx.mlperf.benchmarks import benchmark_for, dataset_for_test
    from cmx.mlperf.loadgen.compliance import write_audit_config
    from cmx.mlperf.loadgen.progress import (
        PROGRESS_JSON,
        SAMPLES_CSV,
        ProgressWriter,
        RunShape,
        SampleClock,
        run_shape,
    )
    from cmx.mlperf.loadgen.sut import QSL, make_sut
    from cmx.mlperf.rounds import load_round

    round_ = load_round(config.round)
    bench = round_.benchmark(config.benchmark)
    rules = bench.scenario(config.scenario)
    config.output.mkdir(parents=True, exist_ok=True)
    audit = audit_config_path(config)
    if audit.exists():
        raise HarnessError(f"a stray {audit} would silently change this run",
                           hint="it belongs to a TEST06 run that did not finish; remove it")
    dataset = dataset_for_test(benchmark_for(config.benchmark), config.dataset, config.mode)
    if config.rows is not None:
        dataset = dataset.limit(config.rows)

    clock = SampleClock()
    progress = ProgressWriter(config.output / PROGRESS_JSON, clock, RunShape(config.scenario, config.mode)).start()
    began = time.monotonic()
    backend = build_backend(config, logger)
    info = backend.start()
    start_seconds = time.monotonic() - began
    try:
        settings = loadgen_settings(lg, config, rules.loadgen_model, rules.loadgen_scenario)
        progress.shape = run_shape(settings, config.scenario, config.mode, len(dataset))
        qsl = QSL(dataset, bench.performance_sample_count, logger)
        sut = make_sut(config.scenario, lg, backend, qsl, config.max_tokens, logger, clock)
        began = time.monotonic()
        try:
            sut.start()
            qsl.construct(lg)
            sut.construct()
            if config.mode.startswith("test"):
                write_audit_config(config.mode, config.output, config.benchmark)
            logger.info("LoadGen %s %s test starts", config.scenario, config.mode)
            lg.StartTestWithLogSettings(sut.handle, qsl.handle, settings, log_settings(lg, config.output), str(audit))
            if not sut.wait_idle(IDLE_TIMEOUT_S):
                logger.error("samples still outstanding %.0f s after LoadGen returned", IDLE_TIMEOUT_S)
        finally:
            test_seconds = time.monotonic() - began
            progress.stop()
            clock.write_samples(config.output / SAMPLES_CSV)
            audit.unlink(missing_ok=True)
            remove_empty_trace(config.output)
            sut.stop()
            sut.destroy()
            qsl.destroy(lg)
        during = dict(backend.details())
    finally:
        backend.stop()
    details = {"backend": config.backend, "engines": len(info.engines), "warmup_requests": info.warmup_requests,
               "rows": len(dataset), "max_tokens": config.max_tokens, "sampling": config.sampling.to_json(),
               **info.details, **during}
    return judge(config, sut.errors, sut.completed, start_seconds, test_seconds, details)


def judge(config: HarnessConfig, errors: list[Any], completed: int, start_seconds: float, test_seconds: float,
          details: dict[str, Any]) -> HarnessResult:
    """The run's result from LoadGen's logs in `config.output` and the SUT's own error record."""
    from cmx.mlperf.loadgen.log import read_loadgen_run
    from cmx.mlperf.rounds import load_round

    run = read_loadgen_run(config.output)
    problems = run.problems(load_round(config.round), config.benchmark, compliant=False, scenario=config.scenario,
                            compliance_test=config.mode.upper() if config.mode.startswith("test") else None)
    if errors:
        problems.append(f"{len(errors)} samples failed in the backend (completed empty); the first: "
                        f"{errors[0].message}")
    r = run.results
    return HarnessResult(
        scenario=config.scenario, mode=config.mode, validity=r.validity, problems=problems,
        samples_per_second=r.samples_per_second, tokens_per_second=r.tokens_per_second,
        ttft_p99_ms=r.ttft.p99_ms if r.ttft else None, tpot_p99_ms=r.tpot.p99_ms if r.tpot else None,
        completed_samples=completed, failed_samples=len(errors), start_seconds=round(start_seconds, 3),
        test_seconds=round(test_seconds, 3), details=details)


def parse_args(argv: list[str] | None = None) -> HarnessConfig:
    p = argparse.ArgumentParser(prog="python -m cmx.mlperf.loadgen.harness", description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, required=True, help="a HarnessConfig as JSON (run_test writes it)")
    a = p.parse_args(argv)
    try:
        text = a.config.read_text(encoding="utf-8")
    except OSError as err:
        raise HarnessError(f"cannot read the harness config: {err}", where=str(a.config)) from None
    return HarnessConfig.from_json(text)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logger = logging.getLogger("cmx.mlperf.loadgen.harness")
    try:
        config = parse_args(argv)
        result = run_in_process(config, logger)
    except CmxError as err:
        print(f"harness: {err.render()}", file=sys.stderr)
        return 2
    result.write(config.output / RESULT_JSON)
    print(result.verdict())
    return 0 if result.ok else 1


# --- in the caller's process --------------------------------------------------------------------

ProgressCallback = Callable[["RunProgress"], None]

def run_test(config: HarnessConfig, *, timeout: float | None = None, logger: logging.Logger | None = None,
             env: dict[str, str] | None = None, on_progress: ProgressCallback | None = None) -> HarnessResult:
    """Run one test in its own harness process and return its result (problems included; a
    HarnessError only when the process wrote no result). Its output goes to harness.log;
    `on_progress` hears the test's progress about once a second while it runs. The process leads a session
    of its own, registered with the run that calls this (cmx.tools.procs), which stops it and all it started
    on Ctrl-C."""
    from cmx.mlperf.loadgen.progress import PROGRESS_JSON, follow, waiting_for
    from cmx.tools.procs import spawn, stop

    log = logger or logging.getLogger(__name__)
    config.output.mkdir(parents=True, exist_ok=True)
    result_path = config.output / RESULT_JSON
    result_path.unlink(missing_ok=True)
    log_path = config.output / "harness.log"
    cmd = [sys.executable, "-m", "cmx.mlperf.loadgen.harness", *config.argv(config.output / CONFIG_JSON)]
    log.info("harness: %s", " ".join(cmd))
    (config.output / PROGRESS_JSON).unlink(missing_ok=True)
    with log_path.open("w", encoding="utf-8") as out:
        # in a session of its own, registered with the run (cmx.tools.procs): on Ctrl-C the run stops it and
        # everything it started (vLLM's engine processes, a local Ray instance) from the main thread
        proc = spawn(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        try:
            follow(waiting_for(proc, timeout), config.output / PROGRESS_JSON, on_progress or (lambda p: None))
        except subprocess.TimeoutExpired:
            stop(proc)
            raise HarnessError(f"the harness ran over {timeout} s", where=str(log_path)) from None
        except BaseException:  # a failing callback: never leave the harness running
            stop(proc)
            raise
        stop(proc)  # it has exited; what it started may not have (and the run need not stop it again)
    if not result_path.is_file():
        tail = log_path.read_text(encoding="utf-8", errors="replace")[-4000:]
        raise HarnessError(f"the harness exited {proc.returncode} without a result:\n{tail}", where=str(log_path))
    return HarnessResult.read(result_path)


def evaluate_accuracy(output_dir: Path, dataset: Path, tokenizer_dir: Path, *, benchmark: str = "llama2-70b-99",
                      rows: int | None = None, jobs: int = 1) -> Path:
    """Score an accuracy run's log as the benchmark's reference does (outputs decoded with the
    tokenizer, special tokens skipped) and write accuracy.txt beside it."""
    from cmx.mlperf.benchmarks import benchmark_for
    from cmx.mlperf.loadgen.accuracy_log import sha256_file
    from cmx.mlperf.scoring.accuracy_txt import format_accuracy_txt

    bench = benchmark_for(benchmark)
    log_path = Path(output_dir) / ACCURACY_LOG
    data = bench.load_dataset(dataset)
    if rows is not None:
        data = data.limit(rows)
    values = bench.score(log_path, data, tokenizer_dir, jobs=jobs)
    path = Path(output_dir) / ACCURACY_TXT
    path.write_text(format_accuracy_txt(values, sha256_file(log_path)), encoding="utf-8")
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
