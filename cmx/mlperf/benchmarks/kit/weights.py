"""The one writer of a tiny model's random weights: seeded N(0, 0.02) tensors in a safetensors file, byte-identical.

Every tiny generator names its tensors and their shapes and calls `write_random_weights`. The
tensors are filled in name order from one PCG64 generator (its streams are the same on every
platform): a name ending in `norm.weight` gets ones (an RMSNorm that passes its input), one ending
in `bias` zeros (no draw), every other one N(0, 0.02) draws in float32. They are stored as F16,
F32 or BF16 (numpy has no bfloat16: its bits are rounded here, to nearest even). The file is
written here, not by safetensors' numpy API, which cannot write bfloat16; for one dtype the bytes
are the ones `safetensors.numpy.save` writes (tensors in name order, the JSON header padded with
spaces to 8 bytes).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from cmx.errors import CmxError

F16, F32, BF16 = "F16", "F32", "BF16"
_SCALE = np.float32(0.02)  # the initializer_range of every checkpoint the tiny models imitate


def decoder_shapes(vocab_size: int, hidden: int, layers: int,
                   layer: Callable[[int], Mapping[str, tuple[int, ...]]]) -> dict[str, tuple[int, ...]]:
    """A decoder checkpoint's tensors (Hugging Face names) and shapes: the embeddings, the final norm and the LM
    head, then per layer its two RMSNorms and what `layer(i)` names below `model.layers.{i}.`."""
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab_size, hidden),
                                          "model.norm.weight": (hidden,), "lm_head.weight": (vocab_size, hidden)}
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (hidden,), p + "post_attention_layernorm.weight": (hidden,)})
        shapes.update({p + name: shape for name, shape in layer(i).items()})
    return shapes


def attention_shapes(hidden: int, q: int, kv: int, *, bias: bool = False) -> dict[str, tuple[int, ...]]:
    """self_attn's q, k, v and o projections (`q` and `kv` wide), with their biases when `bias`."""
    shapes: dict[str, tuple[int, ...]] = {
        "self_attn.q_proj.weight": (q, hidden), "self_attn.k_proj.weight": (kv, hidden),
        "self_attn.v_proj.weight": (kv, hidden), "self_attn.o_proj.weight": (hidden, q)}
    if bias:
        shapes.update({"self_attn.q_proj.bias": (q,), "self_attn.k_proj.bias": (kv,), "self_attn.v_proj.bias": (kv,),
                       "self_attn.o_proj.bias": (hidden,)})
    return shapes


def swiglu_shapes(prefix: str, hidden: int, width: int) -> dict[str, tuple[int, ...]]:
    """A SwiGLU MLP's gate, up and down projections below `prefix` (mlp., mlp.experts.3.)."""
    return {prefix + "gate_proj.weight": (width, hidden), prefix + "up_proj.weight": (width, hidden),
            prefix + "down_proj.weight": (hidden, width)}


def write_random_weights(path: Path, shapes: Mapping[str, tuple[int, ...]], seed: int, dtype: str, *,
                         dtypes: Mapping[str, str] | None = None,
                         edits: Mapping[str, Callable[[np.ndarray], None]] | None = None) -> None:
    """Write the tensors `shapes` names into the safetensors file `path`, drawn from `seed`, stored in `dtype`.

    `dtypes` keeps some tensors in another dtype, by the end of their name (DeepSeek-R1 stores its
    routing bias `e_score_correction_bias` in float32 among bfloat16 weights). `edits` change a tensor's
    float32 values in place, by its full name, after they are drawn (Whisper's tiny model zeroes the rows
    of its special tokens); the draws of the other tensors stay the same.
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    stored: dict[str, tuple[str, np.ndarray]] = {}
    for name, shape in sorted(shapes.items()):
        if name.endswith("norm.weight"):
            values = np.ones(shape, dtype=np.float32)
        elif name.endswith("bias"):
            values = np.zeros(shape, dtype=np.float32)
        else:
            values = rng.standard_normal(shape, dtype=np.float32) * _SCALE
        if edits and name in edits:
            edits[name](values)
        kind = next((d for end, d in (dtypes or {}).items() if name.endswith(end)), dtype)
        stored[name] = (kind, _encode(values, kind))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(safetensors_bytes(stored))  # a few MB; safetensors' save_file would make it 0600
    os.replace(tmp, path)


def _encode(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == F16:
        return values.astype("<f2")
    if dtype == F32:
        return values.astype("<f4")
    if dtype == BF16:
        return bfloat16_bits(values)
    raise CmxError(f"a tiny model's weights cannot be stored as {dtype}", hint=f"use {F16}, {F32} or {BF16}")


def bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """The bfloat16 bit patterns (uint16) of float32 values, rounded to nearest, ties to even."""
    bits = values.astype("<f4").view("<u4").astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")


def safetensors_bytes(tensors: Mapping[str, tuple[str, np.ndarray]]) -> bytes:
    """A safetensors file of (dtype, little-endian array) tensors in the given order: an 8-byte
    little-endian header size, the JSON header padded with spaces to 8 bytes, then the data."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(data.shape), "data_offsets": [offset, offset + data.nbytes]}
        offset += data.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return b"".join([len(text).to_bytes(8, "little"), text, *(data.tobytes() for _, data in tensors.values())])
