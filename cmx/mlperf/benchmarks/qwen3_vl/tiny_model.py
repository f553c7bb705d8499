"""A tiny random-weight Qwen3VLMoeForConditionalGeneration, made locally and byte-identically from a seed.

It lets the qwen3-vl pipeline (the chat request with its image, vLLM's Qwen3-VL processor and
model, LoadGen, the scorer, the submission tree) run on any machine with no download. The weights
are random, so the replies are noise and the F1 is 0; only the architecture and the formats are real:

- `config.json` has the keys of Qwen3-VL-235B-A22B-Instruct's: a text model whose every layer is a
  sparse mixture of experts (a router `gate`, fused SwiGLU experts, the top-k weights renormalised:
  `norm_topk_prob`), grouped-query attention with per-head RMSNorms on queries and keys, a head size
  of 64 apart from the hidden size (vLLM's CPU attention needs 64; the real one is 128, with queries
  twice as wide as the hidden state, as here), interleaved multimodal RoPE (`mrope_section` splits the
  head's 32 frequencies 12/10/10 as the real 24/20/20 splits 64), untied embeddings; and a vision
  tower of the real kind (16-pixel patches over 2 frames, 2x2 patch merging, a learned 48x48 position
  grid, "deepstack" mergers that feed features of inner vision layers into the first text layers),
  all at toy widths and depths;
- the weights are stored as the released checkpoint stores them, in bfloat16, under its names:
  `model.language_model.*`, `model.visual.*`, `lm_head.weight`, with each layer's experts fused as
  `mlp.experts.gate_up_proj` (experts, hidden, 2 x moe_intermediate) and `mlp.experts.down_proj`
  (experts, moe_intermediate, hidden). That is the transpose of what transformers 5 holds in memory
  (its conversion mapping transposes on load; vLLM's loader does too: `is_fused_checkpoint_transposed`);
  2 x moe_intermediate differs from hidden (3/4 of it, as 2 x 1,536 is of 4,096), so a checkpoint in
  the other layout cannot load by chance;
- the tokenizer is a byte-level BPE with Qwen's pre-tokenizer regex and NFC normaliser, trained here
  on generated text, followed by Qwen's special tokens in Qwen's order (<|endoftext|>, <|im_start|>,
  <|im_end|>, ..., <|vision_start|>, <|vision_end|>, <|vision_pad|>, <|image_pad|>, <|video_pad|>);
  tokenizer_config.json carries a chat template of Qwen3-VL's shape (ChatML turns, an image part
  rendered as <|vision_start|><|image_pad|><|vision_end|>), and chat_template.json the same for
  AutoProcessor; preprocessor_config.json holds Qwen3-VL's image processor settings (what vLLM builds its
  image processor from: 16-pixel patches, not the class defaults' 14), video_preprocessor_config.json
  its video processor's, as the release ships them; generation_config.json has the real sampling
  defaults (temperature 0.7, top_p 0.8, top_k 20) and end ids (<|im_end|>, <|endoftext|>), which the
  benchmark relies on, since its requests set none;
- replies are short. The benchmark sends no max_tokens, so a model that never ends would write until
  the server's max_model_len. Every token embedding carries 1.0 in its first dimension, a direction
  the residual stream and the final norm keep; <|im_end|>'s row of the LM head reads that dimension
  alone, the other rows never do, so <|im_end|>'s logit is about the best random one at every step:
  sampled with the defaults it ends a reply after about a dozen tokens. The LM head rows of the other
  special tokens are zero, so that their logits never win and the model writes text.

Nothing here imports torch or transformers (slow to import).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.kit.tokenizer import added_token, byte_level_document, train_byte_level_bpe
from cmx.mlperf.benchmarks.kit.weights import BF16, attention_shapes, decoder_shapes, write_random_weights
from cmx.mlperf.benchmarks.synthetic import HEAD_SIZE, Lexicon, TinyModelFolder, write_json, write_text

ARCHITECTURE = "Qwen3VLMoeForConditionalGeneration"
# Qwen2's split (Qwen3-VL's tokenizer.json keeps it), applied before the byte-level BPE's merges
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD = "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"
# Qwen's special tokens after the text ones, in its order (the real <|endoftext|> is 151643, <|image_pad|> 151655)
SPECIALS = (ENDOFTEXT, IM_START, IM_END, "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
            "<|box_end|>", "<|quad_start|>", "<|quad_end|>", VISION_START, VISION_END, "<|vision_pad|>", IMAGE_PAD,
            VIDEO_PAD)
EXPERTS_PER_TOKEN = 2  # the real model routes 8 of 128
ROPE_THETA = 5_000_000  # Qwen3-VL-235B-A22B-Instruct text_config rope_theta
MROPE_SECTION = (12, 10, 10)  # temporal, height, width frequencies: HEAD_SIZE / 2 in all, as 24/20/20 of 128 / 2
# the reference's server bound (--max-model-len 32768): a server started without one gets the same context
MAX_POSITIONS = 32768  # (the real model's max_position_embeddings is 262,144)
# the vision tower: the real patching and merging, toy widths; its output feeds the text model (out_hidden_size)
PATCH_SIZE, TEMPORAL_PATCH_SIZE, MERGE_SIZE, CHANNELS = 16, 2, 2, 3
VISION_HIDDEN, VISION_HEADS, VISION_INTERMEDIATE, VISION_DEPTH = 128, 2, 256, 3
DEEPSTACK_LAYERS = (0, 1)  # vision layers whose features are added to text layers 0 and 1 (the real: 8, 16, 24 of 27)
POSITION_EMBEDDINGS = 2304  # the learned 48x48 grid of positions, interpolated to each image's (the real one's)
IMAGE_MEAN = IMAGE_STD = (0.5, 0.5, 0.5)
END_WEIGHT = 0.12  # <|im_end|>'s LM-head weight on the constant first dimension: a logit of about 0.8


@dataclass(frozen=True)
class TinyQwen3VL(TinyModelFolder):
    """A tiny Qwen3-VL-MoE folder made by make_tiny_qwen3_vl, and what it was made from."""

    layers: int
    heads: int
    experts: int

    @property
    def kv_heads(self) -> int:
        return self.heads // 2

    @property
    def moe_intermediate_size(self) -> int:
        """3/8 of the hidden size (1,536 of 4,096 in the real model): 2 x it is never the hidden size."""
        return self.hidden_size * 3 // 8

    @property
    def endoftext_id(self) -> int:
        return self.vocab_size - len(SPECIALS)

    def special_id(self, token: str) -> int:
        return self.endoftext_id + SPECIALS.index(token)

    @property
    def end_ids(self) -> tuple[int, int]:
        """generation_config.json's eos_token_id: <|im_end|>, then <|endoftext|>."""
        return self.special_id(IM_END), self.endoftext_id


def make_tiny_qwen3_vl(dest: Path, seed: int = 0, *, vocab_size: int = 4096, hidden_size: int = 128, layers: int = 2,
                       heads: int = 4, experts: int = 8) -> TinyQwen3VL:
    """Write a random-weight Qwen3-VL-MoE, its tokenizer and its processor's settings into the folder `dest`.

    The same arguments give byte-identical files. `heads` query heads of 64 share `heads / 2` key/value
    heads; `vocab_size` counts the text tokens and Qwen's 14 special ones; each token is routed to 2 of
    `experts`.
    """
    _check_sizes(vocab_size, hidden_size, layers, heads, experts)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    tiny = TinyQwen3VL(dest, seed, vocab_size, hidden_size, layers, heads, experts)
    _write_tokenizer(tiny)
    write_json(dest / "config.json", model_config(tiny))
    write_json(dest / "generation_config.json", _generation_config(tiny))
    write_json(dest / "preprocessor_config.json", _processor_config(65536, 16777216, "image_processor_type",
                                                                    "Qwen2VLImageProcessorFast"))
    write_json(dest / "video_preprocessor_config.json", _processor_config(4096, 25165824, "video_processor_type",
                                                                          "Qwen3VLVideoProcessor"))
    write_random_weights(dest / "model.safetensors", weight_shapes(tiny), seed, BF16, edits=_edits(tiny))
    return tiny


def _check_sizes(vocab_size: int, hidden_size: int, layers: int, heads: int, experts: int) -> None:
    if heads < 2 or heads % 2:
        raise CmxError(f"a tiny Qwen3-VL needs an even number of attention heads, not {heads}",
                       hint="give heads = 2, 4, 6...: they share heads / 2 key/value heads")
    if hidden_size < 64 or hidden_size % 8:
        raise CmxError(f"a tiny Qwen3-VL cannot have hidden_size {hidden_size}",
                       hint="give a multiple of 8 from 64 (its experts are 3/8 as wide)")
    if layers < len(DEEPSTACK_LAYERS):
        raise CmxError(f"a tiny Qwen3-VL needs {len(DEEPSTACK_LAYERS)} or more layers, not {layers}",
                       hint=f"its vision tower feeds the first {len(DEEPSTACK_LAYERS)} text layers")
    if experts < EXPERTS_PER_TOKEN:
        raise CmxError(f"{EXPERTS_PER_TOKEN} experts per token cannot be chosen among {experts}",
                       hint=f"give experts >= {EXPERTS_PER_TOKEN} (the real model has 128)")
    if not 256 + 64 + len(SPECIALS) <= vocab_size <= 8192:
        raise CmxError(f"vocab_size {vocab_size} is out of range for a tiny Qwen3-VL tokenizer",
                       hint=f"give 256 byte tokens, some merges and the {len(SPECIALS)} specials: "
                            f"{256 + 64 + len(SPECIALS)} to 8192")


def model_config(tiny: TinyQwen3VL) -> dict[str, object]:
    """The keys of Qwen3-VL-235B-A22B-Instruct's config.json, with tiny sizes (the vision config's model_type is the
    release's `qwen3_vl_moe`; transformers reads it as its vision config)."""
    text = {
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": tiny.endoftext_id,
        "decoder_sparse_step": 1, "dtype": "bfloat16", "eos_token_id": tiny.special_id(IM_END),
        "head_dim": HEAD_SIZE, "hidden_act": "silu", "hidden_size": tiny.hidden_size, "initializer_range": 0.02,
        "intermediate_size": 3 * tiny.hidden_size, "max_position_embeddings": MAX_POSITIONS, "mlp_only_layers": [],
        "model_type": "qwen3_vl_moe_text", "moe_intermediate_size": tiny.moe_intermediate_size,
        "norm_topk_prob": True, "num_attention_heads": tiny.heads, "num_experts": tiny.experts,
        "num_experts_per_tok": EXPERTS_PER_TOKEN, "num_hidden_layers": tiny.layers,
        "num_key_value_heads": tiny.kv_heads, "rms_norm_eps": 1e-06,
        "rope_scaling": {"mrope_interleaved": True, "mrope_section": list(MROPE_SECTION), "rope_type": "default"},
        "rope_theta": ROPE_THETA, "use_cache": True, "vocab_size": tiny.vocab_size,
    }
    vision = {
        "deepstack_visual_indexes": list(DEEPSTACK_LAYERS), "depth": VISION_DEPTH, "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": VISION_HIDDEN, "in_channels": CHANNELS, "initializer_range": 0.02,
        "intermediate_size": VISION_INTERMEDIATE, "model_type": "qwen3_vl_moe", "num_heads": VISION_HEADS,
        "num_position_embeddings": POSITION_EMBEDDINGS, "out_hidden_size": tiny.hidden_size,
        "patch_size": PATCH_SIZE, "spatial_merge_size": MERGE_SIZE, "temporal_patch_size": TEMPORAL_PATCH_SIZE,
    }
    return {
        "architectures": [ARCHITECTURE], "image_token_id": tiny.special_id(IMAGE_PAD), "model_type": "qwen3_vl_moe",
        "text_config": text, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "video_token_id": tiny.special_id(VIDEO_PAD), "vision_config": vision,
        "vision_end_token_id": tiny.special_id(VISION_END), "vision_start_token_id": tiny.special_id(VISION_START),
    }


def weight_shapes(tiny: TinyQwen3VL) -> dict[str, tuple[int, ...]]:
    """The tensors of the released checkpoint (its names, its fused-expert layout) and their shapes."""
    h, moe = tiny.hidden_size, tiny.moe_intermediate_size

    def layer(i: int) -> dict[str, tuple[int, ...]]:
        return {**attention_shapes(h, tiny.heads * HEAD_SIZE, tiny.kv_heads * HEAD_SIZE),
                "self_attn.q_norm.weight": (HEAD_SIZE,), "self_attn.k_norm.weight": (HEAD_SIZE,),
                "mlp.gate.weight": (tiny.experts, h),
                "mlp.experts.gate_up_proj": (tiny.experts, h, 2 * moe),  # the transpose of transformers' (E, 2I, H)
                "mlp.experts.down_proj": (tiny.experts, moe, h)}

    text = decoder_shapes(tiny.vocab_size, h, tiny.layers, layer)
    shapes = {("model.language_model." + name.removeprefix("model.") if name.startswith("model.") else name): shape
              for name, shape in text.items()}
    shapes.update(vision_shapes(h))
    return shapes


def vision_shapes(out_hidden: int) -> dict[str, tuple[int, ...]]:
    """The vision tower's tensors under `model.visual.`: the patch embedding (a 3-D convolution over 2 frames of
    16x16 pixels), the position grid, the blocks (LayerNorms, fused qkv), the merger and the deepstack mergers."""
    d, merged = VISION_HIDDEN, VISION_HIDDEN * MERGE_SIZE ** 2
    shapes: dict[str, tuple[int, ...]] = {
        "patch_embed.proj.weight": (d, CHANNELS, TEMPORAL_PATCH_SIZE, PATCH_SIZE, PATCH_SIZE),
        "patch_embed.proj.bias": (d,), "pos_embed.weight": (POSITION_EMBEDDINGS, d)}
    for i in range(VISION_DEPTH):
        p = f"blocks.{i}."
        shapes.update({p + "norm1.weight": (d,), p + "norm1.bias": (d,), p + "norm2.weight": (d,),
                       p + "norm2.bias": (d,), p + "attn.qkv.weight": (3 * d, d), p + "attn.qkv.bias": (3 * d,),
                       p + "attn.proj.weight": (d, d), p + "attn.proj.bias": (d,),
                       p + "mlp.linear_fc1.weight": (VISION_INTERMEDIATE, d),
                       p + "mlp.linear_fc1.bias": (VISION_INTERMEDIATE,),
                       p + "mlp.linear_fc2.weight": (d, VISION_INTERMEDIATE), p + "mlp.linear_fc2.bias": (d,)})
    # the merger normalises each patch before merging 2x2 of them; the deepstack mergers normalise the merged ones
    for p, norm in (("merger.", d), *((f"deepstack_merger_list.{j}.", merged) for j in range(len(DEEPSTACK_LAYERS)))):
        shapes.update({p + "norm.weight": (norm,), p + "norm.bias": (norm,),
                       p + "linear_fc1.weight": (merged, merged), p + "linear_fc1.bias": (merged,),
                       p + "linear_fc2.weight": (out_hidden, merged), p + "linear_fc2.bias": (out_hidden,)})
    return {"model.visual." + name: shape for name, shape in shapes.items()}


def _edits(tiny: TinyQwen3VL) -> dict[str, Callable[[np.ndarray], None]]:
    """The values that are not N(0, 0.02) draws: unit LayerNorm scales in the vision blocks, the constant first
    dimension of the token embeddings, and the LM head's rows of the special tokens (see the module docstring)."""
    end = tiny.special_id(IM_END)

    def constant_first_dimension(embeddings: np.ndarray) -> None:
        embeddings[:, 0] = 1.0

    def shape_lm_head(head: np.ndarray) -> None:
        head[:, 0] = 0.0
        head[tiny.endoftext_id:] = 0.0
        head[end, 0] = END_WEIGHT

    def unit(scale: np.ndarray) -> None:
        scale[:] = 1.0

    edits: dict[str, Callable[[np.ndarray], None]] = {
        "model.language_model.embed_tokens.weight": constant_first_dimension, "lm_head.weight": shape_lm_head}
    edits.update({f"model.visual.blocks.{i}.{norm}.weight": unit for i in range(VISION_DEPTH)
                  for norm in ("norm1", "norm2")})
    return edits


def _generation_config(tiny: TinyQwen3VL) -> dict[str, object]:
    """Qwen3-VL-235B-A22B-Instruct's generation_config.json: sampling on, temperature 0.7, top_p 0.8, top_k 20, no
    repetition penalty; it ends at <|im_end|> or <|endoftext|>."""
    return {"bos_token_id": tiny.endoftext_id, "do_sample": True, "eos_token_id": list(tiny.end_ids),
            "pad_token_id": tiny.endoftext_id, "repetition_penalty": 1.0, "temperature": 0.7, "top_k": 20,
            "top_p": 0.8}


def _processor_config(min_pixels: int, max_pixels: int, kind: str, name: str) -> dict[str, object]:
    """Qwen3-VL's image (or video) processor settings: images resized to whole 32-pixel merged patches, between
    `min_pixels` and `max_pixels`, and scaled to [-1, 1]."""
    return {"image_mean": list(IMAGE_MEAN), "image_std": list(IMAGE_STD), kind: name, "merge_size": MERGE_SIZE,
            "patch_size": PATCH_SIZE, "processor_class": "Qwen3VLProcessor",
            "size": {"longest_edge": max_pixels, "shortest_edge": min_pixels},
            "temporal_patch_size": TEMPORAL_PATCH_SIZE}


# Qwen3-VL's turn format, written here: ChatML turns whose content is a string or a list of parts (an image part
# as the vision markers around one <|image_pad|>, which the processor widens to the image's tokens; a text part
# as it is), then the assistant's turn opened when a reply is wanted
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] in ('image', 'image_url') or 'image' in part or 'image_url' in part -%}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] in ('video', 'video_url') or 'video' in part -%}"
    "{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    "{%- elif 'text' in part -%}{{- part['text'] -}}"
    "{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def _write_tokenizer(tiny: TinyQwen3VL) -> None:
    first = tiny.endoftext_id
    specials = [(first + i, token) for i, token in enumerate(SPECIALS)]
    trained = train_byte_level_bpe(_corpus(tiny.seed), first, SPLIT_PATTERN)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    document = byte_level_document(trained, SPLIT_PATTERN, specials, byte_level)
    document["normalizer"] = {"type": "NFC"}  # as Qwen's tokenizer.json
    model = document["model"]
    assert isinstance(model, dict)
    dest = tiny.path
    write_text(dest / "tokenizer.json", json.dumps(document, ensure_ascii=False, indent=2))
    write_json(dest / "vocab.json", model["vocab"])
    write_text(dest / "merges.txt", "#version: 0.2\n" + "".join(" ".join(m) + "\n" for m in model["merges"]))
    write_json(dest / "tokenizer_config.json", {
        "add_prefix_space": False,
        "added_tokens_decoder": {str(i): {**added_token(t), "special": True} for i, t in specials},
        "additional_special_tokens": list(SPECIALS[1:]), "bos_token": None, "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False, "eos_token": IM_END, "errors": "replace", "model_max_length": 262144,
        "pad_token": ENDOFTEXT, "processor_class": "Qwen3VLProcessor", "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer", "unk_token": None})
    # the processor's copy: AutoProcessor reads its template from chat_template.json, not from the tokenizer's config
    write_json(dest / "chat_template.json", {"chat_template": CHAT_TEMPLATE})


def _corpus(seed: int) -> list[str]:
    """Generated English, with the JSON and category paths the benchmark's prompts and replies are made of."""
    rng = np.random.Generator(np.random.PCG64([seed, 21]))
    texts = Lexicon.shared().texts(rng, rng.integers(8, 60, size=3000))
    extras = ['{"category": "Home & Garden > Kitchen > Cookware", "brand": "acme", "is_secondhand": false}',
              "The following are the possible product categories:\n```json\n['Apparel & Accessories > Shoes']\n```\n"]
    return [*texts, *(extras * 40)]


__all__ = ["ARCHITECTURE", "CHAT_TEMPLATE", "SPECIALS", "TinyQwen3VL", "make_tiny_qwen3_vl", "model_config",
           "vision_shapes", "weight_shapes"]
