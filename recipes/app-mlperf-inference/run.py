"""Every MLPerf Inference app's step: the benchmark is the extending recipe's `params: {benchmark: ...}`; the work
is in cmx.mlperf.app_step, the benchmark in its package under cmx.mlperf.benchmarks. `check` runs when the query
is planned, so this module imports the step's work only inside `run` (cmx plan's budget)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cmx.mlperf.app_plan import check_app_plan

if TYPE_CHECKING:
    from cmx.execute.context import StepContext
    from cmx.execute.plan_check import PlannedStep


def run(ctx: StepContext) -> dict[str, Any]:
    from cmx.mlperf.app_step import run_benchmark

    return run_benchmark(ctx, ctx.params["benchmark"])


def check(step: PlannedStep) -> list[str]:
    """Before anything runs (`cmx plan`, `cmx run`): what the step would refuse after the downloads; the plan's
    line saying which targets the run measures first (find-performance)."""
    return check_app_plan(step)
