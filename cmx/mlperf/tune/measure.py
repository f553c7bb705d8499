"""find-performance at run time: the targets an app run lacks, measured by the tune process before the real tests.

`find_targets(ctx, config)` returns the AppConfig with a target for every scenario, each one measured where the
user gave none (cmx.mlperf.tune.findperf says which and with what margins). It runs the tune process
(cmx.mlperf.tune.process) with no confirm run, on the engine the app would use: the same engine settings in
the tune's own process for vLLM in-process (stopped before the run's harness starts its own: two engines do
not fit one device's memory), the same server for an endpoint (the one given, or the vllm serve cmx started
for the run, which the caller keeps up across the probes and the run).

- Server-like scenarios, one tune process each: the Offline rate measured first on its engine
  (process.measured_start), then the tune's search from it. When Offline lacks a target too, that measurement
  is Offline's: one engine start for both.
- Offline alone: an Offline tune (at most two probes).

The probes' logs go into the app step's folder, `find-performance/<scenario>/`: beside the results tree, never in
it, so the packager never meets them. Each found target is in the returned config's `found` (cmx_run.json's
`find_performance`), and in the step's log and progress line as it is found.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.app_plan import AppConfigError
from cmx.mlperf.tune.findperf import (
    FOLDER,
    LATENCY_HEADROOM,
    OFFLINE_MARGIN,
    SERVER_MARGIN,
    TARGETLESS_SCENARIOS,
    FoundTarget,
    offline_target,
    server_measure,
    server_target,
)
from cmx.mlperf.tune.process import TuneConfig, TuneError, TuneOutcome, run_tune
from cmx.mlperf.tune.search import Probe
from cmx.mlperf.tune.target import TuneRequest, lengths, probe_line, scenario_target

if TYPE_CHECKING:
    from cmx.execute.context import StepContext
    from cmx.mlperf.app import AppConfig


class NoTargetFound(AppConfigError):
    """find-performance measured nothing a run can be sized from (no probe passed, none completed a sample)."""


def find_targets(ctx: StepContext, config: AppConfig, family: str) -> AppConfig:
    """`config` with a target for each of its scenarios: the given ones as they are, the others measured."""
    missing = [s for s in config.scenarios if s not in TARGETLESS_SCENARIOS and config.target_qps.get(s) is None]
    if not missing:
        return config
    targets = dict(config.target_qps)
    found: dict[str, FoundTarget] = {}
    server_like = [s for s in missing if s != "Offline"]
    ctx.log.info("find-performance: measuring the target of %s before the runs (logs in %s)", ", ".join(missing),
                 ctx.workdir / FOLDER)
    for scenario in server_like:
        start = targets["Offline"] if "Offline" in found else None  # this run's measurement, never a given guess
        outcome, seconds = _tune(ctx, config, family, scenario, start)
        if outcome.start_probes and "Offline" in missing and "Offline" not in found:
            found["Offline"] = _offline_found(outcome.start_probes, seconds, outcome.start_qps,
                                              "the Offline probes on the Server search's engine",
                                              ctx.workdir / FOLDER / scenario.lower() / "start-offline")
            targets["Offline"] = found["Offline"].qps
            _tell(ctx, found["Offline"])
        found[scenario] = _server_found(scenario, outcome, seconds, ctx.workdir / FOLDER / scenario.lower())
        targets[scenario] = found[scenario].qps
        _tell(ctx, found[scenario])
    if "Offline" in missing and "Offline" not in found:
        outcome, seconds = _tune(ctx, config, family, "Offline", None)
        found["Offline"] = _offline_found(outcome.probes, seconds, outcome.qps, "Offline probes",
                                          ctx.workdir / FOLDER / "offline")
        targets["Offline"] = found["Offline"].qps
        _tell(ctx, found["Offline"])
    return replace(config, target_qps=targets, found={**config.found, **found})


def _tune(ctx: StepContext, config: AppConfig, family: str, scenario: str,
          start: float | None) -> tuple[TuneOutcome, float]:
    """One tune process for `scenario` with no confirm run; its outcome and wall time."""
    from cmx.mlperf.app import harness_config
    from cmx.mlperf.loadgen.harness_config import API_KEY_ENV

    try:
        target = scenario_target(family, config.benchmark, config.round, scenario, start)
    except TuneError as err:
        raise AppConfigError(f"find-performance cannot measure a target for {scenario}: {err.message}",
                             hint=f"give --input target_qps_{scenario.lower()}=N") from None
    folder = ctx.workdir / FOLDER / scenario.lower()
    probe_len, full_len, short = lengths(config, target, TuneRequest(scenario))
    harness = replace(harness_config(config, scenario, "performance", folder / "user.conf"), output=folder)
    tconfig = TuneConfig(harness=harness, start_qps=start or 1.0, probe=probe_len, target=full_len, short=short,
                         confirm=False, measure_start=start is None and target.has_limits, headroom=LATENCY_HEADROOM)
    how = "Offline probes" if scenario == "Offline" else \
        ("the tune's search from the Offline rate it measures first" if start is None else
         f"the tune's search from this run's Offline rate, {start:g}/s")
    ctx.log.info("find-performance: %s: %s (probes of at least %g s and %d queries)", scenario, how,
                 probe_len.min_duration_ms / 1000.0, probe_len.min_queries)
    bar = ctx.progress(None, f"find-performance {scenario}")
    env = {API_KEY_ENV: config.api_key.reveal()} if config.api_key else None

    def heard(p: Probe) -> None:
        ctx.log.info("find-performance: %s probe %s", scenario, probe_line(p))
        bar.update(0, None, f"probe at {p.qps:g}/s: {'pass' if p.passed else 'FAIL'}")

    began = time.monotonic()
    try:
        outcome = run_tune(tconfig, on_probe=heard, on_progress=lambda p: bar.update(0, None, p.detail()),
                           timeout=config.timeout_s, env=env)
    except TuneError as err:
        raise NoTargetFound(f"find-performance for {scenario} failed: {err.message}",
                            hint=f"the probes' logs are in {folder} (tune.log); or give --input "
                                 f"target_qps_{scenario.lower()}=N") from None
    return outcome, time.monotonic() - began


def _server_found(scenario: str, outcome: TuneOutcome, seconds: float, folder: Path) -> FoundTarget:
    if outcome.qps is None:
        last = outcome.probes[-1] if outcome.probes else None
        raise NoTargetFound(f"find-performance found no {scenario} target: no probe passed"
                            + (f" (the last, at {last.qps:g}/s: {last.reason})" if last else ""),
                            hint=f"the probes' logs are in {folder}; give --input target_qps_{scenario.lower()}=N "
                                 "to run at a rate of your choosing")
    measured = server_measure(outcome.qps, (p.completed_qps for p in outcome.probes))
    return FoundTarget(scenario=scenario, qps=server_target(measured), measured_qps=measured, margin=SERVER_MARGIN,
                       method="the tune's search", probes=len(outcome.probes) + len(outcome.start_probes),
                       seconds=round(seconds, 1), search_qps=outcome.qps, folder=str(folder))


def _offline_found(probes: tuple[Probe, ...], seconds: float, measured: float | None, method: str,
                   folder: Path) -> FoundTarget:
    if not measured:
        raise NoTargetFound("find-performance found no Offline target: its probes completed no sample",
                            hint=f"the probes' logs are in {folder}; or give --input target_qps_offline=N")
    return FoundTarget(scenario="Offline", qps=offline_target(measured), measured_qps=measured, margin=OFFLINE_MARGIN,
                       method=method, probes=len(probes), seconds=round(seconds, 1), search_qps=None,
                       folder=str(folder))


def _tell(ctx: StepContext, found: FoundTarget) -> None:
    ctx.log.info("find-performance: %s", found.line())
    ctx.progress(None, f"find-performance {found.scenario}").update(0, None, f"target {found.qps:g}/s")
