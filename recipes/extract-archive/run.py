"""Extract the archive into the step's folder with cmx.tools.archive (checked, all or nothing)."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.tools.archive import extract
from cmx.tools.archive_limits import ArchiveLimits


def run(ctx: StepContext) -> dict[str, Any]:
    archive = ctx.inputs["archive"]
    dest = ctx.workdir / "files"
    progress = ctx.progress(None, f"extract {archive.name}")
    i = ctx.inputs
    limits = ArchiveLimits.from_inputs(max_total_gib=i["max_total_gib"], max_member_gib=i["max_member_gib"],
                                       max_members=i["max_members"], max_ratio=i["max_ratio"],
                                       min_free_gib=i["min_free_gib"])
    made = extract(archive, dest, strip_components=i["strip_components"], on_progress=progress.update, limits=limits)
    ctx.log.info("extracted %d entries of %s into %s", len(made), archive, dest)
    return {"path": dest}
