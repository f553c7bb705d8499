"""Each serving stack renders, from the plan of each benchmark and device, objects that validate: the built-in kinds
against Kubernetes' schemas, the custom resources against the real CRDs (../shared/k8s-crds) and Dynamo's fields;
AMD and NVIDIA resources never cross; the benchmark Job targets the stack's entry point."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from cmx import api
from cmx.errors import CmxError
from cmx.k8s.crd_schema import CrdSchema, crd_from_object
from cmx.k8s.diagram import edges, mermaid
from cmx.k8s.output import dump, render
from cmx.k8s.stack_options import DYNAMO_IMAGE, StackOptionError, StackOptions
from cmx.k8s.stacks import job_target, objects, refuse_foreign, requirements, stack_record
from cmx.mlperf.serving_stack import ServingStack
from cmx.settings import Settings
from tests.k8s.conftest import make_spec, shared_crd
from tests.k8s.dynamo_crd import dynamo_crd
from tests.k8s.fake_cluster import SHARED_CRDS
from tests.k8s.test_api import TARGET

BENCHMARKS = ("llama2", "gpt-oss-120b", "deepseek-r1")
STACKS = {"llm-d": StackOptions(name="llm-d"), "llm-d-pieces": StackOptions(name="llm-d", llmd_form="pieces"),
          "dynamo": StackOptions(name="dynamo")}
# what the other vendor's pods would carry (Dynamo's own API group is nvidia.com on both: not a device resource)
OTHER = {"cuda": ("amd.com/gpu", "hip_visible", "rocr_visible", "supplementalgroups"),
         "rocm": ("nvidia.com/gpu", "runtimeclassname: nvidia", "nvidia_visible", "cuda_visible")}
OWN = {"cuda": "nvidia.com/gpu", "rocm": "amd.com/gpu"}
# the custom kinds no CRD here describes (Gateway API's and Istio's): reported as not checked
NO_CRD_HERE = {"Gateway", "HTTPRoute", "DestinationRule"}


@pytest.fixture(scope="module")
def crds() -> tuple[CrdSchema, ...]:
    return (shared_crd("serving.kserve.io_llminferenceservices.yaml"),
            shared_crd("inference.networking.k8s.io_inferencepools.yaml"),
            shared_crd("leaderworkerset.x-k8s.io_leaderworkersets.yaml"),
            crd_from_object(dynamo_crd(), "tests/k8s/dynamo_crd.py"))


def _crd_files(stack: str, tmp_path: Path) -> tuple[Path, ...]:
    """The CRD files of the stack's custom kinds, as a user gives them with --crd."""
    if stack == "dynamo":
        dynamo = tmp_path / "dynamo-crd.yaml"
        dynamo.write_text(yaml.safe_dump(dynamo_crd()))
        return (dynamo,)
    return (SHARED_CRDS / ("serving.kserve.io_llminferenceservices.yaml" if stack == "llm-d"
                           else "inference.networking.k8s.io_inferencepools.yaml"),)


@pytest.mark.parametrize("device", ["cuda", "rocm"])
@pytest.mark.parametrize("stack", list(STACKS))
@pytest.mark.parametrize("bench", BENCHMARKS)
def test_every_stack_renders_manifests_that_validate_for_each_benchmark_and_device(
        repo_settings: Settings, tmp_path: Path, bench: str, stack: str, device: str) -> None:
    own_image = "registry.example.com/dynamo-rocm:1" if (stack, device) == ("dynamo", "rocm") else None
    options = api.K8sOptions(image="registry.example.com/cmx:1", stack=STACKS[stack], serving_image=own_image,
                             crd_files=_crd_files(stack, tmp_path))
    result = api.deploy_k8s(f"app mlperf inference {bench} _{device}", inputs={"tensor_parallel_size": "8", **TARGET},
                            out_dir=tmp_path / "out", options=options, settings=repo_settings)
    validation = result.rendered.validation
    custom = {m.kind for m in result.rendered.manifests if "/" in m.body["apiVersion"]
              and m.body["apiVersion"].split("/")[0] not in ("apps", "batch", "rbac.authorization.k8s.io")}
    assert custom and set(validation.checked) == custom - NO_CRD_HERE
    assert set(validation.unchecked) == custom & NO_CRD_HERE
    text = "".join(p.read_text() for p in result.files if p.suffix == ".yaml")
    assert not [s for s in OTHER[device] if s in text.lower()] and OWN[device] in text
    summary = result.to_json()
    assert summary["stack"]["name"] == STACKS[stack].name and summary["stack"]["device"] == device
    assert [r["crd"] for r in summary["requirements"]] == [r.crd for r in result.rendered.requirements]


def test_a_custom_resource_off_its_crd_is_refused_with_the_path_and_the_crd(crds: tuple[CrdSchema, ...]) -> None:
    spec = make_spec("cuda", stack=STACKS["llm-d"])
    body = next(m.body for m in objects(spec) if m.kind == "LLMInferenceService")
    body["spec"]["parallelism"]["tensors"] = 8
    from cmx.k8s.validate import InvalidManifest, validate

    with pytest.raises(InvalidManifest, match=r"spec.parallelism.tensors: unknown field") as err:
        validate(body, crds={c.kind: c for c in crds})
    assert "llminferenceservices.serving.kserve.io" in err.value.message


def test_the_kserve_service_pins_the_model_and_keeps_the_engine_flags(crds: tuple[CrdSchema, ...]) -> None:
    spec = make_spec("rocm", stack=StackOptions(name="llm-d", replicas=3, scorer="prefix"), max_num_seqs=512)
    isvc = next(m.body for m in render(spec, crds=crds).manifests if m.kind == "LLMInferenceService")["spec"]
    assert isvc["model"] == {"uri": f"hf://{spec.model.repo}:{spec.model.revision}", "name": spec.model.repo}
    assert isvc["replicas"] == 3 and isvc["parallelism"] == {"tensor": 8} and "worker" not in isvc
    main = isvc["template"]["containers"][0]
    assert main["name"] == "main" and main["resources"]["limits"] == {"amd.com/gpu": "8"}
    assert "--max-num-seqs" in main["args"] and "--tensor-parallel-size" not in main["args"]
    assert isvc["template"]["securityContext"] == {"supplementalGroups": [44, 109]}
    picker = isvc["router"]["scheduler"]["config"]["inline"]
    weights = {p["pluginRef"]: p.get("weight") for p in picker["schedulingProfiles"][0]["plugins"]}
    assert weights == {"prefix-cache-scorer": 3, "queue-scorer": 2, "kv-cache-utilization-scorer": 2,
                       "max-score-picker": None}


def test_across_nodes_both_llmd_forms_use_a_leader_worker_set(crds: tuple[CrdSchema, ...]) -> None:
    kserve = make_spec("cuda", stack=StackOptions(name="llm-d", expert_parallel=True), nodes=2)
    isvc = next(m.body for m in render(kserve, crds=crds).manifests if m.kind == "LLMInferenceService")["spec"]
    assert isvc["parallelism"] == {"tensor": 8, "data": 2, "dataLocal": 1, "expert": True} and "worker" in isvc
    pieces = make_spec("cuda", stack=StackOptions(name="llm-d", llmd_form="pieces"), nodes=2)
    rendered = render(pieces, crds=crds)
    assert "LeaderWorkerSet" in rendered.validation.checked
    assert "leaderworkersets.leaderworkerset.x-k8s.io" in [r.crd for r in rendered.requirements]


def _bodies(spec: Any) -> dict[str, dict[str, Any]]:
    return {f"{m.kind}/{m.name}": m.body for m in objects(spec)}


def test_the_pieces_pool_selects_the_servers_and_asks_its_picker() -> None:
    spec = make_spec("cuda", stack=StackOptions(name="llm-d", llmd_form="pieces", replicas=4))
    b = _bodies(spec)
    pool, server = b["InferencePool/vllm-llama2"], b["Deployment/vllm-llama2"]
    pod_labels = server["spec"]["template"]["metadata"]["labels"]
    assert pool["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pool["spec"]["endpointPickerRef"]["name"] == "vllm-llama2-epp" and server["spec"]["replicas"] == 4
    config = yaml.safe_load(b["ConfigMap/vllm-llama2-epp"]["data"]["config.yaml"])
    assert config["kind"] == "EndpointPickerConfig" and config["apiVersion"] == "inference.networking.x-k8s.io/v1alpha1"
    assert {p["pluginRef"] for p in config["schedulingProfiles"][0]["plugins"]} == \
        {"queue-scorer", "kv-cache-utilization-scorer", "max-score-picker"}
    epp = b["Deployment/vllm-llama2-epp"]["spec"]["template"]["spec"]
    assert epp["serviceAccountName"] == "vllm-llama2-epp" and "--pool-name" in epp["containers"][0]["args"]
    route = b["HTTPRoute/vllm-llama2"]["spec"]
    assert route["parentRefs"][0]["name"] == "vllm-llama2-gateway"
    assert route["rules"][0]["backendRefs"][0] == {"group": "inference.networking.k8s.io", "kind": "InferencePool",
                                                   "name": "vllm-llama2"}
    assert "DestinationRule/vllm-llama2-epp" in b


def test_the_pieces_attach_to_your_gateway_without_rendering_one() -> None:
    spec = make_spec("cuda", stack=StackOptions(name="llm-d", llmd_form="pieces", gateway="shared",
                                                gateway_class="kgateway"))
    b = _bodies(spec)
    assert not any(k.startswith(("Gateway/", "DestinationRule/")) for k in b)
    assert b["HTTPRoute/vllm-llama2"]["spec"]["parentRefs"][0]["name"] == "shared"
    assert "gateways.gateway.networking.k8s.io" not in [r.crd for r in requirements(spec)]
    assert job_target(spec).url == "http://shared-kgateway:80/v1"


@pytest.mark.parametrize("device", ["cuda", "rocm"])
def test_dynamo_renders_prefill_and_decode_workers_of_their_own_tp(device: str) -> None:
    spec = make_spec(device, serving_image="registry.example.com/dynamo:1",
                     stack=StackOptions(name="dynamo", prefill_workers=2, decode_workers=1, prefill_tp=2,
                                        router="round-robin"))
    graph = _bodies(spec)["DynamoGraphDeployment/vllm-llama2"]["spec"]
    services = graph["services"]
    assert graph["backendFramework"] == "vllm"
    assert set(services) == {"Frontend", "VllmPrefillWorker", "VllmDecodeWorker"}
    assert {"name": "DYN_ROUTER_MODE", "value": "round-robin"} in services["Frontend"]["envs"]
    prefill, decode = services["VllmPrefillWorker"], services["VllmDecodeWorker"]
    assert prefill["replicas"] == 2 and prefill["subComponentType"] == "prefill"
    resource = "amd.com/gpu" if device == "rocm" else "nvidia.com/gpu"
    assert prefill["resources"]["limits"] == {"gpu": "2", "gpuType": resource}
    assert decode["resources"]["limits"] == {"gpu": "8", "gpuType": resource}
    p_args, d_args = (s["extraPodSpec"]["mainContainer"]["args"] for s in (prefill, decode))
    assert "--is-prefill-worker" in p_args and "--is-decode-worker" in d_args
    assert p_args[p_args.index("--tensor-parallel-size") + 1] == "2"
    assert d_args[d_args.index("--tensor-parallel-size") + 1] == "8"
    assert json.loads(p_args[p_args.index("--kv-transfer-config") + 1])["kv_connector"] == "NixlConnector"
    record = stack_record(spec)
    assert record.topology().startswith("2 prefill x TP 2 + 1 decode x TP 8, 12") and record.routing == "round-robin"


def test_dynamo_without_prefill_workers_is_aggregated() -> None:
    spec = make_spec("cuda", stack=StackOptions(name="dynamo", prefill_workers=0, decode_workers=3))
    services = _bodies(spec)["DynamoGraphDeployment/vllm-llama2"]["spec"]["services"]
    worker = services["VllmWorker"]
    assert set(services) == {"Frontend", "VllmWorker"} and worker["replicas"] == 3 and "subComponentType" not in worker
    assert "--is-prefill-worker" not in worker["extraPodSpec"]["mainContainer"]["args"]


def test_dynamo_refuses_what_it_cannot_render(repo_settings: Settings, tmp_path: Path) -> None:
    with pytest.raises(StackOptionError, match="--nodes above 1"):
        objects(make_spec("cuda", stack=StackOptions(name="dynamo"), nodes=2))
    with pytest.raises(CmxError, match="no default image for rocm") as err:
        api.deploy_k8s("app mlperf inference llama2 _rocm", inputs={"target_qps_offline": "60"}, out_dir=tmp_path,
                       settings=repo_settings,
                       options=api.K8sOptions(stack=StackOptions(name="dynamo")))
    assert "--serving-image" in (err.value.hint or "")
    assert api.deploy_k8s("app mlperf inference llama2 _cuda", inputs={"target_qps_offline": "60"}, out_dir=tmp_path,
                          settings=repo_settings,
                          options=api.K8sOptions(stack=StackOptions(name="dynamo"))).rendered.spec.serving_image \
        == DYNAMO_IMAGE


@pytest.mark.parametrize("stack, url, from_hub", [
    ("llm-d", "http://kserve-ingress-gateway.kserve.svc.cluster.local/mlperf/vllm-llama2/v1", True),
    ("llm-d-pieces", "http://vllm-llama2-gateway-istio.mlperf.svc.cluster.local:80/v1", False),
    ("dynamo", "http://vllm-llama2-frontend.mlperf.svc:8000/v1", False)])
def test_the_job_targets_the_stacks_entry_point(stack: str, url: str, from_hub: bool) -> None:
    spec = make_spec("cuda", namespace="mlperf", stack=STACKS[stack])
    target = job_target(spec)
    assert target.url == url and target.ready_url == url + "/models" and target.tokenizer_from_hub is from_hub
    job = _bodies(spec)["Job/vllm-llama2-benchmark"]["spec"]["template"]["spec"]
    assert f"endpoint_url={url}" in job["containers"][0]["command"]
    assert [c["name"] for c in job["initContainers"]] == (["fetch-tokenizer"] if from_hub else []) + ["wait-for-server"]
    given = replace(spec, stack=replace(spec.stack, entry_url="http://gw.example/v1"))
    assert job_target(given).url == "http://gw.example/v1"


def test_the_jobs_stack_description_reads_back(tmp_path: Path) -> None:
    spec = make_spec("rocm", stack=StackOptions(name="llm-d", llmd_form="pieces", replicas=2), gpu_name="AMD MI300X")
    config = _bodies(spec)["ConfigMap/vllm-llama2-stack"]["data"]["stack.json"]
    record = ServingStack.from_json(json.loads(config))
    assert record == stack_record(spec) and record.pods == 2 and record.gpus == 16 and record.gpu_name == "AMD MI300X"
    assert record.title() == "llm-d (InferencePool and endpoint picker, load-aware scoring)"


@pytest.mark.parametrize("stack, expected", [
    ("llm-d-pieces", {("Gateway_vllm_llama2_gateway", "HTTPRoute_vllm_llama2", ""),
                      ("HTTPRoute_vllm_llama2", "InferencePool_vllm_llama2", ""),
                      ("InferencePool_vllm_llama2", "Service_vllm_llama2_epp", "asks which pod"),
                      ("InferencePool_vllm_llama2", "Deployment_vllm_llama2", "routes to"),
                      ("Job_vllm_llama2_benchmark", "Gateway_vllm_llama2_gateway", "samples")}),
    ("llm-d", {("LLMInferenceService_vllm_llama2", "kserve_InferencePool_br__vllm_llama2_inference_pool",
                "~KServe makes"),
               ("Job_vllm_llama2_benchmark", "entry_kserve_ingress_gateway_kserve_svc_cluster_local", "samples")}),
    ("dynamo", {("vllm_llama2_Frontend", "vllm_llama2_VllmPrefillWorker", "prefill"),
                ("vllm_llama2_Frontend", "vllm_llama2_VllmDecodeWorker", "decode"),
                ("vllm_llama2_VllmPrefillWorker", "vllm_llama2_VllmDecodeWorker", "~KV cache"),
                ("Job_vllm_llama2_benchmark", "vllm_llama2_Frontend", "samples")})])
def test_each_stacks_diagram_is_drawn_from_its_manifests(stack: str, expected: set[tuple[str, str, str]]) -> None:
    manifests = objects(make_spec("cuda", stack=STACKS[stack]))
    found = {(a.split("[")[0], b.split("[")[0], label) for a, b, label in edges(manifests)}
    assert expected <= found, found
    assert mermaid(manifests).startswith("flowchart LR\n")


def test_an_option_of_another_stack_is_refused() -> None:
    with pytest.raises(StackOptionError, match="--router is not an option of --stack llm-d"):
        refuse_foreign(StackOptions(name="llm-d"), {"router"})
    with pytest.raises(StackOptionError, match="--gateway"):
        refuse_foreign(StackOptions(name="llm-d"), {"gateway"})
    refuse_foreign(StackOptions(name="llm-d", llmd_form="pieces"), {"gateway", "scorer", "replicas"})
    with pytest.raises(StackOptionError, match="--stack"):
        StackOptions(name="triton")


def test_the_dumped_yaml_of_every_stack_reads_back_the_same() -> None:
    for stack in STACKS.values():
        for m in objects(make_spec("cuda", stack=stack)):
            assert yaml.safe_load(dump(m.body)) == m.body
