"""Check out `url` at commit `rev` into the step's folder with cmx.tools.git."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.tools import git


def run(ctx: StepContext) -> dict[str, Any]:
    url, rev = ctx.inputs["url"], ctx.inputs["rev"]
    progress = ctx.progress(None, "fetch")
    checkout = git.checkout_commit(url, rev, ctx.workdir / "repo", submodules=ctx.inputs["submodules"],
                                   on_progress=progress.update)
    ctx.log.info("checked out %s at %s into %s", url, rev, checkout)
    return {"path": git.inside(checkout, ctx.inputs["subdir"], what=f"{url} at {rev[:12]}"), "rev": rev}
