"""A tiny random-weight Mixtral (MixtralForCausalLM), made locally and byte-identically from a seed.

It lets the whole mixtral-8x7b pipeline (tokenizer, vLLM, LoadGen, accuracy, submission tree) run
on any machine with no download. The weights are random, so what it writes is noise; only the
architecture and the formats are real:

- `config.json` has the keys of Mixtral-8x7B-Instruct-v0.1's: a sparse mixture of experts in
  every layer (8 local experts, 2 per token, a router `gate`, SwiGLU experts w1/w2/w3),
  grouped-query attention (a quarter as many key/value heads: 8 of 32), RoPE with theta 1e6,
  `sliding_window: null` (the v0.1 checkpoints attend over the whole context), untied
  embeddings, <s>=1 and </s>=2. Sizes are tiny, with a head size of 64, which vLLM's CPU
  attention accepts (it rejects 16; Mixtral uses 128);
- the tokenizer is Mixtral's layout: SentencePiece-style BPE with byte fallback, <unk>=0,
  <s>=1, </s>=2 and the 256 byte pieces at 3..258, "legacy" spacing. That is Llama 2's layout,
  so it is made by llama2-70b's tiny generator (reached through the registry, not imported)
  and only its tokenizer files are kept;
- weights are N(0, 0.02) matrices and unit RMSNorm weights drawn in name order from one PCG64
  generator (kit.weights), stored as float16 like Llama 2's tiny model (vLLM casts to the dtype it runs in).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cmx.errors import CmxError
from cmx.mlperf.benchmarks.kit.weights import F16, attention_shapes, decoder_shapes, write_random_weights
from cmx.mlperf.benchmarks.synthetic import (
    TinyLlamaFamily,
    check_llama_sizes,
    llama_intermediate_size,
    write_json,
)

UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
EXPERTS, EXPERTS_PER_TOKEN = 8, 2  # Mixtral-8x7B: num_local_experts, num_experts_per_tok
ROPE_THETA = 1e6  # Mixtral-8x7B-Instruct-v0.1 config.json rope_theta
MAX_POSITIONS = 32768  # its max_position_embeddings
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


@dataclass(frozen=True)
class TinyMixtral(TinyLlamaFamily):
    """A tiny model folder made by make_tiny_mixtral, and what it was made from."""

    experts: int
    experts_per_token: int

    @property
    def architecture(self) -> str:
        return "MixtralForCausalLM"


def make_tiny_mixtral(dest: Path, seed: int = 0, *, hidden_size: int = 256, layers: int = 2,
                      heads: int = 4, kv_heads: int | None = None, experts: int = EXPERTS,
                      experts_per_token: int = EXPERTS_PER_TOKEN) -> TinyMixtral:
    """Write a random-weight Mixtral and its tokenizer into the folder `dest`.

    The same arguments give byte-identical files. `kv_heads` defaults to a quarter of the heads
    (8 of 32 in Mixtral 8x7B); `hidden_size` must be `heads * 64`. The vocabulary is the tiny
    tokenizer's (4096 pieces).
    """
    kv_heads = kv_heads if kv_heads is not None else max(1, heads // 4)
    check_llama_sizes(hidden_size, layers, heads, kv_heads)
    if not 1 <= experts_per_token <= experts:
        raise CmxError(f"{experts_per_token} experts per token cannot be chosen among {experts}",
                       hint=f"give experts_per_token from 1 to experts (Mixtral: {EXPERTS_PER_TOKEN} of {EXPERTS})")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    vocab_size = _write_tokenizer(dest, seed)
    tiny = TinyMixtral(dest, seed, vocab_size, hidden_size, llama_intermediate_size(hidden_size), layers, heads,
                       kv_heads, experts, experts_per_token)
    write_json(dest / "config.json", model_config(tiny))
    write_json(dest / "generation_config.json", {"bos_token_id": BOS_ID, "eos_token_id": EOS_ID})
    write_random_weights(dest / "model.safetensors", weight_shapes(tiny), seed, F16)
    return tiny


def _write_tokenizer(dest: Path, seed: int) -> int:
    """Llama 2's tiny tokenizer files (the layout Mixtral's tokenizer has), with Mixtral's tokenizer_config;
    returns the vocabulary size."""
    from cmx.mlperf.benchmarks import benchmark_for
    from cmx.mlperf.benchmarks.kit.model import read_json

    with tempfile.TemporaryDirectory(prefix="tiny-mixtral-tok-", dir=dest) as tmp:
        # llama2-70b's tiny model: its weights are thrown away, its tokenizer kept
        made = Path(benchmark_for("llama2-70b").make_tiny_model(Path(tmp), seed))
        vocab_size = int(read_json(made / "config.json")["vocab_size"])
        for name in TOKENIZER_FILES:
            if name == "tokenizer_config.json":
                config = read_json(made / name)
                # Mixtral-8x7B-Instruct-v0.1's: no length limit of its own, no pad token, legacy spacing
                config.update({"model_max_length": 1000000000000000019884624838656, "pad_token": None,
                               "legacy": True, "clean_up_tokenization_spaces": False})
                write_json(dest / name, config)
            else:
                shutil.copyfile(made / name, dest / name)
    return vocab_size


def model_config(tiny: TinyMixtral) -> dict[str, object]:
    """The keys of Mixtral-8x7B-Instruct-v0.1's config.json, with tiny sizes."""
    return {
        "architectures": [tiny.architecture],
        "attention_dropout": 0.0,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "head_dim": tiny.head_size,
        "hidden_act": "silu",
        "hidden_size": tiny.hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": tiny.intermediate_size,
        "max_position_embeddings": MAX_POSITIONS,
        "model_type": "mixtral",
        "num_attention_heads": tiny.heads,
        "num_experts_per_tok": tiny.experts_per_token,
        "num_hidden_layers": tiny.layers,
        "num_key_value_heads": tiny.kv_heads,
        "num_local_experts": tiny.experts,
        "output_router_logits": False,
        "rms_norm_eps": 1e-05,
        "rope_theta": ROPE_THETA,
        "router_aux_loss_coef": 0.02,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "vocab_size": tiny.vocab_size,
    }


def weight_shapes(tiny: TinyMixtral) -> dict[str, tuple[int, ...]]:
    """The tensors of a MixtralForCausalLM checkpoint (Hugging Face names) and their shapes."""
    h, f = tiny.hidden_size, tiny.intermediate_size

    def layer(i: int) -> dict[str, tuple[int, ...]]:
        experts = {f"block_sparse_moe.experts.{e}.{w}.weight": shape for e in range(tiny.experts)
                   for w, shape in (("w1", (f, h)), ("w2", (h, f)), ("w3", (f, h)))}
        return {**attention_shapes(h, h, tiny.kv_heads * tiny.head_size),
                "block_sparse_moe.gate.weight": (tiny.experts, h), **experts}

    return decoder_shapes(tiny.vocab_size, h, tiny.layers, layer)


__all__ = ["BOS_ID", "EOS_ID", "EXPERTS", "EXPERTS_PER_TOKEN", "TinyMixtral", "make_tiny_mixtral", "model_config",
           "weight_shapes"]
