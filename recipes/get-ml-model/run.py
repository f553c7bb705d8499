"""Every get-ml-model recipe's step: the benchmark is the extending recipe's `params: {benchmark: ...}`; the work
is in cmx.mlperf.benchmarks.kit.model_recipe (the tiny model, your own folder in place, or a pinned Hugging Face
commit) and in the benchmark's model side."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.benchmarks import benchmark_for
from cmx.mlperf.benchmarks.kit.model_recipe import get_model


def run(ctx: StepContext) -> dict[str, Any]:
    return get_model(ctx, benchmark_for(ctx.params["benchmark"]))
