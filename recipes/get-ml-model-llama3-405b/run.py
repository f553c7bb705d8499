"""Llama 3.1 405B Instruct at a pinned commit, your own folder, or llama3.1-8b's tiny Llama 3 (kit.model_recipe)."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.benchmarks import benchmark_for
from cmx.mlperf.benchmarks.kit.model_recipe import get_model


def run(ctx: StepContext) -> dict[str, Any]:
    return get_model(ctx, benchmark_for("llama3.1-405b"))
