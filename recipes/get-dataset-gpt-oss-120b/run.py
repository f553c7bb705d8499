"""The gpt-oss-120b sets: every file of MLCommons' R2 dataset, md5-checked, then each set read and checked; or generated."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from cmx.errors import StepError
from cmx.mlperf.benchmarks.gpt_oss_120b.dataset import (
    ACCURACY_SAMPLES,
    PERFORMANCE_FILE,
    PERFORMANCE_SAMPLES,
    load_set,
)
from cmx.mlperf.benchmarks.gpt_oss_120b.livecodebench import FOLDER, read_problems
from cmx.tools.mlc_r2 import fetch_r2_file, r2_listing


def run(ctx):
    rows, seed = ctx.inputs["rows"], ctx.inputs["seed"]
    if ctx.variation("size") == "tiny":
        from cmx.mlperf.benchmarks.gpt_oss_120b.tiny import make_tiny_sets

        folder = make_tiny_sets(ctx.workdir / "gpt-oss-data", Path(ctx.deps.model.outputs["tokenizer_path"]),
                                rows=PERFORMANCE_SAMPLES if rows is None else rows, seed=seed or 0)
        ctx.log.warning("generated gpt-oss-120b-format sets of %d rows (seed %d): their answers are random, so "
                        "accuracy results with them mean nothing", PERFORMANCE_SAMPLES if rows is None else rows,
                        seed or 0)
        return _outputs(folder, is_tiny=True, log=ctx.log)
    given = [k for k in ("rows", "seed") if ctx.inputs[k] is not None]
    if given:
        raise StepError(f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to the tiny sets only",
                        hint="add _tiny to the query, or drop those inputs")
    url, token, retries = ctx.inputs["url"], ctx.inputs["token"], ctx.inputs["retries"]
    listed = r2_listing(url, ctx.scratch / "metadata", token=token, retries=retries, log=ctx.log)
    dest = ctx.workdir / "gpt-oss-data"
    for entry in listed:
        relative = PurePosixPath(entry.path)
        if relative.is_absolute() or ".." in relative.parts:
            raise StepError(f"{url} lists a file outside the dataset: {entry.path}")
        target = dest.joinpath(*relative.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        bar = ctx.progress(None, f"download {relative.name}")
        fetch_r2_file(url, relative.name, ctx.scratch / relative.name, ctx.scratch / "metadata", token=token,
                      retries=retries, on_progress=bar.update, log=ctx.log).moved_to(target)
    folder = _root(dest)
    if ctx.inputs["lcb_path"] is not None:
        lcb = Path(ctx.inputs["lcb_path"])
        read_problems(lcb)  # refused now if it holds no code_generation_lite problems
        (folder / FOLDER).symlink_to(lcb.resolve(), target_is_directory=True)
    else:
        ctx.log.warning("no --input lcb_path: the LiveCodeBench rows cannot be graded until %s holds LiveCodeBench's "
                        "code_generation_lite release_v6 files", folder / FOLDER)
    return _outputs(folder, is_tiny=False, log=ctx.log)


def _root(dest: Path) -> Path:
    """The folder holding the sets (perf/ and acc/, or the files themselves; the R2 list may nest them)."""
    found = sorted(p.parent.parent if p.parent.name == "perf" else p.parent
                   for p in dest.rglob(PurePosixPath(PERFORMANCE_FILE).name + ".*"))
    if not found:
        raise StepError(f"the download in {dest} has no {PERFORMANCE_FILE}.parquet",
                        hint="the R2 dataset's layout changed; compare it with language/gpt-oss-120b/README.md")
    return found[0]


def _outputs(folder: Path, *, is_tiny: bool, log) -> dict:
    accuracy, performance = load_set(folder, "accuracy"), load_set(folder, "performance")
    load_set(folder, "test07")
    if not is_tiny and (len(accuracy), len(performance)) != (ACCURACY_SAMPLES, PERFORMANCE_SAMPLES):
        log.warning("%s has %d accuracy and %d performance rows, not the official %d and %d", folder, len(accuracy),
                    len(performance), ACCURACY_SAMPLES, PERFORMANCE_SAMPLES)
    return {"path": folder, "rows": len(accuracy), "performance_rows": len(performance), "is_tiny": is_tiny}
