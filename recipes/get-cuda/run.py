"""Check detect-gpu's CUDA findings against the requested range (cmx/tools/gpu.py); runs nothing."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.tools.gpu import (
    GpuReport,
    require_cuda_driver,
    require_cuda_toolkit,
    toolkit_newer_than_driver,
)


def run(ctx: StepContext) -> dict[str, Any]:
    report = GpuReport.from_outputs(ctx.deps.gpu.outputs)
    require = require_cuda_driver if "driver" in ctx.variations else require_cuda_toolkit
    found = require(report, ctx.inputs["version_min"], ctx.inputs["version_max"])
    if not report.of("nvidia"):
        ctx.log.warning("no NVIDIA GPU here (%s): the toolkit can build, not run", report.nvidia_reason)
    if toolkit_newer_than_driver(report):
        ctx.log.warning("%s", toolkit_newer_than_driver(report))
    ctx.log.info("CUDA %s at %s", found.version, found.home or report.nvcc or "the driver")
    return found.to_outputs()
