"""Download `url` into the step's folder with cmx.tools.download; the logic and its tests live there."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from cmx.errors import StepError
from cmx.execute.context import StepContext
from cmx.secrets import masked_url
from cmx.tools.download import download


def _filename(url: str, given: str | None) -> str:
    """`given`, else the URL's last path segment: a plain name, never a path out of the workdir."""
    name = given or unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    if not given and not name:
        raise StepError(f"{masked_url(url)} ends with no file name", hint="pass --input filename=NAME")
    if name in (".", "..") or "/" in name or "\\" in name:
        raise StepError(f"{name!r} is not a plain file name", hint="pass --input filename=NAME, with no / or \\")
    return name


def run(ctx: StepContext) -> dict[str, Any]:
    url, sha256 = ctx.inputs["url"], ctx.inputs["sha256"]
    name = _filename(url, ctx.inputs["filename"])
    bar = ctx.progress(None, f"download {name}")
    # into ctx.scratch, which outlives a failed attempt: the next run resumes the partial file
    result = download(url, ctx.scratch / name, sha256=sha256, token=ctx.inputs["token"],
                      retries=ctx.inputs["retries"], keep_partial=True,
                      on_progress=lambda done, total: bar.update(done, total), log=ctx.log)
    result = result.moved_to(ctx.workdir / name)  # into the entry; the scratch folder goes on success
    shown = masked_url(url)  # https://user:***@host/...: the password stays out of the log
    if result.verified:
        ctx.log.info("downloaded %s: %d bytes, sha256 %s verified", shown, result.size, result.sha256)
    else:
        ctx.log.warning("downloaded %s: %d bytes, sha256 %s not verified (no sha256 given); "
                        "pin it with --input sha256=%s", shown, result.size, result.sha256, result.sha256)
    return {"path": result.path, "sha256": result.sha256, "size": result.size, "verified": result.verified}
