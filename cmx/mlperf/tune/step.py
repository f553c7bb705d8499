"""`cmx tune`'s step: what to tune, checked on the plan before anything runs; the run in place of the app's root step.

`tune_target` reads the plan's root step (an MLPerf app recipe: its benchmark family is one of its
tags) and refuses, before any dep is built, a query that names no device (a tune measures one
machine's engine: the recipe's default device would be a guess; both checks are cmx.mlperf.app_verb's) and a
scenario the benchmark has no rules for in the round (`scenario_target`, which find-performance shares). A
Server-like search with no QPS to start from starts from the engine's Offline rate, measured first on the same
engine.

`tune_step(ctx, target, request)` runs on the app step's own ctx (the same inputs, context and deps'
outputs `cmx run` would give it, through the Runner's `root_run`): the app's AppConfig, then the
tune process (cmx.mlperf.tune.process: probes and confirm runs on one engine). A confirmed target is
written into the inputs file; the probes and the last confirm run into the app's results_dir
(cmx.mlperf.tune.record), where `cmx report` finds them.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.mlperf.app_verb import app_benchmark, require_device
from cmx.mlperf.loadgen.harness_config import HarnessResult
from cmx.mlperf.tune.process import TuneConfig, TuneError, TuneOutcome, confirm_folder, run_tune
from cmx.mlperf.tune.record import write_tune_results
from cmx.mlperf.tune.search import Policy, Probe
from cmx.mlperf.tune.target import TuneRequest, TuneTarget, lengths, probe_line, scenario_target

if TYPE_CHECKING:  # types only: `cmx tune` imports this module before it needs the app
    from cmx.execute.context import StepContext
    from cmx.resolve.plan import Step


def tune_target(step: Step, query_variations: tuple[str, ...], context: dict[str, Any],
                request: TuneRequest) -> TuneTarget:
    """Check the plan's root `step` (a resolve.plan.Step) can be tuned as asked; raise TuneError saying why not."""
    from cmx.execute.plan_check import PlannedStep
    from cmx.mlperf.app_targets import named_target, targeted_benchmark

    bench = app_benchmark(step, TuneError, "is not an MLPerf benchmark app cmx can tune",
                          hint="tune an app recipe: `cmx find app mlperf inference` lists them")
    require_device(step, query_variations, context, TuneError,
                   "a tune measures one machine's engine, and the recipe's default device would be a guess")
    # a family with two targets: the one the round keeps (llama2-70b-99.9 in v6.1), as the app step picks it
    name = targeted_benchmark(bench.family, str(step.inputs["round"]), named_target(PlannedStep.of(step))) \
        or bench.names[0]
    scenario = request.scenario.strip().capitalize()
    given = request.start_qps if request.start_qps is not None else step.inputs.get(f"target_qps_{scenario.lower()}")
    return scenario_target(bench.family, name, str(step.inputs["round"]), scenario, given)


def tune_step(ctx: StepContext, target: TuneTarget, request: TuneRequest) -> dict[str, Any]:
    """The tune, on the app step's ctx; its outputs (probes, confirms, the answer, the inputs file)."""
    from cmx.mlperf.app import harness_config, refuse_old_results, serving
    from cmx.mlperf.app_step import app_config
    from cmx.mlperf.loadgen.harness_config import API_KEY_ENV

    config = app_config(ctx, target.family)
    refuse_old_results(config.scenario_dir(target.scenario))  # the tune's results folder, before the engine starts
    folder = ctx.workdir / f"tune-{target.scenario.lower()}"
    probe_len, full_len, short = lengths(config, target, request)
    env = {API_KEY_ENV: config.api_key.reveal()} if config.api_key else None
    bar = ctx.progress(None, f"tune {target.scenario}")
    with serving(config, ctx.log) as served:
        harness = replace(harness_config(served, target.scenario, "performance", folder / "confirm" / "user.conf"),
                          output=folder)
        tconfig = TuneConfig(harness=harness, start_qps=target.start_qps or 1.0, probe=probe_len, target=full_len,
                             short=short, confirm=request.confirm, confirm_tries=request.confirm_tries,
                             policy=Policy(tolerance=request.tolerance, max_probes=request.max_probes),
                             measure_start=target.start_qps is None and target.has_limits)

        def heard(p: Probe) -> None:
            ctx.log.info("probe %s", probe_line(p))
            bar.update(0, None, f"probe at {p.qps:g}/s: {'pass' if p.passed else 'FAIL'}")

        outcome = run_tune(tconfig, on_probe=heard, on_progress=lambda p: bar.update(0, None, p.detail()),
                           timeout=config.timeout_s, env=env)
    confirms = list(outcome.confirms)
    qps = confirms[-1][0] if confirms else outcome.qps
    confirmed = bool(confirms) and confirms[-1][1].ok
    chosen = qps if (confirmed or not request.confirm) else None
    tuned = None
    if chosen is not None:
        tuned = write_tuned(request.out or folder / "tuned.yaml", target, chosen, [c for _, c in confirms], ctx)
    record = tune_record(target, outcome, chosen, short=config.short, tuned=tuned, folder=folder,
                         command=shlex.join(ctx.run_argv) or "cmx tune")
    results = write_tune_results(served, target.scenario, record, confirms[-1][1] if confirms else None,
                                 confirm_folder(folder, len(confirms)) if confirms else None)
    return {**record, "results_dir": str(results)}


def tune_record(target: TuneTarget, outcome: TuneOutcome, chosen: float | None, *, short: bool, tuned: Path | None,
                folder: Path, command: str) -> dict[str, Any]:
    """The tune's outputs, as its run record and cmx_tune.json keep them (`chosen`: the QPS written, None: none)."""
    confirms = outcome.confirms
    rates = [q for q, _ in confirms]
    return {"scenario": target.scenario, "benchmark": target.benchmark, "round": target.round,
            "input": target.input_name, "qps": chosen, "found_qps": outcome.qps,
            "confirmed": bool(confirms) and confirms[-1][1].ok, "short": short,
            "probes": [asdict(p) for p in outcome.probes], "confirms": [confirm_row(c, q) for q, c in confirms],
            # how the confirms went, for a reader of --json or cmx_tune.json: how many, at which rates, why they stopped
            "confirm_count": len(confirms), "confirm_rates": rates, "confirm_stop": outcome.confirm_stop,
            "confirm_why": outcome.confirm_why, "confirm_floor_qps": outcome.confirm_floor_qps,
            "lowest_confirm_qps": min(rates, default=None),
            "tuned_file": str(tuned) if tuned else None, "tune_dir": str(folder),
            "engine_start_s": outcome.engine_start_s, "seconds": outcome.seconds, "limits": limits_row(target),
            "command": command}


def confirm_row(result: HarnessResult, qps: float) -> dict[str, Any]:
    return {"qps": qps, "ok": result.ok, "validity": result.validity, "loadgen_validity": result.loadgen_validity,
            "problems": list(result.problems),
            "ttft_p99_ms": result.ttft_p99_ms, "tpot_p99_ms": result.tpot_p99_ms,
            "samples_per_second": result.samples_per_second, "tokens_per_second": result.tokens_per_second,
            "seconds": result.test_seconds, "same_engine": bool(result.details.get("same_engine_as_probes"))}


def limits_row(target: TuneTarget) -> dict[str, float] | None:
    from cmx.mlperf.rounds import load_round

    latency = load_round(target.round).benchmark(target.benchmark).scenario(target.scenario).latency
    return {"ttft_p99_ms": latency.ttft_p99_ms, "tpot_p99_ms": latency.tpot_p99_ms} if latency else None


def write_tuned(path: Path, target: TuneTarget, qps: float, confirms: list[HarnessResult], ctx: StepContext) -> Path:
    from cmx.recipe.inputs_file import write_inputs_file

    last = confirms[-1] if confirms else None
    verdict = (f"confirmed {last.validity} by one run of the confirm length" if last and last.ok
               else "NOT confirmed (tuned with --no-confirm)")
    command = " ".join(ctx.run_argv) or "cmx tune"
    header = [f"inputs tuned by cmx for {target.benchmark} {target.scenario} ({target.round}), "
              f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
              f"{target.input_name} = {qps:g}: {verdict}", f"made by: {command}",
              "use: cmx run QUERY --inputs-file THIS_FILE  (an explicit --input wins)"]
    return write_inputs_file(path, {target.input_name: qps}, header)
