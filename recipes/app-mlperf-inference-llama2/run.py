"""llama2-70b's app step; the work is in cmx.mlperf.app_step, the benchmark in cmx.mlperf.benchmarks.llama2_70b."""

from cmx.mlperf.app_step import run_benchmark


def run(ctx):
    return run_benchmark(ctx, "llama2-70b")
