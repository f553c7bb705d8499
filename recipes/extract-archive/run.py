"""Extract the archive into the step's folder with cmx.tools.archive (checked, all or nothing)."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.tools.archive import extract


def run(ctx: StepContext) -> dict[str, Any]:
    archive = ctx.inputs["archive"]
    dest = ctx.workdir / "files"
    progress = ctx.progress(None, f"extract {archive.name}")
    made = extract(archive, dest, strip_components=ctx.inputs["strip_components"], on_progress=progress.update)
    ctx.log.info("extracted %d entries of %s into %s", len(made), archive, dest)
    return {"path": dest}
