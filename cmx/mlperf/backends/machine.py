"""What the engine profiles need to know of the machine and the model: sysfs, cgroups, the environment, config.json.

`read_machine_facts()` reads NUMA memory (clamped to the cgroup's limit), the visible GPU ids
(the device kind's visibility variables, cmx.devices, when set, else the detected GPUs) and whether the CPU has
native bf16; `read_model_facts()` reads the KV bytes per token and the weights' size from a
checkpoint. These are the impure parts: cmx.mlperf.backends.profiles is tested with made-up
machines and models.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx.devices import KINDS
from cmx.errors import CmxError

NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


class ProfileError(CmxError):
    """The requested engine options do not fit the device or the machine."""


@dataclass(frozen=True)
class NodeMemory:
    """One NUMA node's memory, as vLLM's CPU worker counts it (see `parse_node_meminfo`)."""

    node: int
    total_bytes: int
    available_bytes: int


@dataclass(frozen=True)
class MachineFacts:
    """What the profiles need to know about the machine.

    memory: the NUMA nodes this process may run on (a CPU engine's memory is sized from them).
    gpus: the GPU ids this process may use, from the vendor's visibility variable when the user
        set one, else the detected GPUs' indices.
    gpu_name, gpu_arch: the first GPU's product name ("AMD Instinct MI300X") and, for AMD, its
        gfx architecture ("gfx942") when known.
    cpu_bf16: the CPU computes bf16 natively (AVX512-BF16 or AMX); without it vLLM's CPU build
        emulates bf16 several times slower than float32.
    """

    memory: tuple[NodeMemory, ...] = ()
    gpus: tuple[str, ...] = ()
    gpu_name: str = ""
    gpu_arch: str = ""
    cpu_bf16: bool = True


@dataclass(frozen=True)
class ModelFacts:
    """What the profiles need to know about the checkpoint (see `read_model_facts`).

    kv_bytes_per_token: K and V of every layer for one token, at 16 bits.
    max_model_len: the context the engine runs with (a sequence's most tokens).
    weight_bytes: the checkpoint's weight files.
    quantized: config.json carries a quantization_config (an FP8 checkpoint, say): fp8 then asks
        only for an FP8 KV cache, not for quantizing the weights on load.
    audio_decoder_start: for a speech model (Whisper: an audio encoder and a text decoder), the token its
        decoder starts from, which a warm-up request sends with a clip; None for a text model.
    encoder_tokens: what an encoder-decoder model's cross-attention caches per sequence besides its own tokens
        (Whisper: the encoder's 1,500 positions), at kv_bytes_per_token each; 0 for a decoder-only model.
    """

    kv_bytes_per_token: int
    max_model_len: int
    weight_bytes: int = 0
    quantized: bool = False
    audio_decoder_start: int | None = None
    encoder_tokens: int = 0


def parse_node_meminfo(node: int, text: str) -> NodeMemory:
    """A sysfs node's meminfo ("Node 0 MemTotal: 97421888 kB" lines). Available memory is counted
    as vLLM's CPU worker counts it: MemFree + Active(file) + Inactive(file) + SReclaimable."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0] == "Node":
            values[parts[2].rstrip(":")] = int(parts[3]) * 1024
    try:
        available = values["MemFree"] + values["Active(file)"] + values["Inactive(file)"] + values["SReclaimable"]
        return NodeMemory(node=node, total_bytes=values["MemTotal"], available_bytes=available)
    except KeyError as exc:
        raise ProfileError(f"NUMA node {node}'s meminfo has no {exc.args[0]} line") from None


def parse_proc_meminfo(text: str) -> NodeMemory:
    """/proc/meminfo as one node 0, for kernels without NUMA nodes in sysfs."""
    values = {m.group(1): int(m.group(2)) * 1024 for m in re.finditer(r"^(\w+):\s+(\d+)\s*kB", text, re.MULTILINE)}
    if "MemTotal" not in values:
        raise ProfileError("/proc/meminfo has no MemTotal line")
    return NodeMemory(node=0, total_bytes=values["MemTotal"],
                      available_bytes=values.get("MemAvailable", values.get("MemFree", 0)))


def parse_cpulist(text: str) -> set[int]:
    """A kernel CPU list ("0-3,8,10-11") as a set of CPU numbers."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def clamp_to_cgroup(node: NodeMemory, limit: int | None, usage: int | None) -> NodeMemory:
    """A node's memory as a container's cgroup limit allows it (vLLM clamps the same way)."""
    if limit is None or limit >= node.total_bytes:
        return node
    return NodeMemory(node=node.node, total_bytes=limit,
                      available_bytes=max(0, min(node.available_bytes, limit - (usage or 0))))


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):  # missing, or "max" (no limit)
        return None


def read_cgroup_memory(root: Path = Path("/sys/fs/cgroup")) -> tuple[int | None, int | None]:
    """(limit, usage) in bytes of this process's memory cgroup, v2 or v1; None where unlimited."""
    if (root / "memory.max").exists():
        return _read_int(root / "memory.max"), _read_int(root / "memory.current")
    limit = _read_int(root / "memory" / "memory.limit_in_bytes")
    if limit is None or limit >= 1 << 62:  # v1 writes a huge number for "no limit"
        return None, None
    return limit, _read_int(root / "memory" / "memory.usage_in_bytes")


def read_numa_memory(sys_node: Path = Path("/sys/devices/system/node"), proc_meminfo: Path = Path("/proc/meminfo"),
                     cpus: set[int] | None = None, cgroup: Path = Path("/sys/fs/cgroup")) -> tuple[NodeMemory, ...]:
    """The memory of the NUMA nodes holding the CPUs this process may run on (all nodes when
    their CPU lists cannot be read), clamped to the cgroup's limit."""
    allowed = os.sched_getaffinity(0) if cpus is None else cpus
    nodes = []
    for path in sorted(sys_node.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        try:
            meminfo = (path / "meminfo").read_text(encoding="ascii")
        except OSError:
            continue
        try:
            node_cpus = parse_cpulist((path / "cpulist").read_text(encoding="ascii"))
        except OSError:
            node_cpus = allowed
        if node_cpus & allowed:
            nodes.append(parse_node_meminfo(int(path.name[4:]), meminfo))
    if not nodes:
        nodes = [parse_proc_meminfo(proc_meminfo.read_text(encoding="ascii"))]
    limit, usage = read_cgroup_memory(cgroup)
    return tuple(clamp_to_cgroup(n, limit, usage) for n in nodes)


def visible_gpu_ids(device: str, environ: Mapping[str, str], detected: int) -> tuple[str, ...]:
    """The GPU ids this process may use: the first of the kind's visibility variables the user set (a
    user's choice is kept), else the `detected` GPUs' indices; none for a kind without GPUs."""
    kind = KINDS.get(device)
    names = kind.visibility.chosen_by if kind else ()
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return tuple(v.strip() for v in value.split(",") if v.strip())
    return tuple(str(i) for i in range(detected)) if names else ()


def read_machine_facts(device: str, *, detected_gpus: int = 0, gpu_name: str = "", gpu_arch: str = "",
                       environ: Mapping[str, str] | None = None) -> MachineFacts:
    """This machine as the profiles see it. GPU detection is the caller's (cmx.tools.gpu: it runs
    the vendors' tools); this reads only files and the environment."""
    env = os.environ if environ is None else environ
    kind = KINDS.get(device)
    on_cpu = kind is not None and not kind.engine.on_gpus  # a CPU engine is sized from memory and bf16
    return MachineFacts(memory=read_numa_memory() if on_cpu else (), gpus=visible_gpu_ids(device, env, detected_gpus),
                        gpu_name=gpu_name, gpu_arch=gpu_arch, cpu_bf16=not on_cpu or read_cpu_bf16())


def read_cpu_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether the CPU computes bf16 natively: x86 AVX512-BF16 or AMX-BF16, or Arm's bf16 extension.
    An unreadable /proc/cpuinfo counts as yes (bf16, vLLM's CPU default)."""
    try:
        text = cpuinfo.read_text(encoding="ascii", errors="replace")
    except OSError:
        return True
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags = set(value.split())
            return bool(flags & NATIVE_BF16_FLAGS) or "bf16" in flags
    return True


def model_facts(config: Mapping[str, Any], *, max_model_len: int | None = None, weight_bytes: int = 0) -> ModelFacts:
    """ModelFacts from a Hugging Face config.json's fields (Llama names; a multimodal config's
    text_config when there is one). KV bytes per token at 2 bytes a value: keys and values of every
    key-value head, or, for multi-head latent attention (DeepSeek's `kv_lora_rank`), the one
    compressed latent and the rotary key part that vLLM caches per layer instead. An encoder-decoder config with
    an encoder of `max_source_positions` (a speech model's) is read by `_encoder_decoder_facts`."""
    if config.get("is_encoder_decoder") and "max_source_positions" in config:
        return _encoder_decoder_facts(config, max_model_len=max_model_len, weight_bytes=weight_bytes)
    text = config.get("text_config") or config
    try:
        layers, heads = int(text["num_hidden_layers"]), int(text["num_attention_heads"])
        context = max_model_len or int(text["max_position_embeddings"])
        if text.get("kv_lora_rank"):
            per_layer = int(text["kv_lora_rank"]) + int(text.get("qk_rope_head_dim") or 0)
        else:
            kv_heads = int(text.get("num_key_value_heads") or heads)
            per_layer = 2 * kv_heads * int(text.get("head_dim") or int(text["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError) as exc:
        raise ProfileError(f"config.json lacks a usable {exc}") from None
    return ModelFacts(kv_bytes_per_token=layers * per_layer * 2, max_model_len=context,
                      weight_bytes=weight_bytes, quantized="quantization_config" in config)


def _encoder_decoder_facts(config: Mapping[str, Any], *, max_model_len: int | None, weight_bytes: int) -> ModelFacts:
    """A speech model's decoder, from its own names (Whisper's): its self-attention keys and values per token, a
    context of max_target_positions (448), and the cross-attention's over the encoder's max_source_positions (1,500)
    per sequence."""
    try:
        layers, width = int(config["decoder_layers"]), int(config["d_model"])
        context = max_model_len or int(config["max_target_positions"])
        start, encoder = int(config["decoder_start_token_id"]), int(config["max_source_positions"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ProfileError(f"config.json lacks a usable {exc}") from None
    return ModelFacts(kv_bytes_per_token=layers * 2 * width * 2, max_model_len=context, weight_bytes=weight_bytes,
                      quantized="quantization_config" in config, audio_decoder_start=start, encoder_tokens=encoder)


def read_model_facts(model_dir: Path, max_model_len: int | None = None) -> ModelFacts:
    """The checkpoint in `model_dir` (its config.json and the size of its weight files)."""
    path = model_dir / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProfileError(f"cannot read the model's config: {exc}", where=str(path)) from None
    weights = [p for p in model_dir.iterdir() if p.suffix in (".safetensors", ".bin", ".pt")]
    return model_facts(config, max_model_len=max_model_len, weight_bytes=sum(p.stat().st_size for p in weights))
