"""Llama 2 70B (or an FP8 checkpoint) at a pinned commit, your own folder, or a tiny Llama 2 (kit.model_recipe)."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.benchmarks import benchmark_for
from cmx.mlperf.benchmarks.kit.model_recipe import get_model


def run(ctx: StepContext) -> dict[str, Any]:
    return get_model(ctx, benchmark_for("llama2-70b"))
