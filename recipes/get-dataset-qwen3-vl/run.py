"""The product catalogue at its pinned commit, every file checked, then its columns and images; or a tiny one made."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.benchmarks.kit.dataset_step import dataset_step


def run(ctx: StepContext) -> dict[str, Any]:
    return dataset_step(ctx, "qwen3-vl-235b-a22b")
