"""VBench's pinned environment, a cache entry of its own (cmx.mlperf.runtime.cached_venv)."""

from __future__ import annotations

import shlex
from typing import Any

from cmx.errors import StepError
from cmx.execute.context import StepContext
from cmx.mlperf.runtime import cached_venv

ARTEFACT = "get-vbench-env"  # the entries' folder: cache/get-vbench-env/<key>/


def run(ctx: StepContext) -> dict[str, Any]:
    if ctx.store is None:
        raise StepError("get-vbench-env needs the run's cache (a StepContext made by cmx's runner)")
    found = cached_venv(ARTEFACT, ctx.inputs["requirements"], python=ctx.deps.python.outputs["executable"],
                        store=ctx.store, run=lambda argv: ctx.run_cmd(argv, cwd=ctx.workdir),
                        extra_args=shlex.split(ctx.inputs["pip_args"] or ""))
    ctx.log.info("VBench's environment %s: %d pinned packages%s", found.python, len(found.packages),
                 " (made now)" if found.built_now else "")
    return {"python": found.python, "packages": found.packages, "key": found.key, "built_now": found.built_now}
