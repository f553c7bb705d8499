"""The objects: each vendor's settings only in its own set, the token only by reference, /dev/shm, probes,
the profile's engine flags, and the LeaderWorkerSet across nodes."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from cmx.k8s import K8sError
from cmx.k8s.devices import CUDA, ROCM
from cmx.k8s.manifests import (
    HF_HOME,
    STARTUP_FAILURES,
    benchmark_argv,
    engine_args,
    serve_argv,
    service_target,
)
from cmx.k8s.output import dump
from cmx.k8s.stacks import objects
from tests.k8s.conftest import make_spec

DEVICES = ("cuda", "rocm")


def _by_kind(spec: Any) -> dict[str, dict[str, Any]]:
    return {m.kind if m.kind != "PersistentVolumeClaim" else m.name: m.body for m in objects(spec)}


def _server_pods(spec: Any) -> list[dict[str, Any]]:
    bodies = _by_kind(spec)
    if "LeaderWorkerSet" in bodies:
        lwt = bodies["LeaderWorkerSet"]["spec"]["leaderWorkerTemplate"]
        return [lwt["leaderTemplate"]["spec"], lwt["workerTemplate"]["spec"]]
    return [bodies["Deployment"]["spec"]["template"]["spec"]]


def _text(spec: Any) -> str:
    return "".join(dump(m.body) for m in objects(spec))


@pytest.mark.parametrize("nodes", [1, 2])
def test_the_amd_set_has_amd_gpus_and_nothing_of_nvidia(nodes: int) -> None:
    spec = make_spec("rocm", nodes=nodes)
    text = _text(spec)
    assert "amd.com/gpu" in text
    assert "nvidia" not in text.lower() and "runtimeClassName" not in text
    for pod in _server_pods(spec):
        container = pod["containers"][0]
        assert container["resources"]["limits"] == {"amd.com/gpu": "8"}
        assert pod["securityContext"] == {"supplementalGroups": [44, 109]}
        assert container["securityContext"] == {"capabilities": {"add": ["SYS_PTRACE"]},
                                                "seccompProfile": {"type": "Unconfined"}}


@pytest.mark.parametrize("nodes", [1, 2])
def test_the_nvidia_set_has_nvidia_gpus_and_nothing_of_amd(nodes: int) -> None:
    spec = make_spec("cuda", nodes=nodes)
    text = _text(spec)
    assert "amd.com" not in text and "SYS_PTRACE" not in text and "supplementalGroups" not in text
    for pod in _server_pods(spec):
        assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}
        assert pod["runtimeClassName"] == "nvidia"
        assert "securityContext" not in pod["containers"][0]


def test_the_runtime_class_can_be_dropped_for_a_cluster_whose_default_runtime_is_nvidias() -> None:
    from dataclasses import replace

    spec = make_spec("cuda", profile=replace(CUDA, runtime_class=None))
    assert "runtimeClassName" not in _text(spec)


@pytest.mark.parametrize("device", DEVICES)
def test_the_hf_token_is_only_a_secret_reference(device: str) -> None:
    spec = make_spec(device, hf_token_secret="my-hf")
    pods = [*_server_pods(spec), _by_kind(spec)["Job"]["spec"]["template"]["spec"]]
    for pod in pods:
        for container in pod["containers"]:
            token = [e for e in container["env"] if e["name"] == "HF_TOKEN"]
            assert token == [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "my-hf", "key": "token",
                                                                                  "optional": True}}}]
    for body in (m.body for m in objects(spec)):
        for env in _all_env(body):
            assert "value" not in env or "TOKEN" not in env["name"]
    assert "hf_" not in _text(spec)


def _all_env(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        found = list(node["env"]) if isinstance(node.get("env"), list) else []
        return found + [e for v in node.values() for e in _all_env(v)]
    if isinstance(node, list):
        return [e for v in node for e in _all_env(v)]
    return []


@pytest.mark.parametrize("device", DEVICES)
def test_dev_shm_is_a_memory_backed_empty_dir(device: str) -> None:
    for pod in _server_pods(make_spec(device, shm_size="32Gi", nodes=2)):
        assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}} in pod["volumes"]
        assert {"name": "dshm", "mountPath": "/dev/shm"} in pod["containers"][0]["volumeMounts"]


@pytest.mark.parametrize("device", DEVICES)
def test_the_server_has_a_long_startup_probe_and_a_readiness_probe_on_health(device: str) -> None:
    container = _server_pods(make_spec(device))[0]["containers"][0]
    for probe in ("startupProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": 8000}
    assert container["startupProbe"]["failureThreshold"] == STARTUP_FAILURES
    assert container["startupProbe"]["failureThreshold"] * container["startupProbe"]["periodSeconds"] >= 1800
    assert container["ports"] == [{"name": "http", "containerPort": 8000}]


@pytest.mark.parametrize("device", DEVICES)
def test_the_profiles_engine_arguments_are_vllm_serve_flags(device: str) -> None:
    argv = serve_argv(make_spec(device, max_num_seqs=512, max_model_len=4096))
    assert argv[:3] == ["vllm", "serve", "meta-llama/Llama-2-70b-chat-hf"]
    text = " ".join(argv)
    for flag in ("--revision e4b287212771ce25f782ed8636cbea2d7c5ac7e2", "--tensor-parallel-size 8",
                 "--max-num-seqs 512", "--max-model-len 4096", "--dtype bfloat16", "--gpu-memory-utilization 0.9",
                 "--no-enable-prefix-caching", "--port 8000", "--served-model-name meta-llama/Llama-2-70b-chat-hf"):
        assert flag in text
    assert "--data-parallel-size" not in text and "--pipeline-parallel-size" not in text


def test_more_gpus_than_a_tensor_parallel_group_is_vllms_data_parallelism() -> None:
    kwargs, _ = engine_args(make_spec("cuda", gpus=8, tensor_parallel_size=4))
    assert kwargs["tensor_parallel_size"] == 4 and kwargs["data_parallel_size"] == 2


def test_the_environment_is_the_profiles_defaults_without_pinning_the_device_plugins_gpus() -> None:
    rocm = {e["name"]: e.get("value") for e in _server_pods(make_spec("rocm", gpu_name="AMD Instinct MI300X"))[0]
            ["containers"][0]["env"]}
    assert rocm["VLLM_ROCM_USE_AITER"] == "1" and rocm["HIP_FORCE_DEV_KERNARG"] == "1"
    assert rocm["HF_HOME"] == HF_HOME
    cuda = {e["name"] for e in _server_pods(make_spec("cuda"))[0]["containers"][0]["env"]}
    assert "VLLM_WORKER_MULTIPROC_METHOD" in cuda
    for env in (set(rocm), cuda):
        assert not env & {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"}
    assert "VLLM_ROCM_USE_AITER" not in {e["name"] for e in _server_pods(make_spec("rocm"))[0]["containers"][0]["env"]}


def test_fp8_asks_only_for_an_fp8_kv_cache_of_the_prequantized_checkpoint() -> None:
    from dataclasses import replace

    from tests.k8s.conftest import LLAMA2

    text = " ".join(serve_argv(make_spec("rocm", precision="fp8", model=replace(LLAMA2, quantized=True))))
    assert "--kv-cache-dtype fp8" in text and "--quantization" not in text


@pytest.mark.parametrize("device", DEVICES)
def test_across_nodes_a_leader_worker_set_runs_vllm_over_ray(device: str) -> None:
    spec = make_spec(device, nodes=2)
    bodies = _by_kind(spec)
    assert "Deployment" not in bodies
    lws = bodies["LeaderWorkerSet"]
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    lwt = lws["spec"]["leaderWorkerTemplate"]
    assert lwt["size"] == 2
    leader = lwt["leaderTemplate"]["spec"]["containers"][0]
    worker = lwt["workerTemplate"]["spec"]["containers"][0]
    script = leader["command"][2]
    assert leader["command"][:2] == ["sh", "-c"]
    assert script.startswith("ray start --head --port=6379 && exec vllm serve")
    assert "--pipeline-parallel-size 2" in script and "--distributed-executor-backend ray" in script
    assert "--tensor-parallel-size 8" in script
    assert worker["command"][2] == 'exec ray start --address="$LWS_LEADER_ADDRESS:6379" --block'
    assert "startupProbe" in leader and "startupProbe" not in worker
    assert bodies["Service"]["spec"]["selector"]["role"] == "leader"
    assert lwt["leaderTemplate"]["metadata"]["labels"]["role"] == "leader"


def test_the_service_selects_the_deployments_pods() -> None:
    bodies = _by_kind(make_spec("cuda"))
    selector = bodies["Service"]["spec"]["selector"]
    assert bodies["Deployment"]["spec"]["selector"]["matchLabels"] == selector
    assert selector.items() <= bodies["Deployment"]["spec"]["template"]["metadata"]["labels"].items()
    assert bodies["Service"]["spec"]["type"] == "ClusterIP" and bodies["Service"]["spec"]["ports"][0]["port"] == 8000


@pytest.mark.parametrize("device", DEVICES)
def test_the_benchmark_job_runs_cmx_against_the_service_without_gpus(device: str) -> None:
    spec = make_spec(device, namespace="mlperf", benchmark_inputs=(("target_qps_server", "40"),))
    job = _by_kind(spec)["Job"]
    pod = job["spec"]["template"]["spec"]
    assert job["spec"]["backoffLimit"] == 0 and pod["restartPolicy"] == "Never"
    container = pod["containers"][0]
    assert container["image"] == "registry.example.com/cmx:1"
    argv = container["command"]
    assert argv[:3] == ["cmx", "run", f"app mlperf inference llama2 _{device} _endpoint"]
    assert "endpoint_url=http://vllm-llama2.mlperf.svc:8000/v1" in argv
    assert "endpoint_model=meta-llama/Llama-2-70b-chat-hf" in argv and "target_qps_server=40" in argv
    assert "results_dir=/results/$(POD_NAME)" in argv and argv == benchmark_argv(spec, service_target(spec))
    assert "serving_stack=/etc/cmx/stack.json" in argv and argv[-1] == "--json"
    assert {"name": "results", "mountPath": "/results"} in container["volumeMounts"]
    assert "resources" not in container and "gpu" not in dump(job)
    assert pod["initContainers"][0]["command"][-1] == "http://vllm-llama2.mlperf.svc:8000/health"


def test_the_volumes_are_claims_of_the_chosen_sizes() -> None:
    bodies = _by_kind(make_spec("rocm", cache_size="300Gi", storage_class="nfs"))
    cache, results = bodies["vllm-llama2-model-cache"], bodies["vllm-llama2-results"]
    assert cache["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "300Gi"}},
                             "storageClassName": "nfs"}
    assert results["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_every_object_dumps_to_yaml_that_reads_back_the_same() -> None:
    for m in objects(make_spec("cuda", nodes=2)):
        assert yaml.safe_load(dump(m.body)) == m.body


@pytest.mark.parametrize("changes, match", [
    ({"name": "Bad_Name"}, "not a usable name"),
    ({"name": "x" * 41}, "not a usable name"),
    ({"cache_size": "lots"}, "--cache-size"),
    ({"namespace": "No"}, "namespace"),
    ({"nodes": 2, "gpus": 16}, "tensor_parallel_size"),
    ({"gpus": 0}, "--gpus 0 is not between 1 and 64"),
])
def test_options_kubernetes_would_refuse_are_errors(changes: dict[str, Any], match: str) -> None:
    with pytest.raises(K8sError, match=match):
        make_spec("cuda", **changes)


def test_the_rocm_profile_defaults_can_be_changed_per_node() -> None:
    from dataclasses import replace

    spec = make_spec("rocm", profile=replace(ROCM, supplemental_groups=(39, 110)))
    assert _server_pods(spec)[0]["securityContext"] == {"supplementalGroups": [39, 110]}
