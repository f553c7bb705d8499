"""openai/gpt-oss-120b: the reference's commit from Hugging Face, your own folder used in place, or the tiny random GptOss."""

from __future__ import annotations

from cmx.mlperf.benchmarks.gpt_oss_120b import model as gpt_oss
from cmx.tools import huggingface as hf


def run(ctx):
    if ctx.variation("size") == "tiny":
        return gpt_oss.make_tiny(ctx.workdir / "model", ctx.inputs, log=ctx.log).outputs()
    gpt_oss.refuse_tiny_inputs(ctx.inputs)
    if ctx.inputs["model_path"] is not None:
        folder = ctx.inputs["model_path"]
        ctx.log.info("using the model in %s in place (not copied)", folder)
        return gpt_oss.describe(folder, folder.name, "", is_tiny=False, log=ctx.log).outputs()
    repo, revision = ctx.inputs["repo"], ctx.inputs["revision"]
    endpoint, token = ctx.inputs["endpoint"], ctx.inputs["token"]
    hf.require_commit(endpoint, repo, revision, token=token)
    listed = hf.list_files(endpoint, repo, revision, token=token)
    files = hf.select_files(listed, ctx.inputs["include"], repo=repo, revision=revision)
    gpt_oss.require_model_files([f.path for f in files], repo, revision)
    bar = ctx.progress(sum(f.size for f in files), f"download {repo}")
    folder = hf.download_repo(endpoint, repo, revision, ctx.workdir / "model", token=token, files=files,
                              scratch=ctx.scratch, retries=ctx.inputs["retries"], on_progress=bar.update,
                              log=ctx.log)
    return gpt_oss.describe(folder, repo, revision, is_tiny=False, log=ctx.log).outputs()
