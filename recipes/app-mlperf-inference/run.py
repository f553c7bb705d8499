"""Every MLPerf Inference app's step: the benchmark is the extending recipe's `params: {benchmark: ...}`; the work
is in cmx.mlperf.app_step, the benchmark in its package under cmx.mlperf.benchmarks."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.execute.plan_check import PlannedStep
from cmx.mlperf.app_step import check_plan, run_benchmark


def run(ctx: StepContext) -> dict[str, Any]:
    return run_benchmark(ctx, ctx.params["benchmark"])


def check(step: PlannedStep) -> None:
    """Before anything runs (`cmx plan`, `cmx run`): what the step would refuse after the downloads."""
    check_plan(step, step.params["benchmark"])
