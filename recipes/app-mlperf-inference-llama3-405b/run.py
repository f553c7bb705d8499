"""llama3.1-405b's app step; the work is in cmx.mlperf.app_step, the benchmark in cmx.mlperf.benchmarks.llama3_1_405b."""

from cmx.mlperf.app_step import run_benchmark


def run(ctx):
    return run_benchmark(ctx, "llama3.1-405b")
