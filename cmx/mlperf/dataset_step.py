"""The get-dataset recipes' step: a benchmark's MLCommons dataset downloaded and checked, or its `_tiny` set generated.

Every get-dataset-* recipe for an MLPerf benchmark has the same inputs (filename, url, sha256, token,
retries, rows, seed), the `size` group (`full`, `tiny`) and a `model` dep whose tokenizer the tiny
set is tokenized with; its run.py calls `dataset_step(ctx, FAMILY, ...)`. The benchmark plug-in
(found by its family, cmx.mlperf.benchmarks) generates and reads the file, so the checks after a
download are the ones the harness and the accuracy script rely on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cmx.errors import StepError


def dataset_step(ctx: Any, family: str, *, samples: int, default_name: str | None = None,
                 what: str | None = None, suffix: str = ".pkl") -> dict[str, Any]:
    """The step's outputs (path, rows, is_tiny). `samples`: the official dataset's size; `default_name`: the
    file's name when the input gives none and an R2 listing is not asked (None: the recipe's filename input
    always has one); `what`: how the warning names a generated sample; `suffix`: of the one file an R2
    listing must hold when no filename is given."""
    from cmx.mlperf.benchmarks import benchmark_for

    bench = benchmark_for(family)
    name, rows, seed = ctx.inputs["filename"], ctx.inputs["rows"], ctx.inputs["seed"]
    if name is not None and (not name or "/" in name or "\\" in name or name in (".", "..")):
        raise StepError(f"{name!r} is not a plain file name", hint="pass --input filename=NAME, with no / or \\")
    if ctx.variation("size") == "tiny":
        dest = ctx.workdir / (name or default_name or f"{family}-tiny{suffix}")
        path = bench.make_tiny_dataset(dest, Path(ctx.deps.model.outputs["tokenizer_path"]),
                                       samples if rows is None else rows, seed or 0)
        made = len(bench.load_dataset(path))
        ctx.log.warning("generated %d %s samples (seed %d): their references are random text, so accuracy results "
                        "with them mean nothing", made, what or f"{family}-format", seed or 0)
        return {"path": path, "rows": made, "is_tiny": True}
    given = [k for k in ("rows", "seed") if ctx.inputs[k] is not None]
    if given:
        raise StepError(f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to the tiny dataset only: the "
                        f"real one has its {samples} samples", hint="add _tiny to the query, or drop those inputs")
    dest = _download(ctx, name, default_name, suffix)
    dataset = bench.load_dataset(dest)  # the columns and types the harness and the accuracy script read
    if len(dataset) != samples:
        ctx.log.warning("%s has %d samples, not the %d of the official dataset", dest.name, len(dataset), samples)
    return {"path": dest, "rows": len(dataset), "is_tiny": False}


def _download(ctx: Any, name: str | None, default_name: str | None, suffix: str) -> Path:
    """Fetch the file (from an MLCommons R2 listing, or a plain URL) into the step's folder, checksum-verified."""
    from cmx.tools.download import download
    from cmx.tools.mlc_r2 import fetch_r2_file, is_r2_metadata

    url, expected = ctx.inputs["url"], ctx.inputs["sha256"]
    if expected is not None and expected.strip().lower() in ("", "none", "null"):
        expected = None  # `--input sha256=none`: the command line cannot unset a value otherwise
    common = {"sha256": expected, "token": ctx.inputs["token"], "retries": ctx.inputs["retries"], "log": ctx.log}
    if is_r2_metadata(url):
        name = name or _only_file(ctx, url, suffix)
        dest = ctx.workdir / name
        bar = ctx.progress(None, f"download {name}")
        got = fetch_r2_file(url, name, ctx.scratch / name, ctx.scratch / "metadata", on_progress=bar.update,
                            **common).moved_to(dest).result
    else:
        name = name or default_name
        if name is None:
            raise StepError(f"no file name to save {url} under", hint="pass --input filename=NAME")
        dest = ctx.workdir / name
        bar = ctx.progress(None, f"download {name}")
        got = download(url, ctx.scratch / name, keep_partial=True, on_progress=bar.update, **common).moved_to(dest)
    if got.verified:
        ctx.log.info("%s: sha256 %s verified", name, got.sha256)
    else:
        ctx.log.warning("%s: sha256 %s (MLCommons publishes none); pin it with --input sha256=%s", name, got.sha256,
                        got.sha256)
    return dest


def _only_file(ctx: Any, url: str, suffix: str) -> str:
    """The one file with `suffix` the R2 dataset lists (the reference names none); refused when there are several
    or none."""
    from cmx.tools.mlc_r2 import r2_listing

    listed = r2_listing(url, ctx.scratch / "metadata", token=ctx.inputs["token"], retries=ctx.inputs["retries"],
                        log=ctx.log)
    names = sorted({f.path.rsplit("/", 1)[-1] for f in listed if f.path.endswith(suffix)})
    if len(names) != 1:
        raise StepError(f"{url} lists {len(names)} {suffix} files{': ' + ', '.join(names) if names else ''}",
                        hint="name the one to use with --input filename=NAME")
    return names[0]
