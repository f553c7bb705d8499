"""Qwen/Qwen3-VL-235B-A22B-Instruct at a commit you pin, your own folder, or a tiny Qwen3-VL MoE (kit.model_recipe)."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.benchmarks import benchmark_for
from cmx.mlperf.benchmarks.kit.model_recipe import get_model


def run(ctx: StepContext) -> dict[str, Any]:
    return get_model(ctx, benchmark_for("qwen3-vl-235b-a22b"))
