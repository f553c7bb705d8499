"""The deepseek-r1 dataset: the pickle downloaded and checked (the R2 list's md5, a sha256 when given), LiveCodeBench's
tests for its code rows, and the prompt ids the model's chat template makes; or all of it generated (_tiny)."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.benchmarks.kit.dataset_step import dataset_step


def run(ctx: StepContext) -> dict[str, Any]:
    return dataset_step(ctx, "deepseek-r1")
