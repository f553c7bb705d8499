"""The tune process: one engine for every probe, then the confirm run through FromConfig, the one call it makes.

    python -m cmx.mlperf.tune.process --config TUNE_DIR/tune_config.json

The engine start (vLLM: tens of seconds) is paid once; the probes (cmx.mlperf.tune.probe) run one
after the other on it, each where the search (cmx.mlperf.tune.search) says, and each is appended
to `probes.jsonl` as it ends, so the caller can print it at once. Then, at the answer's QPS, the
confirm run: the user.conf the app would write for that target (cmx.mlperf.loadgen.userconf),
read with `TestSettings.FromConfig` (no probe called it, so LoadGen sees one conf file) and judged
exactly as the harness judges a test (cmx.mlperf.loadgen.harness.judge). A short run at the edge is
noisy, and a machine can slow down after the probes: when the confirm fails, the target steps down
toward what the failed run completed (cmx.mlperf.tune.stepdown), and the same settings, with only the
target QPS changed (the file cannot be read again), run again on the same engine, until one passes,
the floor is reached or `confirm_tries` ran; each later run's user.conf is written beside its logs.
`tune.json` holds the probes, the answer, every confirm run's result and why the confirms stopped.

Offline has no latency to search: one probe measures samples/s at the start target, a second at
that rate when the first issued less than half of what the confirm run will, and the target is
the measured rate (LoadGen issues 10 % more samples than target x min_duration, which is the margin).

A Server-like search with no start (`measure_start`) first measures the engine's Offline rate the same way,
on the same engine, in `start-offline/`, and starts from it: the rate the engine completes is where a Server
queue starts to grow, so the search brackets its answer in few probes from there.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from cmx.errors import CmxError
from cmx.mlperf.loadgen.harness import build_backend, judge, loadgen_settings
from cmx.mlperf.loadgen.harness_config import HarnessConfig, HarnessResult
from cmx.mlperf.loadgen.userconf import ShortProfile, user_conf
from cmx.mlperf.tune.probe import Length, ProbeSpec, run_probe
from cmx.mlperf.tune.search import Limits, Policy, Probe, answer, next_qps
from cmx.mlperf.tune.stepdown import CONFIRM_TRIES, ConfirmTry, StepDown, floor_qps, step_down

CONFIG_JSON = "tune_config.json"
PROBES_JSONL = "probes.jsonl"
TUNE_JSON = "tune.json"
PROGRESS_JSON = "progress.json"
CONFIRM_DIR = "confirm"
START_DIR = "start-offline"


class TuneError(CmxError):
    """A tune cannot start (a scenario without limits, a query without a device, no start QPS) or found nothing."""


@dataclass(frozen=True)
class TuneConfig:
    """One tune: the test the answer is for (`harness`: model, dataset, scenario, engine...; its output is the
    tune's folder), where to start, how long probes and the confirm run are, and how far to search."""

    harness: HarnessConfig
    start_qps: float
    probe: Length
    target: Length
    short: ShortProfile | None     # the confirm run's user.conf profile (None: the round's full length)
    policy: Policy = Policy()
    confirm: bool = True
    confirm_tries: int = CONFIRM_TRIES
    measure_start: bool = False    # a Server-like search: start from the Offline rate measured first (start_qps unused)
    headroom: float = 1.0          # a probe passes with p99s within this fraction of the limits (probe.over_headroom)

    def to_json(self) -> str:
        data = asdict(self)
        data["harness"] = json.loads(self.harness.to_json())
        return json.dumps(data, indent=2, default=str) + "\n"

    @classmethod
    def from_json(cls, text: str) -> TuneConfig:
        data = json.loads(text)
        try:
            short = data.pop("short")
            return cls(harness=HarnessConfig.from_json(json.dumps(data.pop("harness"))),
                       probe=Length(**data.pop("probe")), target=Length(**data.pop("target")),
                       short=ShortProfile(**short) if short else None, policy=Policy(**data.pop("policy")), **data)
        except (TypeError, KeyError) as err:
            raise TuneError(f"not a tune config: {err}", hint="write it with TuneConfig.to_json") from None

    @property
    def folder(self) -> Path:
        return self.harness.output


@dataclass(frozen=True)
class TuneOutcome:
    """What the tune process found: every probe, the QPS the search settled on (None: nothing passed), and each
    confirm run with its QPS (the last one's QPS is the answer when it is ok)."""

    scenario: str
    probes: tuple[Probe, ...]
    qps: float | None
    confirms: tuple[tuple[float, HarnessResult], ...]
    engine_start_s: float
    seconds: float
    confirm_stop: str = ""                # why the confirms stopped (stepdown's code; "": none ran)
    confirm_why: str = ""                 # the same as a sentence
    confirm_floor_qps: float | None = None  # the lowest rate a confirm could step down to
    start_probes: tuple[Probe, ...] = ()  # with measure_start: the Offline probes that measured where to start
    start_qps: float | None = None        # the Offline rate they measured (the search's start)

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "probes": [asdict(p) for p in self.probes], "qps": self.qps,
                "start_probes": [asdict(p) for p in self.start_probes], "start_qps": self.start_qps,
                "confirms": [{"qps": q, "result": asdict(r)} for q, r in self.confirms],
                "engine_start_s": self.engine_start_s,
                "seconds": self.seconds, "confirm_stop": self.confirm_stop, "confirm_why": self.confirm_why,
                "confirm_floor_qps": self.confirm_floor_qps}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TuneOutcome:
        return cls(scenario=data["scenario"], probes=tuple(Probe(**p) for p in data["probes"]), qps=data["qps"],
                   confirms=tuple((c["qps"], HarnessResult(**c["result"])) for c in data["confirms"]),
                   engine_start_s=data["engine_start_s"],
                   seconds=data["seconds"], confirm_stop=data.get("confirm_stop", ""),
                   confirm_why=data.get("confirm_why", ""), confirm_floor_qps=data.get("confirm_floor_qps"),
                   start_probes=tuple(Probe(**p) for p in data.get("start_probes", ())),
                   start_qps=data.get("start_qps"))


def limits_of(config: TuneConfig, spec: ProbeSpec) -> Limits:
    latency = spec.rules.latency
    return Limits(ttft_ms=latency.ttft_p99_ms if latency else math.inf,
                  tpot_ms=latency.tpot_p99_ms if latency else math.inf,
                  min_duration_s=config.target.min_duration_ms / 1000.0, min_queries=config.target.min_queries)


def offline_next(probes: list[Probe], target: Length) -> float | None:
    """A second Offline probe at the measured rate when the first was much smaller than the confirm run."""
    last = probes[-1]
    if len(probes) > 1 or not last.completed_qps:
        return None
    confirm_samples = max(target.min_queries, 1.1 * target.min_duration_ms / 1000.0 * last.completed_qps)
    return offline_target(last) if last.queries < 0.5 * confirm_samples else None


def offline_target(probe: Probe) -> float | None:
    """Offline's target_qps: the measured samples/s, three significant figures."""
    if not probe.completed_qps:
        return None
    digits = 2 - math.floor(math.log10(probe.completed_qps))
    return round(probe.completed_qps, max(digits, 0))


def tune_in_process(config: TuneConfig, logger: logging.Logger) -> TuneOutcome:
    """Start the engine, probe, confirm; the tune process's job (it calls FromConfig once, for the confirm)."""
    from cmx.mlperf.benchmarks import benchmark_for
    from cmx.mlperf.loadgen.binding import import_loadgen
    from cmx.mlperf.rounds import load_round

    h = config.harness
    lg = import_loadgen(h.loadgen, h.round)  # the round's pin: get-loadgen's cached folder, or this Python's
    began = time.monotonic()
    round_ = load_round(h.round)
    bench = round_.benchmark(h.benchmark)
    spec = ProbeSpec(round=round_, bench=bench, rules=bench.scenario(h.scenario), length=config.probe,
                     target=config.target, max_tokens=h.max_tokens, headroom=config.headroom)
    dataset = benchmark_for(h.benchmark).load_dataset(h.dataset)
    if h.rows is not None:
        dataset = dataset.limit(h.rows)
    config.folder.mkdir(parents=True, exist_ok=True)
    log_path = config.folder / PROBES_JSONL
    log_path.unlink(missing_ok=True)
    backend = build_backend(h, logger)
    info = backend.start()
    engine_start = time.monotonic() - began
    confirms: list[tuple[float, HarnessResult]] = []
    end = StepDown(None)
    start_probes: list[Probe] = []
    try:
        if config.measure_start and spec.rules.loadgen_scenario != "Offline":
            start_probes = measured_start(lg, replace(spec, rules=bench.scenario("Offline")), backend, dataset,
                                          config, logger)
            config = replace(config, start_qps=_start_of(start_probes))
        probes = search(lg, spec, backend, dataset, config, logger, log_path)
        found = offline_target(probes[-1]) if spec.rules.loadgen_scenario == "Offline" else \
            (best.qps if (best := answer(probes)) else None)
        if found is not None and config.confirm:
            confirms, end = confirm_runs(lg, config, spec, backend, dataset, found, info, logger)
    finally:
        backend.stop()
    return TuneOutcome(scenario=h.scenario, probes=tuple(probes), qps=found, confirms=tuple(confirms),
                       engine_start_s=round(engine_start, 2), seconds=round(time.monotonic() - began, 2),
                       confirm_stop=end.stop, confirm_why=end.why,
                       confirm_floor_qps=floor_qps(found, config.policy.min_qps) if confirms and found else None,
                       start_probes=tuple(start_probes), start_qps=config.start_qps if start_probes else None)


def measured_start(lg: Any, offline: ProbeSpec, backend: Any, dataset: Any, config: TuneConfig,
                   logger: logging.Logger) -> list[Probe]:
    """The Offline probes (as an Offline tune runs them, from 1 sample/s) that measure where a Server-like search
    starts, on its engine, into `start-offline/` of the tune's folder."""
    at = replace(config, start_qps=1.0, harness=replace(config.harness, output=config.folder / START_DIR))
    probes = search(lg, offline, backend, dataset, at, logger)
    logger.info("start: the engine completed %s samples/s Offline", probes[-1].completed_qps)
    return probes


def _start_of(probes: list[Probe]) -> float:
    rate = offline_target(probes[-1])
    if rate is None:
        raise TuneError("the Offline probe that measures where the search starts completed no sample",
                        hint=f"its logs are in {START_DIR}/ of the tune's folder")
    return rate


def search(lg: Any, spec: ProbeSpec, backend: Any, dataset: Any, config: TuneConfig, logger: logging.Logger,
           log_path: Path | None = None) -> list[Probe]:
    """Probe from the start QPS wherever the search says next, until it says stop; each probe is appended to
    `log_path` (JSON lines) as it ends."""
    probes: list[Probe] = []
    qps: float | None = config.start_qps
    while qps is not None:
        out = config.folder / f"probe-{len(probes) + 1:02d}-qps-{qps:g}"
        probe = run_probe(lg, spec, backend, dataset, qps, out, logger, config.folder / PROGRESS_JSON)
        probes.append(probe)
        if log_path is not None:
            with log_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(asdict(probe)) + "\n")
        qps = offline_next(probes, config.target) if spec.rules.loadgen_scenario == "Offline" \
            else next_qps(probes, limits_of(config, spec), config.policy)
    return probes


def confirm_folder(tune_folder: Path, n: int) -> Path:
    """Where the `n`th confirm run (from 1) writes its logs: confirm/, then confirm-2/, ..."""
    return tune_folder / (CONFIRM_DIR if n == 1 else f"{CONFIRM_DIR}-{n}")


def confirm_config(config: TuneConfig, qps: float, folder: Path) -> HarnessConfig:
    """The harness config of a confirm run at `qps` into `folder`, with the user.conf the app would write."""
    from cmx.mlperf.rounds import load_round

    h = config.harness
    folder.mkdir(parents=True, exist_ok=True)
    conf = user_conf(load_round(h.round), h.benchmark, h.scenario, target_qps=qps, short=config.short)
    return replace(h, mode="performance", output=folder, user_conf=conf.write(folder / "user.conf"))


def confirm_runs(lg: Any, config: TuneConfig, spec: ProbeSpec, backend: Any, dataset: Any, qps: float, info: Any,
                 logger: logging.Logger) -> tuple[list[tuple[float, HarnessResult]], StepDown]:
    """The confirm runs on the probes' engine: the app's user.conf through FromConfig (once), then, while they
    fail, the same settings stepped down (cmx.mlperf.tune.stepdown); each judged as the harness judges a test."""
    hc = confirm_config(config, qps, confirm_folder(config.folder, 1))
    settings = loadgen_settings(lg, hc, spec.rules.loadgen_model, spec.rules.loadgen_scenario)

    def run_at(at: float, n: int) -> HarnessResult:
        if n > 1:  # LoadGen reads the file once: a later confirm changes only the target of the same settings
            if spec.rules.loadgen_scenario == "Offline":
                settings.offline_expected_qps = at
            else:
                settings.server_target_qps = at
        folder = confirm_config(config, at, confirm_folder(config.folder, n)) if n > 1 else hc
        return confirm_run(lg, folder, settings, spec, backend, dataset, info, logger)

    return stepped_confirms(qps, run_at, config, logger)


def stepped_confirms(found: float, run_at: Callable[[float, int], HarnessResult], config: TuneConfig,
                     logger: logging.Logger) -> tuple[list[tuple[float, HarnessResult]], StepDown]:
    """Confirm runs from `found` down, `run_at(qps, n)` running the `n`th (from 1), until one passes, the floor is
    reached or `config.confirm_tries` ran; the runs with their QPS, and why they stopped."""
    done: list[tuple[float, HarnessResult]] = []
    qps: float | None = found
    step = StepDown(None)
    while qps is not None:
        done.append((qps, run_at(qps, len(done) + 1)))
        tries = [ConfirmTry(q, r.ok, r.samples_per_second, r.failed_samples) for q, r in done]
        step = step_down(tries, found, config.policy.tolerance, config.confirm_tries, config.policy.min_qps)
        if step.qps is not None:
            completed = done[-1][1].samples_per_second
            logger.warning("confirm at %g/s failed (completed %s/s); stepping down to %g/s", qps,
                           "-" if completed is None else f"{completed:g}", step.qps)
        qps = step.qps
    return done, step


def confirm_run(lg: Any, hc: HarnessConfig, settings: Any, spec: ProbeSpec, backend: Any, dataset: Any, info: Any,
                logger: logging.Logger) -> HarnessResult:
    """One confirm run with `settings` into `hc.output`, judged as the harness judges a test."""
    from cmx.mlperf.loadgen.harness import log_settings, remove_empty_trace
    from cmx.mlperf.loadgen.progress import SAMPLES_CSV, ProgressWriter, SampleClock, run_shape
    from cmx.mlperf.loadgen.run_record import RESULT_JSON
    from cmx.mlperf.loadgen.sut import QSL, make_sut

    clock = SampleClock()
    writer = ProgressWriter(hc.output.parent / PROGRESS_JSON, clock,  # the tune folder, where the caller looks
                            run_shape(settings, hc.scenario, hc.mode, len(dataset))).start()
    qsl = QSL(dataset, spec.bench.performance_sample_count, logger)
    sut = make_sut(hc.scenario, lg, backend, qsl, hc.max_tokens, logger, clock,
                   first_tokens=bool(settings.use_token_latencies))
    began = time.monotonic()
    try:
        sut.start()
        qsl.construct(lg)
        sut.construct()
        logger.info("confirm: %s at %g queries/s", hc.scenario,
                    settings.offline_expected_qps if hc.scenario == "Offline" else settings.server_target_qps)
        lg.StartTestWithLogSettings(sut.handle, qsl.handle, settings, log_settings(lg, hc.output),
                                    str(hc.output / "no-audit.config"))
        sut.wait_idle(600.0)
    finally:
        seconds = time.monotonic() - began
        writer.stop()
        clock.write_samples(hc.output / SAMPLES_CSV)
        remove_empty_trace(hc.output)
        sut.stop()
        sut.destroy()
        qsl.destroy(lg)
    details = {"backend": hc.backend, "engines": len(info.engines), "max_tokens": hc.max_tokens,
               "same_engine_as_probes": True}
    result = judge(hc, sut.errors, sut.completed, 0.0, seconds, details)
    result.write(hc.output / RESULT_JSON)
    return result


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logger = logging.getLogger("cmx.mlperf.tune")
    p = argparse.ArgumentParser(prog="python -m cmx.mlperf.tune.process", description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, required=True, help="a TuneConfig as JSON (run_tune writes it)")
    a = p.parse_args(argv)
    try:
        config = TuneConfig.from_json(a.config.read_text(encoding="utf-8"))
        outcome = tune_in_process(config, logger)
    except (CmxError, OSError) as err:
        print(f"tune: {err}", file=sys.stderr)
        return 2
    (config.folder / TUNE_JSON).write_text(json.dumps(outcome.to_json(), indent=2) + "\n", encoding="utf-8")
    return 0


# --- in the caller's process --------------------------------------------------------------------

def run_tune(config: TuneConfig, *, on_probe: Callable[[Probe], None] = lambda p: None,
             on_progress: Callable[[Any], None] = lambda p: None, timeout: float | None = None,
             env: dict[str, str] | None = None) -> TuneOutcome:
    """Run the tune process and return its outcome; `on_probe` hears each probe as it ends, `on_progress` the
    running test's progress (cmx.mlperf.loadgen.progress.RunProgress) about once a second."""
    from cmx.mlperf.loadgen.progress import read_progress
    from cmx.tools.procs import spawn, stop

    folder = config.folder
    folder.mkdir(parents=True, exist_ok=True)
    for name in (TUNE_JSON, PROBES_JSONL, PROGRESS_JSON):
        (folder / name).unlink(missing_ok=True)
    (folder / CONFIG_JSON).write_text(config.to_json(), encoding="utf-8")
    log_path = folder / "tune.log"
    cmd = [sys.executable, "-m", "cmx.mlperf.tune.process", "--config", str(folder / CONFIG_JSON)]
    seen, stamp = 0, None
    deadline = None if timeout is None else time.monotonic() + timeout
    with log_path.open("w", encoding="utf-8") as out:
        # a process group of its own, registered with the run (cmx.tools.procs): Ctrl-C stops it and its engine
        proc = spawn(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        try:
            while True:
                try:
                    proc.wait(timeout=1.0)
                    done = True
                except subprocess.TimeoutExpired:
                    done = False
                    if deadline is not None and time.monotonic() > deadline:
                        raise TuneError(f"the tune ran over {timeout} s", where=str(log_path)) from None
                seen = _new_probes(folder / PROBES_JSONL, seen, on_probe)
                now = _mtime(folder / PROGRESS_JSON)
                if now is not None and now != stamp and not done:
                    stamp = now
                    progress = read_progress(folder / PROGRESS_JSON)
                    if progress is not None:
                        on_progress(progress)
                if done:
                    break
        except BaseException:  # a timeout, a failing callback: never leave the engine running
            stop(proc)
            raise
        stop(proc)  # it has exited; what it started may not have
    result = folder / TUNE_JSON
    if not result.is_file():
        tail = log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise TuneError(f"the tune process exited {proc.returncode} without a result:\n{tail}", where=str(log_path))
    return TuneOutcome.from_json(json.loads(result.read_text(encoding="utf-8")))


def _new_probes(path: Path, seen: int, on_probe: Callable[[Probe], None]) -> int:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return seen
    for line in lines[seen:]:
        if not line.endswith("}"):
            break  # still being written
        on_probe(Probe(**json.loads(line)))
        seen += 1
    return seen


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


if __name__ == "__main__":
    sys.exit(main())
