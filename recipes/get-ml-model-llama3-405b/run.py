"""Llama 3.1 405B Instruct: a pinned commit from Hugging Face, your own folder used in place, or the tiny random Llama 3.

A Llama 3.1 folder holds the same files at 8B and 405B (config.json, generation_config.json with
the three end ids, tokenizer.json), so the folder checks and outputs are llama3.1-8b's model module
(cmx.mlperf.benchmarks.llama3_1_8b.model), and the tiny model is the one it makes.
"""

from __future__ import annotations

from cmx.mlperf.benchmarks import model_folder
from cmx.mlperf.benchmarks.llama3_1_8b import model as llama
from cmx.tools import huggingface as hf


def run(ctx):
    precision = ctx.variation("precision")
    if ctx.variation("size") == "tiny":
        return llama.make_tiny(ctx.workdir / "model", precision, ctx.inputs, log=ctx.log).outputs()
    model_folder.refuse_tiny_inputs(ctx.inputs)
    if ctx.inputs["model_path"] is not None:
        folder = ctx.inputs["model_path"]
        ctx.log.info("using the model in %s in place (not copied)", folder)
        return llama.describe(folder, folder.name, "", precision, is_tiny=False, log=ctx.log).outputs()
    repo, revision = ctx.inputs["repo"], ctx.inputs["revision"]
    endpoint, token = ctx.inputs["endpoint"], ctx.inputs["token"]
    hf.require_commit(endpoint, repo, revision, token=token)
    listed = hf.list_files(endpoint, repo, revision, token=token)
    files = hf.select_files(listed, ctx.inputs["include"], repo=repo, revision=revision)
    llama.require_model_files([f.path for f in files], repo, revision)  # before 800 GB, not after
    bar = ctx.progress(sum(f.size for f in files), f"download {repo}")
    folder = hf.download_repo(endpoint, repo, revision, ctx.workdir / "model", token=token, files=files,
                              scratch=ctx.scratch, retries=ctx.inputs["retries"], on_progress=bar.update,
                              log=ctx.log)
    return llama.describe(folder, repo, revision, precision, is_tiny=False, log=ctx.log).outputs()
