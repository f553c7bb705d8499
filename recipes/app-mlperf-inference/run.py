"""Every MLPerf Inference app's step: the benchmark is the extending recipe's `params: {benchmark: ...}`; the work
is in cmx.mlperf.app_step, the benchmark in its package under cmx.mlperf.benchmarks."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.app_step import run_benchmark


def run(ctx: StepContext) -> dict[str, Any]:
    return run_benchmark(ctx, ctx.params["benchmark"])
