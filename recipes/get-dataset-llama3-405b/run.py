"""The llama3.1-405b dataset pickle: downloaded and checked (the R2 list's md5, a sha256 when given, then its
format), or generated."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.benchmarks.kit.dataset_step import dataset_step


def run(ctx: StepContext) -> dict[str, Any]:
    return dataset_step(ctx, "llama3.1-405b")
