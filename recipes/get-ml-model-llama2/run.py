"""Llama 2 70B: a pinned commit from Hugging Face, your own folder used in place, or the tiny random model.

The work is in cmx.tools.huggingface (listing, pinning, checked and resumable downloads) and
cmx.mlperf.benchmarks.llama2_70b.model (what the folder must hold, the outputs), where it is unit-tested.
"""

from __future__ import annotations

from cmx.mlperf.benchmarks import model_folder
from cmx.mlperf.benchmarks.llama2_70b import model as llama
from cmx.tools import huggingface as hf


def run(ctx):
    precision = next(v for v in ("bf16", "fp16", "fp8") if v in ctx.variations)
    if "tiny" in ctx.variations:
        return llama.make_tiny(ctx.workdir / "model", precision, ctx.inputs, log=ctx.log).outputs()
    model_folder.refuse_tiny_inputs(ctx.inputs)
    if ctx.inputs["model_path"] is not None:
        folder = model_folder.check_own_folder(ctx.inputs["model_path"])
        ctx.log.info("using the model in %s in place (not copied)", folder)
        return llama.describe(folder, folder.name, "", precision, is_tiny=False, log=ctx.log).outputs()
    name = "fp8_revision" if precision == "fp8" else "revision"
    repo, revision = ctx.inputs["fp8_repo" if precision == "fp8" else "repo"], ctx.inputs[name]
    endpoint, token = ctx.inputs["endpoint"], ctx.inputs["token"]
    hf.require_commit(endpoint, repo, revision, token=token, name=name)
    listed = hf.list_files(endpoint, repo, revision, token=token)
    files = hf.select_files(listed, ctx.inputs["include"], repo=repo, revision=revision)
    llama.require_model_files([f.path for f in files], repo, revision)  # before 130 GB, not after
    bar = ctx.progress(sum(f.size for f in files), f"download {repo}")
    # into ctx.scratch, which outlives a failed attempt (the next run resumes), then into the entry
    folder = hf.download_repo(endpoint, repo, revision, ctx.workdir / "model", token=token, files=files,
                              scratch=ctx.scratch, retries=ctx.inputs["retries"], on_progress=bar.update,
                              log=ctx.log)
    return llama.describe(folder, repo, revision, precision, is_tiny=False, log=ctx.log).outputs()
