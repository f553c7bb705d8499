"""A tiny random-weight Wan 2.2 text-to-video pipeline of the real architecture, saved as a folder that
`diffusers.DiffusionPipeline.from_pretrained` loads: what the diffusion engine runs on a CPU in seconds.

Wan-AI/Wan2.2-T2V-A14B-Diffusers is a `WanPipeline` of two `WanTransformer3DModel` experts (`transformer` for the
high-noise steps, `transformer_2` for the low-noise ones, split at `boundary_ratio` 0.875 of the training
timesteps), an `AutoencoderKLWan` (8x spatial and 4x temporal compression to 16 latent channels), a UMT5 text
encoder with its tokenizer, and a flow-matching UniPC scheduler. The tiny one has every part, each a few thousand
parameters: the same classes, the same latent layout (so a fixed latent has the real one's shape rule), widths
small enough that 5 frames of 32x32 take seconds on one core. Its tokenizer is a word-level one over the
corpus's words (UMT5's is a SentencePiece model of 256k pieces): the pipeline loads it with AutoTokenizer, pads to
its max_sequence_length and reads the attention mask, as it does the real one.

The same seed gives the same files (weights drawn from one seeded generator, in one order), so the same seed,
prompt and settings give the same video bytes (cmx.mlperf.backends.diffusion). torch, transformers, tokenizers and
diffusers are imported when called: the video extra brings diffusers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx.extras import require_extra

# the real model's layout, which the tiny one keeps (Wan-AI/Wan2.2-T2V-A14B-Diffusers at the revision the
# reference's README names, 5be7df9619b54f4e2667b2755bc6a756675b5cd7)
BOUNDARY_RATIO = 0.875
SCALE_SPATIAL = 8  # the VAE's: pixels per latent pixel
SCALE_TEMPORAL = 4  # frames per latent frame, after the first
LATENT_FILE = "fixed_latent.pt"  # beside the pipeline: the tiny run's fixed initial latent, as the reference's data/

# Words the tokenizer knows, beyond those of the prompts it is given: the reference's negative prompt's words
# (inference_config.yaml) and a few common ones; any other word is <unk>, which a random model minds no more.
_WORDS = ("vivid colors overexposed static blurry details subtitles style work of art painting picture still overall "
          "grayish worst quality low jpeg artifacts ugly deformed extra fingers poorly drawn hands face disfigured "
          "limbs fused image cluttered background three legs many people in the walking backwards a an the with "
          "and on at to is are cat dog person car boat city river sky water")


@dataclass(frozen=True)
class TinySizes:
    """The widths of the tiny pipeline. `latent_channels` is the VAE's z_dim and the experts' in/out channels
    (16 in the real model); the experts' head width must split into Wan's three rotary axes (a multiple of 6)."""

    latent_channels: int = 4
    vae_base: int = 8
    heads: int = 2
    head_dim: int = 12
    layers: int = 1
    ffn: int = 32
    text_dim: int = 16
    text_layers: int = 1
    text_heads: int = 2


@dataclass(frozen=True)
class TinyPipeline:
    """The folder written (`path`, which from_pretrained loads) and its fixed initial latent (`latent`), for
    `frames` frames of `height` x `width`."""

    path: Path
    latent: Path
    height: int
    width: int
    frames: int


def latent_shape(channels: int, height: int, width: int, frames: int) -> tuple[int, int, int, int, int]:
    """The initial latent's shape for one video, as WanPipeline.prepare_latents makes it (batch, channels, latent
    frames, height / 8, width / 8): (1, 16, 21, 90, 160) for the reference's 81 frames of 720x1280."""
    return (1, channels, (frames - 1) // SCALE_TEMPORAL + 1, height // SCALE_SPATIAL, width // SCALE_SPATIAL)


def make_tiny_wan(dest: Path, seed: int = 0, *, height: int = 32, width: int = 32, frames: int = 5,
                  sizes: TinySizes = TinySizes(), corpus: Sequence[str] = ()) -> TinyPipeline:
    """Write a tiny random Wan 2.2 pipeline into `dest` (created; its contents replaced), and its fixed latent for
    `frames` frames of `height` x `width`. `corpus`: prompts whose words the tokenizer knows."""
    require_extra("video", "the tiny Wan 2.2 pipeline", "diffusers")
    import torch
    from diffusers import AutoencoderKLWan, UniPCMultistepScheduler, WanPipeline, WanTransformer3DModel
    from transformers import UMT5Config, UMT5EncoderModel

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(corpus)
    torch.manual_seed(seed)
    # in this order, each from the seeded global generator: the same seed draws the same weights
    vae = AutoencoderKLWan(base_dim=sizes.vae_base, z_dim=sizes.latent_channels, num_res_blocks=1,
                           latents_mean=[0.0] * sizes.latent_channels, latents_std=[1.0] * sizes.latent_channels)
    experts = [WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=sizes.heads,
                                     attention_head_dim=sizes.head_dim, in_channels=sizes.latent_channels,
                                     out_channels=sizes.latent_channels, text_dim=sizes.text_dim, freq_dim=16,
                                     ffn_dim=sizes.ffn, num_layers=sizes.layers, cross_attn_norm=True,
                                     qk_norm="rms_norm_across_heads", rope_max_seq_len=32)
               for _ in range(2)]
    encoder = UMT5EncoderModel(UMT5Config(vocab_size=len(tokenizer), d_model=sizes.text_dim,
                                          d_kv=sizes.text_dim // sizes.text_heads, d_ff=2 * sizes.text_dim,
                                          num_layers=sizes.text_layers, num_heads=sizes.text_heads,
                                          relative_attention_num_buckets=8, relative_attention_max_distance=16,
                                          pad_token_id=0, eos_token_id=1, decoder_start_token_id=0))
    # Wan's flow-matching UniPC (the real scheduler_config.json's class and prediction type)
    scheduler = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=3.0,
                                        num_train_timesteps=1000)
    pipe = WanPipeline(tokenizer=tokenizer, text_encoder=encoder, vae=vae, scheduler=scheduler,
                       transformer=experts[0], transformer_2=experts[1], boundary_ratio=BOUNDARY_RATIO)
    pipe.save_pretrained(dest)
    generator = torch.Generator().manual_seed(seed)
    latent = torch.randn(latent_shape(sizes.latent_channels, height, width, frames), generator=generator)
    torch.save(latent, dest / LATENT_FILE)
    return TinyPipeline(dest, dest / LATENT_FILE, height, width, frames)


def _tokenizer(corpus: Sequence[str]) -> Any:  # -> transformers.PreTrainedTokenizerFast
    """A word-level tokenizer (lower-cased words and punctuation) with UMT5's specials: <pad> 0, </s> 1, <unk> 2,
    and </s> after every text, as T5's post-processor adds it."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = sorted({w for text in (*corpus, _WORDS) for w in re.findall(r"\w+|[^\w\s]", text.lower())})
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                   model_max_length=512)

