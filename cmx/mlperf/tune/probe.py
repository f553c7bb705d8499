"""One tuning probe: a short LoadGen performance test at a given QPS on an engine that is already up, judged by LoadGen.

A probe is not a submission run, so its TestSettings are set in code from the round's data (the
scenario's latency limits, the benchmark's token-latency and equal-issue settings, the round's
seeds) and never read with `TestSettings.FromConfig`: that may run once per process, and the
probe process keeps it for its confirm run (cmx.mlperf.tune.process). Each probe builds its own
QSL and SUT over the shared backend, writes LoadGen's logs and the SUT's per-sample times into
its own folder, and comes back as a `search.Probe`: passed when LoadGen says VALID (which, for a
Server-like scenario, includes early stopping and the TTFT and TPOT p99s inside the limits), no
sample failed, and the TTFT p99 extrapolated to the confirm run's length stays inside its limit.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cmx.mlperf.loadgen.harness import log_settings, remove_empty_trace
from cmx.mlperf.loadgen.log import read_loadgen_run
from cmx.mlperf.loadgen.progress import SAMPLES_CSV, ProgressWriter, RunShape, SampleClock
from cmx.mlperf.loadgen.sut import QSL, make_sut
from cmx.mlperf.rounds import Benchmark, LatencyLimits, Round, ScenarioRules
from cmx.mlperf.tune.search import Probe

IDLE_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Length:
    """How long a LoadGen performance test runs: at least `min_duration_ms` and `min_queries` queries
    (Offline: samples), over `samples` distinct samples (LoadGen's performance_sample_count)."""

    min_duration_ms: int
    min_queries: int
    samples: int

    def seconds(self, qps: float) -> float:
        """The test's length at `qps`: its minimum duration, or its minimum count at that rate."""
        return max(self.min_duration_ms / 1000.0, self.min_queries / qps if qps > 0 else math.inf)


@dataclass(frozen=True)
class ProbeSpec:
    """What every probe of one tune shares."""

    round: Round
    bench: Benchmark
    rules: ScenarioRules
    length: Length        # each probe's
    target: Length        # the confirm run's: the TTFT trend is extrapolated to it
    max_tokens: int
    headroom: float = 1.0  # a probe passes with p99s within this fraction of the limits (find-performance: less)


def probe_settings(lg: Any, spec: ProbeSpec, qps: float, samples: int) -> Any:
    """LoadGen's TestSettings for a probe at `qps` over `samples` samples, set in code (no FromConfig)."""
    s = lg.TestSettings()
    rules, length = spec.rules, spec.length
    s.scenario = getattr(lg.TestScenario, rules.loadgen_scenario)
    s.mode = lg.TestMode.PerformanceOnly
    s.min_duration_ms = length.min_duration_ms
    s.min_query_count = length.min_queries
    s.performance_sample_count_override = samples
    s.sample_concatenate_permutation = spec.bench.equal_issue
    s.use_token_latencies = spec.bench.token_latencies
    seeds = spec.round.seeds  # the round's schedule, as the real run will have it
    s.qsl_rng_seed, s.sample_index_rng_seed = seeds.qsl_rng_seed, seeds.sample_index_rng_seed
    s.schedule_rng_seed = seeds.schedule_rng_seed
    if rules.loadgen_scenario == "Offline":
        s.offline_expected_qps = qps
        return s
    assert rules.latency is not None  # a Server-like scenario has limits (rounds checks it)
    s.server_target_qps = qps
    s.server_target_latency_percentile = 0.99
    s.ttft_latency = rules.latency.ttft_p99_ns
    s.tpot_latency = rules.latency.tpot_p99_ns
    return s


def run_probe(lg: Any, spec: ProbeSpec, backend: Any, dataset: Any, qps: float, out: Path,
              logger: logging.Logger, progress: Path | None = None) -> Probe:
    """One probe at `qps` with its logs in `out`; `progress` (a file) gets the live progress as the harness's does."""
    out.mkdir(parents=True, exist_ok=True)
    clock = SampleClock()
    limits = spec.rules.latency
    shape = RunShape(spec.rules.name, "performance", min_duration_s=spec.length.min_duration_ms / 1000.0,
                     expected=None if spec.rules.loadgen_scenario == "Offline" else
                     max(spec.length.min_queries, math.ceil(qps * spec.length.min_duration_ms / 1000.0)),
                     ttft_limit_ms=limits.ttft_p99_ms if limits else None,
                     tpot_limit_ms=limits.tpot_p99_ms if limits else None)
    writer = ProgressWriter(progress, clock, shape).start() if progress is not None else None
    samples = min(spec.length.samples, len(dataset))
    qsl = QSL(dataset, samples, logger)
    sut = make_sut(spec.rules.name, lg, backend, qsl, spec.max_tokens, logger, clock,
                   first_tokens=spec.bench.token_latencies)
    began = time.monotonic()
    try:
        sut.start()
        qsl.construct(lg)
        sut.construct()
        logger.info("probe: %s at %g queries/s", spec.rules.name, qps)
        lg.StartTestWithLogSettings(sut.handle, qsl.handle, probe_settings(lg, spec, qps, samples),
                                    log_settings(lg, out), str(out / "no-audit.config"))
        if not sut.wait_idle(IDLE_TIMEOUT_S):
            logger.error("samples still outstanding %.0f s after LoadGen returned", IDLE_TIMEOUT_S)
    finally:
        seconds = time.monotonic() - began
        if writer is not None:
            writer.stop()
        clock.write_samples(out / SAMPLES_CSV)
        remove_empty_trace(out)
        sut.stop()
        sut.destroy()
        qsl.destroy(lg)
    return judge_probe(spec, qps, out, clock.rows, len(sut.errors), sut.completed, seconds)


def judge_probe(spec: ProbeSpec, qps: float, out: Path, rows: list[tuple[float, float, float, int]], failed: int,
                completed: int, seconds: float) -> Probe:
    """The probe as LoadGen's logs in `out` and the SUT's sample times tell it."""
    run = read_loadgen_run(out)
    r = run.results
    problems = run.problems(spec.round, spec.bench, compliant=False, scenario=spec.rules.name)
    if failed:
        problems.append(f"{failed} samples failed in the backend")
    ttft = r.ttft.p99_ms if r.ttft else None
    projected = projected_ttft(ttft, rows, spec.length.seconds(qps), spec.target.seconds(qps))
    limits = spec.rules.latency
    if projected is not None and limits is not None and ttft is not None and projected > limits.ttft_p99_ms \
            and not problems:
        problems.append(f"TTFT grows through the probe: its p99 would reach {projected:.0f} ms over the confirm "
                        f"run's {spec.target.seconds(qps):.0f} s (limit {limits.ttft_p99_ms:g} ms)")
    tpot = r.tpot.p99_ms if r.tpot else None
    over = over_headroom(projected, tpot, limits, spec.headroom) if limits is not None and not problems else None
    if over:
        problems.append(over)
    return Probe(qps=qps, passed=r.validity == "VALID" and not problems, validity=r.validity,
                 early_stopping_met=r.early_stopping_met, ttft_p99_ms=_r(ttft),
                 tpot_p99_ms=_r(tpot), ttft_projected_ms=_r(projected),
                 completed_qps=_r(r.samples_per_second, 3), queries=completed, seconds=round(seconds, 2),
                 reason=problems[0] if problems else "")


def over_headroom(ttft_ms: float | None, tpot_ms: float | None, limits: LatencyLimits, headroom: float) -> str | None:
    """Why a probe inside the limits still fails a search that keeps `headroom` of them (None: it does not). A run
    judged later on a busier machine, or on a colder engine, sees its latencies grow: find-performance keeps the
    p99s of the rate it picks well inside the limits, so that growth does not make the real run INVALID."""
    if headroom >= 1.0:
        return None
    for name, value, limit in (("TTFT", ttft_ms, limits.ttft_p99_ms), ("TPOT", tpot_ms, limits.tpot_p99_ms)):
        if value is not None and value > headroom * limit:
            return (f"{name} p99 {value:.0f} ms is over {headroom:.0%} of its {limit:g} ms limit (the headroom "
                    "find-performance keeps)")
    return None


def projected_ttft(p99_ms: float | None, rows: list[tuple[float, float, float, int]], probe_s: float,
                   target_s: float) -> float | None:
    """The TTFT p99 a run of `target_s` would see if TTFT kept growing as it did through the probe (a least-squares
    slope of TTFT over issue time; a falling or flat trend projects nothing). Equal lengths: the p99 itself."""
    if p99_ms is None or target_s <= probe_s * 1.2:
        return p99_ms
    data = np.asarray([(i, f - i) for i, f, _c, _n in rows if not math.isnan(f)], dtype=np.float64)
    if len(data) < 20 or np.ptp(data[:, 0]) <= 0:
        return p99_ms
    slope = float(np.polyfit(data[:, 0], data[:, 1], 1)[0])  # seconds of TTFT per second of run
    return p99_ms + max(slope, 0.0) * (target_s - probe_s) * 1000.0


def _r(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)
