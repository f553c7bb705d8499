"""The Wan2.2-T2V-A14B pipeline folder wan-2.2-t2v-a14b runs: what it must hold, and what its model recipe reports.

The reference's model (text_to_video/wan-2.2-t2v-a14b/README.md in mlcommons/inference at b66003e, line 73):
Wan-AI/Wan2.2-T2V-A14B-Diffusers at commit 5be7df9619b54f4e2667b2755bc6a756675b5cd7, loaded by run_inference.py as
a diffusers `WanPipeline` in bfloat16 (its VAE in float32). It is a diffusers pipeline folder, not a transformers
checkpoint: model_index.json names the pipeline's class and its parts, each in a subfolder of its own (the two
experts transformer/ and transformer_2/, the UMT5 text encoder text_encoder/ and its tokenizer/, the Wan VAE vae/,
the flow-matching scheduler scheduler/), so the folder has no config.json of its own and nothing ends at an
end-of-sequence id: a video has no tokens. The id the recipe reports as eos_token_id is the text encoder's (UMT5's
</s>, which the tokenizer appends to each prompt), read from text_encoder/config.json (UMT5's default, 1, where
it names none).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from cmx.mlperf.backends.diffusion import DTYPES
from cmx.mlperf.benchmarks.kit import model as kit

MODEL_REPO = "Wan-AI/Wan2.2-T2V-A14B-Diffusers"
# the reference's README.md (mlcommons/inference b66003e, text_to_video/wan-2.2-t2v-a14b/README.md line 73);
# download_model.py there downloads the repository's main branch, which the README's commit pins
REVISION = "5be7df9619b54f4e2667b2755bc6a756675b5cd7"
PIPELINE = "WanPipeline"  # model_index.json's _class_name
# beside model_index.json, one file of each part the pipeline loads: the folders `from_pretrained` reads
FILES = kit.ModelFiles(tokenizer=(("transformer/config.json",), ("transformer_2/config.json",),
                                  ("text_encoder/config.json",), ("tokenizer/tokenizer_config.json",),
                                  ("vae/config.json",), ("scheduler/scheduler_config.json",)),
                       hint=f"give the whole pipeline folder of {MODEL_REPO} (model_index.json, transformer/, "
                            "transformer_2/, text_encoder/, tokenizer/, vae/, scheduler/)",
                       index=kit.PIPELINE_INDEX)
# The repository's bytes, computed from parameter counts (the Hub's listing was not reachable from here): each
# expert has 14,288,491,584 parameters (WanTransformer3DModel of the repository's config, 40 layers of width 5120,
# counted by diffusers on the meta device) stored in float32 (12 shards of at most 5 GB each: 57.2 GB), the UMT5-XXL
# encoder about 5.68 billion (24 layers of width 4096, a gated FFN of 10240, a 256,384-word embedding) in bfloat16
# (3 shards: 11.4 GB), the Wan VAE 126,892,531 in float32 (0.5 GB): about 126 GB in all.
SIZE = 2 * 14_288_491_584 * 4 + 5_680_000_000 * 2 + 126_892_531 * 4
UMT5_EOS = 1  # </s>: UMT5Config's default eos_token_id, what transformers reads from a config that names none
CLOSED = f"wan-2.2-t2v-a14b's closed division needs {MODEL_REPO}"


def describe(folder: Path, name: str, revision: str, precision: str | None, *, is_tiny: bool,
             log: logging.Logger | None = None) -> kit.ModelFolder:
    """The pipeline in `folder`, read from its model_index.json; it must hold FILES.

    The dtype is the precision's (bf16, the reference's; fp16 or fp32, the diffusion engine's others). A pipeline
    class other than WanPipeline is accepted, with a warning to `log`; a folder without model_index.json (a
    transformers checkpoint) is refused. `architecture` is the pipeline's class, what the diffusion engine loads.
    """
    folder = Path(folder)
    if not (folder / kit.PIPELINE_INDEX).is_file():
        raise kit.ModelError(f"{folder} has no {kit.PIPELINE_INDEX}: it is not a diffusers pipeline folder",
                             hint=FILES.hint)
    index = kit.read_json(folder / kit.PIPELINE_INDEX)
    lacking = FILES.missing([n for group in FILES.tokenizer for n in group if (folder / n).is_file()])
    if lacking is not None:
        raise kit.ModelError(f"{folder} has no {lacking}", hint=FILES.hint)
    pipeline = index.get("_class_name")
    pipeline = pipeline if isinstance(pipeline, str) and pipeline else "unknown"
    if pipeline != PIPELINE:
        kit.warn_other_model(log, folder, f"{pipeline!r} pipeline", f"{PIPELINE} (Wan 2.2's two experts)", CLOSED)
    precision = precision or "bf16"
    if precision not in DTYPES:
        raise kit.ModelError(f"the Wan 2.2 pipeline does not run in {precision}",
                             hint=f"one of {', '.join('_' + p for p in DTYPES)} (_bf16 is the reference's)")
    # checked after a download too: a config without the id must not refuse 126 GB fetched, so UMT5's default
    ends = kit.end_ids(kit.read_json(folder / "text_encoder" / "config.json"), {}) or (UMT5_EOS,)
    return kit.ModelFolder(folder, name, revision, DTYPES[precision], precision, ends[0], is_tiny,
                           architecture=pipeline, reports=("architecture",))


def make_tiny_model(dest: Path, seed: int = 0, sizes: Mapping[str, int] | None = None) -> Path:
    """The tiny random pipeline in `dest` and its fixed latent (tiny.LATENT_FILE) for `frames` frames of `height` x
    `width`: the shape the app's _tiny generates (its video_* inputs), which WanPipeline's rules bound."""
    from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.tiny import TinySizes, make_tiny_wan

    given = dict(sizes or {})
    height, width, frames = given.pop("height", 64), given.pop("width", 64), given.pop("frames", 5)
    if height % 16 or width % 16 or min(height, width) < 16:
        raise kit.ModelError(f"a tiny Wan of {width}x{height} has no latent WanPipeline can take",
                             hint="width and height are multiples of 16 (default 64)")
    if frames < 1 or (frames - 1) % 4:
        raise kit.ModelError(f"a tiny Wan of {frames} frames has no latent WanPipeline can take",
                             hint="4k + 1 frames (default 5)")
    return make_tiny_wan(dest, seed, height=height, width=width, frames=frames, sizes=TinySizes(**given)).path


# the experts' depth and heads are inputs (each head 12 wide, Wan's three rotary axes); the latent's shape is the
# app's _tiny video; the other widths are fixed and small (tiny.TinySizes)
TINY = kit.TinyModel("Wan 2.2 text-to-video (two experts)", "tiny-wan-2.2-t2v-random-seed{seed}", make_tiny_model,
                     sizes={"seed": 0, "layers": 1, "heads": 2, "height": 64, "width": 64, "frames": 5},
                     fixed={"hidden_size": "the tiny Wan's widths are fixed (heads of 12, a text width of 16): give "
                                           "layers or heads"},
                     precisions=("bf16", "fp16", "fp32"))
MODEL = kit.ModelSpec(SIZE, TINY, FILES, describe)
