"""Mixtral-8x7B-Instruct-v0.1: the reference's commit from Hugging Face, your own folder used in place, or the tiny random Mixtral.

The work is in cmx.tools.huggingface (listing, pinning, checked and resumable downloads) and
cmx.mlperf.benchmarks.mixtral_8x7b.model (what the folder must hold, the outputs), where it is unit-tested.
"""

from __future__ import annotations

from cmx.mlperf.benchmarks import model_folder
from cmx.mlperf.benchmarks.mixtral_8x7b import model as mixtral
from cmx.tools import huggingface as hf


def run(ctx):
    precision = ctx.variation("precision")
    if ctx.variation("size") == "tiny":
        return mixtral.make_tiny(ctx.workdir / "model", precision, ctx.inputs, log=ctx.log).outputs()
    model_folder.refuse_tiny_inputs(ctx.inputs)
    if ctx.inputs["model_path"] is not None:
        folder = model_folder.check_own_folder(ctx.inputs["model_path"])
        ctx.log.info("using the model in %s in place (not copied)", folder)
        return mixtral.describe(folder, folder.name, "", precision, is_tiny=False, log=ctx.log).outputs()
    repo, revision = ctx.inputs["repo"], ctx.inputs["revision"]
    endpoint, token = ctx.inputs["endpoint"], ctx.inputs["token"]
    hf.require_commit(endpoint, repo, revision, token=token)
    listed = hf.list_files(endpoint, repo, revision, token=token)
    files = hf.select_files(listed, ctx.inputs["include"], repo=repo, revision=revision)
    mixtral.require_model_files([f.path for f in files], repo, revision)  # before 93 GB, not after
    bar = ctx.progress(sum(f.size for f in files), f"download {repo}")
    # into ctx.scratch, which outlives a failed attempt (the next run resumes), then into the entry
    folder = hf.download_repo(endpoint, repo, revision, ctx.workdir / "model", token=token, files=files,
                              scratch=ctx.scratch, retries=ctx.inputs["retries"], on_progress=bar.update,
                              log=ctx.log)
    return mixtral.describe(folder, repo, revision, precision, is_tiny=False, log=ctx.log).outputs()
