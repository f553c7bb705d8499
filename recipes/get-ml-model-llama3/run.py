"""Llama 3.1 8B Instruct at a pinned commit, your own folder, or a tiny random Llama 3 (kit.model_recipe)."""

from cmx.mlperf.benchmarks import benchmark_for
from cmx.mlperf.benchmarks.kit.model_recipe import get_model


def run(ctx):
    return get_model(ctx, benchmark_for("llama3.1-8b"))
