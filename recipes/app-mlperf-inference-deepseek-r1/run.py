"""deepseek-r1's app step; the work is in cmx.mlperf.app_step, the benchmark in cmx.mlperf.benchmarks.deepseek_r1."""

from cmx.mlperf.app_step import run_benchmark


def run(ctx):
    return run_benchmark(ctx, "deepseek-r1")
