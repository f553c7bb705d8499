"""mixtral-8x7b's app step; the work is in cmx.mlperf.app_step, the benchmark in cmx.mlperf.benchmarks.mixtral_8x7b."""

from cmx.mlperf.app_step import run_benchmark


def run(ctx):
    return run_benchmark(ctx, "mixtral-8x7b")
