"""Check a package in the detected interpreter; install it only when the user allowed it (cmx.tools.pip)."""

from __future__ import annotations

import shlex
from typing import Any

from cmx.execute.context import StepContext
from cmx.tools.pip import ensure


def run(ctx: StepContext) -> dict[str, Any]:
    found = ensure(ctx.inputs["package"], python=ctx.deps.python.outputs["executable"],
                   install=ctx.install_missing, run=lambda argv: ctx.run_cmd(argv, cwd=ctx.workdir),
                   extra_args=shlex.split(ctx.inputs["pip_args"] or ""), import_name=ctx.inputs["import_name"])
    ctx.log.info("%s %s in %s%s", found.name, found.version, found.location,
                 " (installed now)" if found.installed_now else "")
    return {"name": found.name, "version": found.version, "location": found.location,
            "installed_now": found.installed_now}
