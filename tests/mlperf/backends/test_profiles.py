"""Device profiles (cmx/mlperf/backends/profiles.py): engine arguments and environment for CUDA, ROCm and
CPU as pure functions of options and made-up machines, data-parallel grouping and sharding, and
the readers on real files laid out as sysfs, /proc and a checkpoint lay them out.

The node meminfo text is this test machine's own (one node, values as read); the Llama-2-70b
config.json fields are the real checkpoint's.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from cmx.devices import CPU, CUDA
from cmx.mlperf.backends.machine import (
    MachineFacts,
    ModelFacts,
    NodeMemory,
    ProfileError,
    clamp_to_cgroup,
    model_facts,
    parse_cpulist,
    parse_node_meminfo,
    parse_proc_meminfo,
    read_cgroup_memory,
    read_model_facts,
    read_numa_memory,
    visible_gpu_ids,
)
from cmx.mlperf.backends.profiles import (
    CPU_KV_BLOCK_TOKENS,
    CPU_MAX_MEMORY_FRACTION,
    EngineOptions,
    aiter_supported,
    cpu_kv_cache_bytes,
    cpu_memory_fraction,
    device_groups,
    engine_specs,
    shard_by_cost,
)

GIB = 1 << 30
EIGHT_GPUS = MachineFacts(gpus=tuple(str(i) for i in range(8)))
MI300X = MachineFacts(gpus=("0", "1"), gpu_name="AMD Instinct MI300X", gpu_arch="gfx942:sramecc+:xnack-")
BIG_CPU = MachineFacts(memory=(NodeMemory(0, 256 * GIB, 200 * GIB), NodeMemory(1, 256 * GIB, 220 * GIB)))
TINY_LLAMA = ModelFacts(kv_bytes_per_token=2 * 2 * 2 * 64 * 2, max_model_len=2048, weight_bytes=34 << 20)

LLAMA2_70B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "hidden_size": 8192, "intermediate_size": 28672,
    "max_position_embeddings": 4096, "model_type": "llama", "num_attention_heads": 64,
    "num_hidden_layers": 80, "num_key_value_heads": 8, "torch_dtype": "float16", "vocab_size": 32000,
}

THIS_MACHINE_NODE0 = """\
Node 0 MemTotal:        9922776 kB
Node 0 MemFree:         6084576 kB
Node 0 MemUsed:         3838200 kB
Node 0 SwapCached:            0 kB
Node 0 Active:          1105604 kB
Node 0 Inactive:        2088836 kB
Node 0 Active(anon):       1556 kB
Node 0 Inactive(anon):    35808 kB
Node 0 Active(file):    1104048 kB
Node 0 Inactive(file):  2053028 kB
Node 0 Unevictable:       15084 kB
Node 0 Slab:             452072 kB
Node 0 SReclaimable:     407932 kB
Node 0 SUnreclaim:        44140 kB
"""

# variables that belong to one vendor's stack; a profile for another device must never set them
VENDOR_PREFIXES = {
    "cuda": ("CUDA_", "NVIDIA_"),
    "rocm": ("HIP_", "ROCR_", "HSA_", "VLLM_ROCM_", "AMD_"),
    "cpu": ("VLLM_CPU_",),
}


def only(specs):
    assert len(specs) == 1
    return specs[0]


def set_variables(spec) -> set[str]:
    return {*spec.env, *spec.env_defaults}


# --- CUDA ---------------------------------------------------------------------------------------


def test_cuda_runs_one_engine_per_tensor_parallel_group_pinned_with_cuda_visible_devices():
    specs = engine_specs(EngineOptions(device="cuda", tensor_parallel_size=2), EIGHT_GPUS)
    assert [s.devices for s in specs] == [("0", "1"), ("2", "3"), ("4", "5"), ("6", "7")]
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in specs] == ["0,1", "2,3", "4,5", "6,7"]
    assert all(s.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" for s in specs)  # ids are nvidia-smi's
    assert all(s.engine_kwargs["tensor_parallel_size"] == 2 for s in specs)


def test_cuda_with_all_gpus_in_one_group_is_a_single_engine():
    spec = only(engine_specs(EngineOptions(device="cuda", tensor_parallel_size=8), EIGHT_GPUS))
    assert spec.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"


def test_cuda_uses_graphs_and_the_default_memory_share_unless_the_user_gives_one():
    spec = only(engine_specs(EngineOptions(device="cuda"), MachineFacts(gpus=("0",))))
    assert "enforce_eager" not in spec.engine_kwargs
    assert spec.engine_kwargs["gpu_memory_utilization"] == CUDA.engine.gpu_memory_utilization
    given = only(engine_specs(EngineOptions(device="cuda", gpu_memory_utilization=0.95), MachineFacts(gpus=("0",))))
    assert given.engine_kwargs["gpu_memory_utilization"] == 0.95


@pytest.mark.parametrize("device", ["cuda", "rocm"])
def test_fp8_quantizes_the_weights_on_load_and_keeps_the_kv_cache_in_fp8(device: str):
    spec = only(engine_specs(EngineOptions(device=device, precision="fp8"), MachineFacts(gpus=("0",))))
    assert spec.engine_kwargs["quantization"] == "fp8"
    assert spec.engine_kwargs["kv_cache_dtype"] == "fp8"
    assert "dtype" not in spec.engine_kwargs  # the checkpoint's own dtype for what stays unquantized


@pytest.mark.parametrize("device", ["cuda", "rocm"])
def test_an_fp8_checkpoint_is_not_quantized_again(device: str):
    fp8_checkpoint = ModelFacts(kv_bytes_per_token=327680, max_model_len=4096, quantized=True)
    spec = only(engine_specs(EngineOptions(device=device, precision="fp8"), MachineFacts(gpus=("0",)),
                             fp8_checkpoint))
    assert "quantization" not in spec.engine_kwargs
    assert spec.engine_kwargs["kv_cache_dtype"] == "fp8"


@pytest.mark.parametrize(("precision", "dtype"), [("fp16", "float16"), ("bf16", "bfloat16"), (None, None)])
@pytest.mark.parametrize("device", ["cuda", "rocm"])
def test_gpu_precision_sets_the_dtype_and_none_keeps_the_checkpoints(device: str, precision, dtype):
    spec = only(engine_specs(EngineOptions(device=device, precision=precision), MachineFacts(gpus=("0",))))
    assert spec.engine_kwargs.get("dtype") == dtype
    assert "quantization" not in spec.engine_kwargs and "kv_cache_dtype" not in spec.engine_kwargs


# --- ROCm ---------------------------------------------------------------------------------------


def test_rocm_pins_engines_with_hip_visible_devices_and_drops_vllms_cuda_copy():
    specs = engine_specs(EngineOptions(device="rocm", tensor_parallel_size=4), EIGHT_GPUS)
    assert [s.env["HIP_VISIBLE_DEVICES"] for s in specs] == ["0,1,2,3", "4,5,6,7"]
    # vLLM mirrors HIP_VISIBLE_DEVICES into CUDA_VISIBLE_DEVICES on import and refuses a mismatch
    assert all(s.env_unset == ("CUDA_VISIBLE_DEVICES",) for s in specs)
    assert all(not k.startswith("CUDA_") for s in specs for k in set_variables(s))


def test_rocm_turns_aiter_on_for_mi300_class_gpus_as_a_default_the_user_can_override():
    spec = only(engine_specs(EngineOptions(device="rocm", tensor_parallel_size=2), MI300X))
    assert spec.env_defaults["VLLM_ROCM_USE_AITER"] == "1"
    assert spec.env_defaults["HIP_FORCE_DEV_KERNARG"] == "1"
    off = only(engine_specs(EngineOptions(device="rocm", tensor_parallel_size=2,
                                          extra_env={"VLLM_ROCM_USE_AITER": "0"}), MI300X))
    assert off.env["VLLM_ROCM_USE_AITER"] == "0" and "VLLM_ROCM_USE_AITER" not in off.env_defaults


@pytest.mark.parametrize(("name", "arch", "expected"), [
    ("AMD Instinct MI300X", "", True),
    ("AMD Instinct MI325X", "", True),
    ("AMD Instinct MI355X", "", True),
    ("", "gfx942:sramecc+:xnack-", True),
    ("", "gfx950", True),
    ("AMD Instinct MI250X", "gfx90a", False),
    ("AMD Instinct MI210", "", False),
    ("AMD Radeon PRO W7900", "gfx1100", False),
    ("", "", False),
])
def test_aiter_is_only_for_the_mi300_and_mi350_series(name: str, arch: str, expected: bool):
    assert aiter_supported(MachineFacts(gpu_name=name, gpu_arch=arch)) is expected


def test_rocm_without_aiter_support_gets_no_aiter_switch():
    mi250 = MachineFacts(gpus=("0",), gpu_name="AMD Instinct MI250X", gpu_arch="gfx90a")
    assert "VLLM_ROCM_USE_AITER" not in only(engine_specs(EngineOptions(device="rocm"), mi250)).env_defaults


# --- CPU ----------------------------------------------------------------------------------------


def test_cpu_runs_one_bf16_eager_engine_in_process_with_no_gpu_variables():
    spec = only(engine_specs(EngineOptions(device="cpu", tensor_parallel_size=2), BIG_CPU, TINY_LLAMA))
    assert spec.devices == ()
    assert spec.engine_kwargs["dtype"] == "bfloat16"
    assert spec.engine_kwargs["enforce_eager"] is True
    assert spec.engine_kwargs["tensor_parallel_size"] == 2
    assert spec.engine_kwargs["max_num_seqs"] == CPU.engine.max_num_seqs
    assert spec.env == {} and spec.env_unset == ()
    # the engine core in the harness's process (bench/README.md, harness.py), which a user's own value overrides
    assert spec.env_defaults == {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def test_a_multiprocessing_setting_given_to_the_engine_wins_over_the_cpu_default():
    options = EngineOptions(device="cpu", extra_env={"VLLM_ENABLE_V1_MULTIPROCESSING": "1"})
    spec = only(engine_specs(options, BIG_CPU, TINY_LLAMA))
    assert spec.env == {"VLLM_ENABLE_V1_MULTIPROCESSING": "1"} and spec.env_defaults == {}


@pytest.mark.parametrize("precision", ["fp16", "fp8"])
def test_cpu_refuses_precisions_it_does_not_run(precision: str):
    with pytest.raises(ProfileError, match="bf16"):
        engine_specs(EngineOptions(device="cpu", precision=precision), BIG_CPU)


def test_cpu_kv_cache_holds_max_num_seqs_full_length_sequences_when_they_fit():
    spec = only(engine_specs(EngineOptions(device="cpu", max_num_seqs=16), BIG_CPU, TINY_LLAMA))
    assert spec.engine_kwargs["kv_cache_memory_bytes"] == 16 * 2048 * TINY_LLAMA.kv_bytes_per_token
    assert "gpu_memory_utilization" not in spec.engine_kwargs


def test_cpu_kv_cache_rounds_each_sequence_up_to_whole_blocks_and_splits_across_ranks():
    model = ModelFacts(kv_bytes_per_token=1000, max_model_len=CPU_KV_BLOCK_TOKENS + 1)
    assert cpu_kv_cache_bytes(model, max_num_seqs=3, tensor_parallel_size=2) == 3 * 2 * CPU_KV_BLOCK_TOKENS * 1000 // 2


def test_cpu_memory_share_is_sized_from_the_machine_when_the_kv_cache_would_not_fit():
    llama2_70b = model_facts(LLAMA2_70B_CONFIG, weight_bytes=138 * GIB)
    spec = only(engine_specs(EngineOptions(device="cpu", max_num_seqs=256), BIG_CPU, llama2_70b))
    reserve = 2 * GIB  # the engine-core process and one worker
    assert spec.engine_kwargs["gpu_memory_utilization"] == round((200 * GIB - reserve) / (256 * GIB), 3)
    assert "kv_cache_memory_bytes" not in spec.engine_kwargs


def test_cpu_memory_share_without_a_known_model_is_the_machines():
    spec = only(engine_specs(EngineOptions(device="cpu"), BIG_CPU))
    assert spec.engine_kwargs["gpu_memory_utilization"] == round((200 * GIB - 2 * GIB) / (256 * GIB), 3)


def test_cpu_memory_fraction_is_the_tightest_nodes_available_share_less_the_reserve():
    nodes = (NodeMemory(0, 100 * GIB, 80 * GIB), NodeMemory(1, 100 * GIB, 60 * GIB))
    assert cpu_memory_fraction(nodes, reserve_bytes=2 * GIB) == 0.58


def test_cpu_memory_fraction_leaves_room_for_the_system_on_an_idle_machine():
    assert cpu_memory_fraction((NodeMemory(0, 100 * GIB, 100 * GIB),), reserve_bytes=0) == CPU_MAX_MEMORY_FRACTION


def test_cpu_memory_fraction_refuses_a_machine_without_room_and_says_what_to_do():
    with pytest.raises(ProfileError, match=r"node 0 has 2.0 of 100.0 GiB available") as err:
        cpu_memory_fraction((NodeMemory(0, 100 * GIB, 2 * GIB),), reserve_bytes=GIB)
    assert "kv_cache_space_gib" in str(err.value)


def test_cpu_without_known_memory_needs_an_explicit_size():
    with pytest.raises(ProfileError, match="no NUMA node memory"):
        engine_specs(EngineOptions(device="cpu"), MachineFacts())
    spec = only(engine_specs(EngineOptions(device="cpu", gpu_memory_utilization=0.3), MachineFacts()))
    assert spec.engine_kwargs["gpu_memory_utilization"] == 0.3


def test_cpu_kv_cache_space_goes_to_vllm_cpu_kvcache_space_in_gib_and_replaces_the_memory_share():
    spec = only(engine_specs(EngineOptions(device="cpu", kv_cache_space_gib=4), MachineFacts(), TINY_LLAMA))
    assert spec.env == {"VLLM_CPU_KVCACHE_SPACE": "4"}
    assert "gpu_memory_utilization" not in spec.engine_kwargs and "kv_cache_memory_bytes" not in spec.engine_kwargs


def test_cpu_thread_binding_goes_to_vllm_cpu_omp_threads_bind():
    spec = only(engine_specs(EngineOptions(device="cpu", tensor_parallel_size=2, cpu_threads_bind="0-31|32-63"),
                             BIG_CPU))
    assert spec.env["VLLM_CPU_OMP_THREADS_BIND"] == "0-31|32-63"


@pytest.mark.parametrize("device", ["cuda", "rocm"])
@pytest.mark.parametrize("option", [{"kv_cache_space_gib": 4}, {"cpu_threads_bind": "0-7"}])
def test_cpu_options_are_refused_on_a_gpu(device: str, option: dict):
    with pytest.raises(ProfileError, match="CPU option"):
        engine_specs(EngineOptions(device=device, **option), EIGHT_GPUS)


# --- every profile ------------------------------------------------------------------------------


@pytest.mark.parametrize(("device", "precision"), [
    *((gpu, p) for gpu in ("cuda", "rocm") for p in (None, "fp16", "bf16", "fp8")),
    ("cpu", None), ("cpu", "bf16"),  # the only precisions the CPU profile runs
])
def test_no_profile_sets_a_variable_of_another_vendor(device: str, precision):
    options = EngineOptions(device=device, precision=precision, tensor_parallel_size=2,
                            kv_cache_space_gib=2 if device == "cpu" else None,
                            cpu_threads_bind="0-3|4-7" if device == "cpu" else None)
    facts = MachineFacts(memory=BIG_CPU.memory, gpus=EIGHT_GPUS.gpus, gpu_name="AMD Instinct MI300X",
                         gpu_arch="gfx942")
    foreign = tuple(p for vendor, prefixes in VENDOR_PREFIXES.items() if vendor != device for p in prefixes)
    for spec in engine_specs(options, facts, TINY_LLAMA):
        leaked = sorted(k for k in set_variables(spec) if k.startswith(foreign))
        assert leaked == [], f"{device} sets {leaked}"


def test_extra_engine_kwargs_and_env_are_passed_through_last():
    spec = only(engine_specs(EngineOptions(device="cuda", max_num_seqs=512, max_num_batched_tokens=8192,
                                           extra_engine_kwargs={"max_num_seqs": 1024, "async_scheduling": True},
                                           extra_env={"NCCL_MIN_NCHANNELS": "32"}), MachineFacts()))
    assert spec.engine_kwargs["max_num_seqs"] == 1024
    assert spec.engine_kwargs["max_num_batched_tokens"] == 8192
    assert spec.engine_kwargs["async_scheduling"] is True
    assert spec.env["NCCL_MIN_NCHANNELS"] == "32"


def test_prefix_caching_is_off_unless_asked_for():
    default = only(engine_specs(EngineOptions(device="cuda"), MachineFacts()))
    asked = only(engine_specs(EngineOptions(device="cuda", enable_prefix_caching=True), MachineFacts()))
    assert default.engine_kwargs["enable_prefix_caching"] is False
    assert asked.engine_kwargs["enable_prefix_caching"] is True


@pytest.mark.parametrize(("field", "value", "match"), [
    ("device", "tpu", "unknown device"),
    ("precision", "int4", "unknown precision"),
    ("tensor_parallel_size", 0, "at least 1"),
    ("gpu_memory_utilization", 1.5, r"\(0, 1\]"),
    ("max_num_seqs", 0, "at least 1"),
])
def test_bad_options_are_refused_with_the_reason(field: str, value, match: str):
    options = {"device": "cuda", field: value}
    with pytest.raises(ProfileError, match=match):
        engine_specs(EngineOptions(**options), EIGHT_GPUS)


# --- data parallelism ---------------------------------------------------------------------------


def test_device_groups_are_consecutive_gpus():
    assert device_groups(("0", "1", "2", "3"), 2) == (("0", "1"), ("2", "3"))
    assert device_groups(("GPU-a", "GPU-b"), 1) == (("GPU-a",), ("GPU-b",))


def test_no_known_gpus_means_one_engine_that_sees_whatever_is_visible():
    spec = only(engine_specs(EngineOptions(device="cuda", tensor_parallel_size=4), MachineFacts()))
    assert spec.devices == () and "CUDA_VISIBLE_DEVICES" not in spec.env


def test_gpus_that_do_not_split_into_tensor_parallel_groups_are_an_error():
    with pytest.raises(ProfileError, match="do not split into groups"):
        engine_specs(EngineOptions(device="cuda", tensor_parallel_size=3), EIGHT_GPUS)


def test_the_users_gpu_ids_replace_the_visible_ones():
    specs = engine_specs(EngineOptions(device="cuda", gpu_ids=("4", "5")), EIGHT_GPUS)
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in specs] == ["4", "5"]


def test_visible_gpus_keep_the_users_visibility_variable():
    assert visible_gpu_ids("cuda", {"CUDA_VISIBLE_DEVICES": "2,3"}, detected=8) == ("2", "3")
    assert visible_gpu_ids("cuda", {}, detected=2) == ("0", "1")
    assert visible_gpu_ids("cuda", {"CUDA_VISIBLE_DEVICES": ""}, detected=1) == ("0",)
    assert visible_gpu_ids("rocm", {"HIP_VISIBLE_DEVICES": "1", "CUDA_VISIBLE_DEVICES": "1"}, detected=8) == ("1",)
    assert visible_gpu_ids("rocm", {"CUDA_VISIBLE_DEVICES": "0,1"}, detected=8) == ("0", "1")  # HIP honours it
    assert visible_gpu_ids("cpu", {"CUDA_VISIBLE_DEVICES": "0"}, detected=1) == ()


def test_shard_by_cost_gives_every_item_once_and_balances_the_totals():
    rng = random.Random(3)
    costs = [rng.randrange(10, 2000) for _ in range(1000)]
    shards = shard_by_cost(costs, 4)
    assert sorted(i for s in shards for i in s) == list(range(1000))
    totals = [sum(costs[i] for i in s) for s in shards]
    assert max(totals) - min(totals) <= max(costs)
    assert shards == shard_by_cost(costs, 4)  # deterministic


def test_shard_by_cost_orders_each_shard_costliest_first():
    costs = [5, 1, 9, 3]
    shards = shard_by_cost(costs, 2)
    assert shards == [[2], [0, 3, 1]]  # 9 | 5 + 3 + 1
    assert all(s == sorted(s, key=lambda i: -costs[i]) for s in shards)


def test_shard_by_cost_with_more_shards_than_items_leaves_some_empty():
    assert shard_by_cost([7], 3) == [[0], [], []]


# --- reading the machine and the model ----------------------------------------------------------


def test_node_meminfo_counts_available_memory_as_vllm_does():
    node = parse_node_meminfo(0, THIS_MACHINE_NODE0)
    assert node.total_bytes == 9922776 * 1024
    assert node.available_bytes == (6084576 + 1104048 + 2053028 + 407932) * 1024


def test_proc_meminfo_stands_for_one_node_without_numa():
    node = parse_proc_meminfo("MemTotal:       24684096 kB\nMemFree:  100 kB\nMemAvailable:   24045724 kB\n")
    assert node == NodeMemory(0, 24684096 * 1024, 24045724 * 1024)


def test_cpulists_parse_ranges_and_singles():
    assert parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpulist("") == set()


def test_a_cgroup_limit_below_the_node_clamps_total_and_available():
    node = NodeMemory(0, 64 * GIB, 60 * GIB)
    assert clamp_to_cgroup(node, limit=16 * GIB, usage=4 * GIB) == NodeMemory(0, 16 * GIB, 12 * GIB)
    assert clamp_to_cgroup(node, limit=None, usage=None) == node
    assert clamp_to_cgroup(node, limit=128 * GIB, usage=1) == node


def write_node(root: Path, node: int, cpus: str, total_kb: int, free_kb: int) -> None:
    folder = root / f"node{node}"
    folder.mkdir(parents=True)
    (folder / "cpulist").write_text(cpus + "\n")
    (folder / "meminfo").write_text(
        f"Node {node} MemTotal: {total_kb} kB\nNode {node} MemFree: {free_kb} kB\n"
        f"Node {node} Active(file): 0 kB\nNode {node} Inactive(file): 0 kB\nNode {node} SReclaimable: 0 kB\n")


def test_numa_memory_covers_only_the_nodes_this_process_may_run_on(tmp_path: Path):
    write_node(tmp_path / "node", 0, "0-3", 1000, 600)
    write_node(tmp_path / "node", 1, "4-7", 2000, 1500)
    (tmp_path / "node" / "online").write_text("0-1\n")  # not a node folder
    nodes = read_numa_memory(tmp_path / "node", cpus={4, 5}, cgroup=tmp_path / "no-cgroup")
    assert nodes == (NodeMemory(1, 2000 * 1024, 1500 * 1024),)
    both = read_numa_memory(tmp_path / "node", cpus={0, 7}, cgroup=tmp_path / "no-cgroup")
    assert [n.node for n in both] == [0, 1]


def test_numa_memory_falls_back_to_proc_meminfo_without_nodes(tmp_path: Path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 2048 kB\nMemAvailable: 1024 kB\n")
    nodes = read_numa_memory(tmp_path / "missing", proc_meminfo=meminfo, cpus={0}, cgroup=tmp_path / "no-cgroup")
    assert nodes == (NodeMemory(0, 2048 * 1024, 1024 * 1024),)


def test_cgroup_memory_is_read_from_v2_and_v1_and_no_limit_is_none(tmp_path: Path):
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "memory.max").write_text("17179869184\n")
    (v2 / "memory.current").write_text("1073741824\n")
    assert read_cgroup_memory(v2) == (16 * GIB, GIB)
    (v2 / "memory.max").write_text("max\n")
    assert read_cgroup_memory(v2)[0] is None
    v1 = tmp_path / "v1" / "memory"
    v1.mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "unlimited", as read here
    assert read_cgroup_memory(tmp_path / "v1") == (None, None)
    (v1 / "memory.limit_in_bytes").write_text(f"{8 * GIB}\n")
    (v1 / "memory.usage_in_bytes").write_text(f"{GIB}\n")
    assert read_cgroup_memory(tmp_path / "v1") == (8 * GIB, GIB)


def test_this_machines_numa_memory_is_readable():
    nodes = read_numa_memory()
    assert nodes and all(0 < n.available_bytes <= n.total_bytes * 1.01 for n in nodes)


def test_model_facts_of_llama2_70b_give_its_kv_cache_per_token():
    facts = model_facts(LLAMA2_70B_CONFIG)
    assert facts.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2  # K and V, 80 layers, 8 KV heads of 128, fp16
    assert facts.max_model_len == 4096
    assert facts.quantized is False
    assert model_facts(LLAMA2_70B_CONFIG, max_model_len=2048).max_model_len == 2048
    assert model_facts({**LLAMA2_70B_CONFIG, "quantization_config": {"quant_method": "fp8"}}).quantized


def test_model_facts_of_deepseek_r1_count_the_latent_mla_caches():
    # DeepSeek-R1's config.json (the fields that matter): MLA caches one 512-wide latent and the 64-wide rotary
    # key per layer, not 128 heads of K and V
    config = {"num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "hidden_size": 7168,
              "kv_lora_rank": 512, "qk_rope_head_dim": 64, "max_position_embeddings": 163840}
    assert model_facts(config).kv_bytes_per_token == 61 * (512 + 64) * 2


def test_model_facts_of_whisper_read_its_decoder_and_the_token_it_starts_from():
    # whisper-large-v3's config.json (the fields that matter): an encoder-decoder in Whisper's own names
    config = {"model_type": "whisper", "is_encoder_decoder": True, "decoder_layers": 32, "decoder_attention_heads": 20,
              "d_model": 1280, "max_target_positions": 448, "max_source_positions": 1500,
              "decoder_start_token_id": 50258}
    facts = model_facts(config)
    assert facts.kv_bytes_per_token == 32 * 2 * 1280 * 2 and facts.max_model_len == 448
    assert facts.audio_decoder_start == 50258 and facts.encoder_tokens == 1500
    # the CPU KV cache holds each sequence's 448 decoder tokens and its cross-attention over 1,500 positions
    assert cpu_kv_cache_bytes(facts, 8, 1) == 8 * (512 + 1536) * facts.kv_bytes_per_token  # in blocks of 128
    assert model_facts(LLAMA2_70B_CONFIG).audio_decoder_start is None
    with pytest.raises(ProfileError, match="lacks a usable 'd_model'"):
        model_facts({k: v for k, v in config.items() if k != "d_model"})


def test_model_facts_are_read_from_a_checkpoint_folder(tmp_path: Path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA2_70B_CONFIG))
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(b"\0" * 1000)
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(b"\0" * 500)
    (tmp_path / "tokenizer.json").write_text("{}")
    facts = read_model_facts(tmp_path)
    assert facts.weight_bytes == 1500
    assert facts.kv_bytes_per_token == 327680


def test_a_missing_or_incomplete_config_is_a_profile_error(tmp_path: Path):
    with pytest.raises(ProfileError, match="cannot read the model's config"):
        read_model_facts(tmp_path)
    with pytest.raises(ProfileError, match="num_hidden_layers"):
        model_facts({"hidden_size": 128})


def test_a_cpu_without_native_bf16_computes_in_float32_with_a_kv_cache_twice_the_size(tmp_path):
    from cmx.mlperf.backends.machine import read_cpu_bf16

    avx2 = MachineFacts(memory=BIG_CPU.memory, cpu_bf16=False)
    spec = only(engine_specs(EngineOptions(device="cpu", max_num_seqs=16), avx2, TINY_LLAMA))
    assert spec.engine_kwargs["dtype"] == "float32"
    assert spec.engine_kwargs["kv_cache_memory_bytes"] == 2 * 16 * 2048 * TINY_LLAMA.kv_bytes_per_token
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx avx2 fma\n")  # this project's CI machine
    assert read_cpu_bf16(cpuinfo) is False
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_tile amx_bf16\n")
    assert read_cpu_bf16(cpuinfo) is True
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n")  # Neoverse V2
    assert read_cpu_bf16(cpuinfo) is True
