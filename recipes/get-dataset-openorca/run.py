"""The OpenOrca pickle: downloaded and checked (sha256, then the columns the benchmark reads), or generated."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from cmx.errors import StepError
from cmx.mlperf.benchmarks.llama2_70b.dataset import load_openorca
from cmx.tools.archive import gunzip
from cmx.tools.download import download


def run(ctx):
    name, rows, seed = ctx.inputs["filename"], ctx.inputs["rows"], ctx.inputs["seed"]
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        raise StepError(f"{name!r} is not a plain file name", hint="pass --input filename=NAME, with no / or \\")
    if "tiny" in ctx.variations:
        from cmx.mlperf.benchmarks.llama2_70b.tiny import (
            OPENORCA_ROWS,
            make_tiny_openorca,
        )

        made = make_tiny_openorca(ctx.workdir / name, Path(ctx.deps.model.outputs["tokenizer_path"]),
                                  rows=OPENORCA_ROWS if rows is None else rows, seed=seed or 0)
        ctx.log.warning("generated %d OpenOrca-format samples (seed %d): their answers are random text, so accuracy "
                        "results with them mean nothing", made.rows, seed or 0)
        return {"path": made.path, "rows": made.rows, "is_tiny": True}
    given = [k for k in ("rows", "seed") if ctx.inputs[k] is not None]
    if given:
        raise StepError(f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to the tiny dataset only: the "
                        "real one has its 24576 samples", hint="add _tiny to the query, or drop those inputs")
    url, expected, dest = ctx.inputs["url"], ctx.inputs["sha256"], ctx.workdir / name
    if expected is not None and expected.strip().lower() in ("", "none", "null"):
        expected = None  # `--input sha256=none`: the command line cannot unset a value otherwise
    gzipped = unquote(urlsplit(url).path).endswith(".gz")  # then the sha256 is the pickle's, checked after
    fetched = ctx.scratch / (name + ".gz" if gzipped else name)
    bar = ctx.progress(None, f"download {fetched.name}")
    got = download(url, fetched, sha256=None if gzipped else expected, token=ctx.inputs["token"],
                   retries=ctx.inputs["retries"], keep_partial=True, log=ctx.log, on_progress=bar.update)
    if gzipped:
        try:
            got = gunzip(fetched, dest, sha256=expected, what=f"the pickle from {url}")
        finally:
            fetched.unlink(missing_ok=True)
    else:
        got = got.moved_to(dest)
    if got.verified:
        ctx.log.info("%s: sha256 %s verified", name, got.sha256)
    else:
        ctx.log.warning("%s: sha256 %s not verified (no sha256 given); pin it with --input sha256=%s",
                        name, got.sha256, got.sha256)
    dataset = load_openorca(dest)  # the columns and dtypes the harness and the accuracy script read
    if len(dataset) != 24576:
        ctx.log.warning("%s has %d samples, not the 24576 of the official dataset", name, len(dataset))
    return {"path": dest, "rows": len(dataset), "is_tiny": False}
