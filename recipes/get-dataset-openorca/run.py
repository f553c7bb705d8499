"""The OpenOrca pickle: downloaded (gunzipped when it is a .gz) and checked (sha256, then the columns the
benchmark reads), or generated."""

from cmx.mlperf.benchmarks.kit.dataset_step import dataset_step


def run(ctx):
    return dataset_step(ctx, "llama2-70b")
