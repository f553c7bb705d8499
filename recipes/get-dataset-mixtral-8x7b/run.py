"""The mixtral-8x7b dataset pickle: downloaded and checked (the R2 list's md5, a sha256 when given, then its format), or generated."""

from cmx.mlperf.benchmarks.mixtral_8x7b.dataset import SAMPLES
from cmx.mlperf.dataset_step import dataset_step


def run(ctx):
    # the name when none is listed or given: the file of README.md's wget alternative
    return dataset_step(ctx, "mixtral-8x7b", samples=SAMPLES, default_name="09292024_mixtral_15k_mintoken2_v1.pkl")
