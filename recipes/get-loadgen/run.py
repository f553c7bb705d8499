"""Check (or, with --install-missing, install) LoadGen at the round's pin (cmx.mlperf.runtime)."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.rounds import load_round
from cmx.mlperf.runtime import ensure_loadgen


def run(ctx: StepContext) -> dict[str, Any]:
    found = ensure_loadgen(ctx.inputs["round"], python=ctx.deps.python.outputs["executable"],
                           install=ctx.install_missing, run=ctx.run_cmd)
    requirement = load_round(ctx.inputs["round"]).loadgen_requirement
    ctx.log.info("%s %s%s", found.name, found.version, " (installed now)" if found.installed_now else "")
    return {"version": found.version, "requirement": requirement, "installed_now": found.installed_now}
