"""Fetch a round's published table with cmx.mlperf.published.fetch; the logic and its tests live there."""

from __future__ import annotations

from typing import Any

from cmx.execute.context import StepContext
from cmx.mlperf.published.fetch import fetch_summary, local_url, summary_url
from cmx.secrets import masked_url


def run(ctx: StepContext) -> dict[str, Any]:
    round_name, local = ctx.variation("round"), ctx.inputs["summary"]
    filename = local.name if local else ctx.inputs["filename"]
    commit = "" if local else ctx.inputs["commit"]
    url = local_url(local) if local else summary_url(ctx.inputs["base_url"], round_name, commit, filename)
    bar = ctx.progress(None, f"download {filename}")
    got = fetch_summary(ctx.workdir / filename, url=url, sha256=ctx.inputs["sha256"], token=ctx.inputs["token"],
                        retries=ctx.inputs["retries"], scratch=ctx.scratch,
                        on_progress=lambda done, total: bar.update(done, total), log=ctx.log)
    shown = masked_url(url)
    if got.verified:
        ctx.log.info("%s: %d rows, sha256 %s verified", shown, got.rows, got.sha256)
    else:
        ctx.log.warning("%s: %d rows, sha256 %s not verified (no sha256 given); pin it with --input sha256=%s",
                        shown, got.rows, got.sha256, got.sha256)
    return {"path": got.path, "round": round_name, "commit": commit or "", "url": shown, "rows": got.rows,
            "sha256": got.sha256, "verified": got.verified}
