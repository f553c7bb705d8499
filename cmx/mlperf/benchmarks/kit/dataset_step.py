"""The get-dataset recipes' step: a benchmark's MLCommons dataset downloaded and checked, or its `_tiny` set generated.

Every get-dataset-* recipe has the inputs url, sha256 (where a file is checksummed), filename (where
the dataset is one file), token, retries, rows and seed, the `size` group (`full`, `tiny`) and a
`model` dep whose tokenizer the tiny set is tokenized with; its run.py is `dataset_step(ctx, FAMILY)`.
A dataset kept on the Hugging Face Hub (Qwen3-VL's product catalogue: `DatasetFacts.hub`) has the inputs repo,
revision, include and endpoint in place of url, and is downloaded at its pinned commit, each file checked.
The benchmark, found through the registry, says what its real dataset is (`dataset_facts()`),
generates the tiny one and reads both, so the checks after a download are the ones the harness and
the accuracy script rely on.

A benchmark whose dataset needs more than a download (deepseek-r1: LiveCodeBench's tests and the
prompts its chat template makes; gpt-oss-120b: a folder of sets and LiveCodeBench's problems)
overrides `finish_dataset(step, path, is_tiny=...)` (the kit's default keeps `path`), which returns
the dataset's final path and the recipe's other outputs.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from cmx.errors import StepError
from cmx.mlperf.benchmarks import benchmark_for
from cmx.mlperf.benchmarks.kit.dataset_facts import DatasetFacts
from cmx.mlperf.benchmarks.kit.outputs import model_outputs

if TYPE_CHECKING:
    from cmx.execute.context import StepContext


def dataset_step(ctx: StepContext, family: str) -> dict[str, object]:
    """The step's outputs: path, rows, is_tiny, and what the benchmark's `finish_dataset` adds."""
    bench = benchmark_for(family)
    facts: DatasetFacts = bench.dataset_facts()
    name, rows, seed = ctx.inputs.get("filename"), ctx.inputs["rows"], ctx.inputs["seed"]
    if name is not None and (not name or "/" in name or "\\" in name or name in (".", "..")):
        raise StepError(f"{name!r} is not a plain file name", hint="pass --input filename=NAME, with no / or \\")
    if ctx.variation("size") == "tiny":
        dest = ctx.workdir / (name or facts.default_name or f"{family}-tiny{facts.suffix}")
        path = bench.make_tiny_dataset(dest, Path(model_outputs(ctx)["tokenizer_path"]),
                                       (facts.tiny_rows or facts.samples) if rows is None else rows, seed or 0)
        made = bench.finish_dataset(ctx, path, is_tiny=True)
        count = len(bench.load_dataset(made.path))
        ctx.log.warning("generated %d %s samples (seed %d): their references are random text, so accuracy results "
                        "with them mean nothing", count, facts.what or f"{family}-format", seed or 0)
        return {"path": made.path, "rows": count, "is_tiny": True, **made.outputs}
    given = [k for k in ("rows", "seed") if ctx.inputs[k] is not None]
    if given:
        raise StepError(f"{', '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to the tiny dataset only: the "
                        f"real one has its {facts.samples} samples",
                        hint="add _tiny to the query, or drop those inputs")
    if facts.hub:
        path = _download_hub(ctx, ctx.workdir / (facts.default_name or family))
    elif facts.whole_listing:
        path = _download_listing(ctx, ctx.workdir / (facts.default_name or family))
    else:
        path = _download(ctx, name, facts)
    made = bench.finish_dataset(ctx, path, is_tiny=False)
    dataset = bench.load_dataset(made.path)  # the columns and types the harness and the accuracy script read
    if len(dataset) != facts.samples:
        ctx.log.warning("%s has %d samples, not the %d of the official dataset", made.path.name, len(dataset),
                        facts.samples)
    return {"path": made.path, "rows": len(dataset), "is_tiny": False, **made.outputs}


def _download(ctx: StepContext, name: str | None, facts: DatasetFacts) -> Path:
    """Fetch the file (from an MLCommons R2 listing, or a plain URL, gunzipped when it ends in .gz) into the
    step's folder, checksum-verified."""
    from cmx.tools.archive import gunzip
    from cmx.tools.download import download
    from cmx.tools.mlc_r2 import fetch_r2_file, is_r2_metadata

    url, expected = ctx.inputs["url"], ctx.inputs.get("sha256")
    if expected is not None and expected.strip().lower() in ("", "none", "null"):
        expected = None  # `--input sha256=none`: the command line cannot unset a value otherwise
    common = {"token": ctx.inputs["token"], "retries": ctx.inputs["retries"], "log": ctx.log}
    if is_r2_metadata(url):
        name = name or _only_file(ctx, url, facts.suffix)
        dest = ctx.workdir / name
        bar = ctx.progress(None, f"download {name}")
        got = fetch_r2_file(url, name, ctx.scratch / name, ctx.scratch / "metadata", sha256=expected,
                            on_progress=bar.update, **common).moved_to(dest).result
    else:
        name = name or facts.default_name
        if name is None:
            raise StepError(f"no file name to save {url} under", hint="pass --input filename=NAME")
        dest = ctx.workdir / name
        gzipped = unquote(urlsplit(url).path).endswith(".gz")  # then the sha256 is the decompressed file's
        fetched = ctx.scratch / (name + ".gz" if gzipped else name)
        bar = ctx.progress(None, f"download {fetched.name}")
        fetched_file = download(url, fetched, sha256=None if gzipped else expected, keep_partial=True,
                                on_progress=bar.update, **common)
        if gzipped:
            try:
                what = "the pickle" if name.endswith(".pkl") else f"the file {name}"
                unpacked = gunzip(fetched, dest, sha256=expected, what=f"{what} from {url}")
            finally:
                fetched.unlink(missing_ok=True)
            return _logged(ctx, dest, unpacked.verified, unpacked.sha256)
        got = fetched_file.moved_to(dest)
    return _logged(ctx, dest, got.verified, got.sha256)


def _logged(ctx: StepContext, dest: Path, verified: bool, sha256: str) -> Path:
    if verified:
        ctx.log.info("%s: sha256 %s verified", dest.name, sha256)
    else:
        ctx.log.warning("%s: sha256 %s not verified (none given; MLCommons publishes none for most datasets); pin it "
                        "with --input sha256=%s", dest.name, sha256, sha256)
    return dest


def _download_listing(ctx: StepContext, dest: Path) -> Path:
    """Every file an MLCommons R2 listing holds, each checked against its md5, into `dest` at its listed path."""
    from cmx.tools.mlc_r2 import fetch_r2_file, r2_listing

    url, token, retries = ctx.inputs["url"], ctx.inputs["token"], ctx.inputs["retries"]
    for entry in r2_listing(url, ctx.scratch / "metadata", token=token, retries=retries, log=ctx.log):
        relative = PurePosixPath(entry.path)
        if relative.is_absolute() or ".." in relative.parts:
            raise StepError(f"{url} lists a file outside the dataset: {entry.path}")
        target = dest.joinpath(*relative.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        bar = ctx.progress(None, f"download {relative.name}")
        fetch_r2_file(url, relative.name, ctx.scratch / relative.name, ctx.scratch / "metadata", token=token,
                      retries=retries, on_progress=bar.update, log=ctx.log).moved_to(target)
    return dest


def _download_hub(ctx: StepContext, dest: Path) -> Path:
    """The dataset repository `repo` (datasets/ORG/NAME) at the commit `revision`: the files `include` selects (all by
    default), each checked against the Hub's sha256 or git blob id, into `dest`."""
    from cmx.tools import huggingface as hf

    repo, revision, endpoint, token = (ctx.inputs[k] for k in ("repo", "revision", "endpoint", "token"))
    hf.require_commit(endpoint, repo, revision, token=token)
    files = hf.select_files(hf.list_files(endpoint, repo, revision, token=token), ctx.inputs["include"], repo=repo,
                            revision=revision)
    bar = ctx.progress(sum(f.size for f in files), f"download {repo}")
    return hf.download_repo(endpoint, repo, revision, dest, token=token, files=files, scratch=ctx.scratch,
                            retries=ctx.inputs["retries"], on_progress=bar.update, log=ctx.log)


def _only_file(ctx: StepContext, url: str, suffix: str) -> str:
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


__all__ = ["dataset_step"]
