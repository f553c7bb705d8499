"""The deepseek-r1 dataset: the pickle downloaded and checked (the R2 list's md5, a sha256 when given), LiveCodeBench's
tests for its code rows, and the prompt ids the model's chat template makes; or all of it generated (_tiny)."""

from cmx.mlperf.benchmarks.kit.dataset_step import dataset_step


def run(ctx):
    return dataset_step(ctx, "deepseek-r1")
