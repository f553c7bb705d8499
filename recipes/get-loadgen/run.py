"""Find LoadGen at the round's pin: the interpreter's own, else a cached folder (cmx.mlperf.runtime.ensure_loadgen)."""

from __future__ import annotations

from typing import Any

from cmx.errors import StepError
from cmx.execute.context import StepContext
from cmx.mlperf.runtime import ensure_loadgen


def run(ctx: StepContext) -> dict[str, Any]:
    if ctx.store is None:
        raise StepError("get-loadgen needs the run's cache (a StepContext made by cmx's runner)")
    found = ensure_loadgen(ctx.inputs["round"], python=ctx.deps.python.outputs["executable"], store=ctx.store,
                           run=ctx.run_cmd)
    where = f"in {found.path}{' (installed now)' if found.built_now else ''}" if found.path else "in the interpreter"
    ctx.log.info("mlcommons-loadgen %s %s", found.version, where)
    return {"version": found.version, "requirement": found.requirement, "path": str(found.path or ""),
            "built_now": found.built_now}
