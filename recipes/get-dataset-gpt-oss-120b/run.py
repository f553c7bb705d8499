"""The gpt-oss-120b sets: every file of MLCommons' R2 dataset, md5-checked, then each set read and checked; or
generated."""

from cmx.mlperf.benchmarks.kit.dataset_step import dataset_step


def run(ctx):
    return dataset_step(ctx, "gpt-oss-120b")
