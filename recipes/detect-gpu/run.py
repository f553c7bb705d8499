"""Ask nvidia-smi, nvcc, amd-smi or rocm-smi, and ROCm what is there (the logic: cmx/tools/gpu.py)."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.tools.gpu import detect_gpus


def run(ctx: StepContext) -> dict[str, Any]:
    report = detect_gpus(lambda argv: ctx.run_cmd(argv, check=False, timeout=120))
    for vendor, reason in (("nvidia", report.nvidia_reason), ("amd", report.amd_reason)):
        gpus = report.of(vendor)
        if gpus:
            ctx.log.info("%d %s GPU(s): %s", len(gpus), vendor, ", ".join(sorted({g.name for g in gpus})))
        else:
            ctx.log.info("no %s GPU: %s", vendor, reason)
    ctx.log.info("CUDA toolkit: %s", report.cuda_version or f"none ({report.cuda_reason})")
    ctx.log.info("ROCm: %s", report.rocm_version or f"none ({report.rocm_reason})")
    return report.to_outputs()
