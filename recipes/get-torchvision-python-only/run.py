"""torchvision's Python package for a CPU torch, its compiled ops removed, with the op-schema shim
(cmx.tools.torchvision_cpu)."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.tools.torchvision_cpu import install, installed_torch, matching_version


def run(ctx: StepContext) -> dict[str, Any]:
    python = ctx.deps.python.outputs["executable"]
    version = ctx.inputs["version"] or matching_version(installed_torch(python))
    path = install(ctx.workdir / "torchvision", version, python=python, log=ctx.log)
    return {"path": path, "version": version}
