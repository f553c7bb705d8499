"""The whisper dataset folder: every file of MLCommons' R2 listing, md5-checked, then the manifest and every WAV's
header checked; or a tiny set generated."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.benchmarks.kit.dataset_step import dataset_step


def run(ctx: StepContext) -> dict[str, Any]:
    return dataset_step(ctx, "whisper")
