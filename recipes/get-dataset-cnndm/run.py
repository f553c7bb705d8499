"""cnn_eval.json: downloaded and checked (the R2 list's md5, a sha256 when given, then its format), or generated."""

from __future__ import annotations

from pathlib import Path

from cmx.errors import StepError
from cmx.mlperf.benchmarks.llama3_1_8b.dataset import SAMPLES, load_cnndm
from cmx.tools.download import download
from cmx.tools.mlc_r2 import fetch_r2_file, is_r2_metadata


def run(ctx):
    name, rows, seed = ctx.inputs["filename"], ctx.inputs["rows"], ctx.inputs["seed"]
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        raise StepError(f"{name!r} is not a plain file name", hint="pass --input filename=NAME, with no / or \\")
    dest = ctx.workdir / name
    if ctx.variation("size") == "tiny":
        from cmx.mlperf.benchmarks.llama3_1_8b.tiny import make_tiny_cnndm

        made = make_tiny_cnndm(dest, Path(ctx.deps.model.outputs["tokenizer_path"]),
                               rows=SAMPLES if rows is None else rows, seed=seed or 0)
        ctx.log.warning("generated %d CNN/DailyMail-format samples (seed %d): their summaries are random text, so "
                        "accuracy results with them mean nothing", made.rows, seed or 0)
        return {"path": made.path, "rows": made.rows, "is_tiny": True}
    given = [k for k in ("rows", "seed") if ctx.inputs[k] is not None]
    if given:
        raise StepError(f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to the tiny dataset only: the "
                        f"real one has its {SAMPLES} samples", hint="add _tiny to the query, or drop those inputs")
    url, expected = ctx.inputs["url"], ctx.inputs["sha256"]
    if expected is not None and expected.strip().lower() in ("", "none", "null"):
        expected = None  # `--input sha256=none`: the command line cannot unset a value otherwise
    bar = ctx.progress(None, f"download {name}")
    common = {"sha256": expected, "token": ctx.inputs["token"], "retries": ctx.inputs["retries"],
              "on_progress": bar.update, "log": ctx.log}
    if is_r2_metadata(url):
        got = fetch_r2_file(url, name, ctx.scratch / name, ctx.scratch / "metadata", **common).moved_to(dest).result
    else:
        got = download(url, ctx.scratch / name, keep_partial=True, **common).moved_to(dest)
    if got.verified:
        ctx.log.info("%s: sha256 %s verified", name, got.sha256)
    else:
        ctx.log.warning("%s: sha256 %s (MLCommons publishes none); pin it with --input sha256=%s", name, got.sha256,
                        got.sha256)
    dataset = load_cnndm(dest)  # the columns and types the harness and the accuracy script read
    if len(dataset) != SAMPLES:
        ctx.log.warning("%s has %d samples, not the %d of the official dataset", name, len(dataset), SAMPLES)
    return {"path": dest, "rows": len(dataset), "is_tiny": False}
