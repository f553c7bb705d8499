"""The one get-ml-model sequence: a benchmark's tiny model, a user's folder in place, or a pinned Hugging Face commit.

A recipe's run.py is `return get_model(ctx, benchmark_for("llama2-70b"))`. The work is in
cmx.tools.huggingface (pinning, listing, checked and resumable downloads) and in the benchmark's
model side (the Protocol's make_tiny, refuse_tiny_inputs, require_model_files, describe).
The recipe's inputs name the rest: repo, revision, include, endpoint, token, retries, model_path,
the tiny sizes; and, for a precision with a checkpoint of its own (llama2-70b's fp8),
`<precision>_repo` and `<precision>_revision`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cmx.mlperf.benchmarks.kit.model import check_own_folder
from cmx.tools import huggingface as hf

if TYPE_CHECKING:
    from cmx.execute.context import StepContext
    from cmx.mlperf.benchmarks.base import Benchmark


def get_model(ctx: StepContext, bench: Benchmark) -> dict[str, object]:
    """The model recipe's outputs: the tiny model made (`_tiny`), the folder `model_path` described in place, or
    `repo` at the commit `revision` downloaded into the cache entry and described."""
    precision = _precision(ctx)
    if ctx.variation("size") == "tiny":
        return bench.make_tiny(ctx.workdir / "model", precision, ctx.inputs, log=ctx.log).outputs()
    bench.refuse_tiny_inputs(ctx.inputs)
    if ctx.inputs["model_path"] is not None:
        folder = check_own_folder(ctx.inputs["model_path"])
        ctx.log.info("using the model in %s in place (not copied)", folder)
        return bench.describe(folder, folder.name, "", precision, is_tiny=False, log=ctx.log).outputs()
    own = f"{precision}_" if precision is not None and f"{precision}_repo" in ctx.inputs else ""
    repo, revision = ctx.inputs[own + "repo"], ctx.inputs[own + "revision"]
    endpoint, token = ctx.inputs["endpoint"], ctx.inputs["token"]
    hf.require_commit(endpoint, repo, revision, token=token, name=own + "revision")
    listed = hf.list_files(endpoint, repo, revision, token=token)
    files = hf.select_files(listed, ctx.inputs["include"], repo=repo, revision=revision)
    bench.require_model_files([f.path for f in files], repo, revision)  # before the weights, not after
    bar = ctx.progress(sum(f.size for f in files), f"download {repo}")
    # into ctx.scratch, which outlives a failed attempt (the next run resumes), then into the entry
    folder = hf.download_repo(endpoint, repo, revision, ctx.workdir / "model", token=token, files=files,
                              scratch=ctx.scratch, retries=ctx.inputs["retries"], on_progress=bar.update,
                              log=ctx.log)
    return bench.describe(folder, repo, revision, precision, is_tiny=False, log=ctx.log).outputs()


def _precision(ctx: StepContext) -> str | None:
    """The recipe's precision variation (bf16, fp16, fp8); None for a recipe without that group (deepseek-r1 and
    gpt-oss-120b run the checkpoint's own format)."""
    try:
        return ctx.variation("precision")
    except KeyError:
        return None
