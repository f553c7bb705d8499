"""Check detect-gpu's ROCm findings against the requested range (cmx/tools/gpu.py); runs nothing."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.tools.gpu import GpuReport, require_rocm


def run(ctx: StepContext) -> dict[str, Any]:
    report = GpuReport.from_outputs(ctx.deps.gpu.outputs)
    found = require_rocm(report, ctx.inputs["version_min"], ctx.inputs["version_max"])
    if not report.of("amd"):
        ctx.log.warning("no AMD GPU here (%s): ROCm can build, not run", report.amd_reason)
    ctx.log.info("ROCm %s at %s", found.version, found.home)
    return found.to_outputs()
