"""The gpt-oss-120b sets: every file of MLCommons' R2 dataset, md5-checked, then each set read and checked; or
generated."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.benchmarks.kit.dataset_step import dataset_step


def run(ctx: StepContext) -> dict[str, Any]:
    return dataset_step(ctx, "gpt-oss-120b")
