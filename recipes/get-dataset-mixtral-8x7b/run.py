"""The mixtral-8x7b dataset pickle: downloaded and checked (the R2 list's md5, a sha256 when given, then its format), or generated."""

from __future__ import annotations

from pathlib import Path

from cmx.errors import StepError
from cmx.mlperf.benchmarks.mixtral_8x7b.dataset import SAMPLES, load_mixtral
from cmx.tools.download import download
from cmx.tools.mlc_r2 import fetch_r2_file, is_r2_metadata, r2_listing

# the name in the cache entry when none is listed or given: the file of README.md's wget alternative
_DEFAULT_NAME = "09292024_mixtral_15k_mintoken2_v1.pkl"


def run(ctx):
    name, rows, seed = ctx.inputs["filename"], ctx.inputs["rows"], ctx.inputs["seed"]
    if name is not None and (not name or "/" in name or "\\" in name or name in (".", "..")):
        raise StepError(f"{name!r} is not a plain file name", hint="pass --input filename=NAME, with no / or \\")
    if ctx.variation("size") == "tiny":
        from cmx.mlperf.benchmarks.mixtral_8x7b.tiny_dataset import make_tiny_dataset

        made = make_tiny_dataset(ctx.workdir / (name or _DEFAULT_NAME), Path(ctx.deps.model.outputs["tokenizer_path"]),
                                 rows=SAMPLES if rows is None else rows, seed=seed or 0)
        ctx.log.warning("generated %d mixtral-8x7b-format samples (seed %d): their answers are random text, so "
                        "accuracy results with them mean nothing", made.rows, seed or 0)
        return {"path": made.path, "rows": made.rows, "is_tiny": True}
    given = [k for k in ("rows", "seed") if ctx.inputs[k] is not None]
    if given:
        raise StepError(f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to the tiny dataset only: the "
                        f"real one has its {SAMPLES} samples", hint="add _tiny to the query, or drop those inputs")
    url, expected = ctx.inputs["url"], ctx.inputs["sha256"]
    if expected is not None and expected.strip().lower() in ("", "none", "null"):
        expected = None
    common = {"sha256": expected, "token": ctx.inputs["token"], "retries": ctx.inputs["retries"], "log": ctx.log}
    if is_r2_metadata(url):
        if name is None:
            name = _only_pickle(url, ctx)
        dest = ctx.workdir / name
        bar = ctx.progress(None, f"download {name}")
        got = fetch_r2_file(url, name, ctx.scratch / name, ctx.scratch / "metadata", on_progress=bar.update,
                            **common).moved_to(dest).result
    else:
        name = name or _DEFAULT_NAME
        dest = ctx.workdir / name
        bar = ctx.progress(None, f"download {name}")
        got = download(url, ctx.scratch / name, keep_partial=True, on_progress=bar.update, **common).moved_to(dest)
    if got.verified:
        ctx.log.info("%s: sha256 %s verified", name, got.sha256)
    else:
        ctx.log.warning("%s: sha256 %s (MLCommons publishes none); pin it with --input sha256=%s", name, got.sha256,
                        got.sha256)
    dataset = load_mixtral(dest)  # the columns and types the harness and the accuracy script read
    if len(dataset) != SAMPLES:
        ctx.log.warning("%s has %d samples, not the %d of the official dataset", name, len(dataset), SAMPLES)
    return {"path": dest, "rows": len(dataset), "is_tiny": False}


def _only_pickle(url: str, ctx) -> str:
    """The one .pkl the R2 dataset lists (the reference names none); refused when there are several or none."""
    listed = r2_listing(url, ctx.scratch / "metadata", token=ctx.inputs["token"], retries=ctx.inputs["retries"],
                        log=ctx.log)
    names = sorted({f.path.rsplit("/", 1)[-1] for f in listed if f.path.endswith(".pkl")})
    if len(names) != 1:
        raise StepError(f"{url} lists {len(names)} .pkl files{': ' + ', '.join(names) if names else ''}",
                        hint="name the one to use with --input filename=NAME")
    return names[0]
