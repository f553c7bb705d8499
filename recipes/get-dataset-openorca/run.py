"""The OpenOrca pickle: downloaded (gunzipped when it is a .gz) and checked (sha256, then the columns the
benchmark reads), or generated."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.benchmarks.kit.dataset_step import dataset_step


def run(ctx: StepContext) -> dict[str, Any]:
    return dataset_step(ctx, "llama2-70b")
