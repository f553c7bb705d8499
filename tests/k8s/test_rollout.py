"""`cmx deploy --apply` against a Kubernetes API server on 127.0.0.1 (tests/k8s/fake_cluster.py) through the real
kubernetes client: the CRDs checked first, the stack applied and waited for, its entry point smoke-tested, the
benchmark Job started only then and its result read back; a missing CRD, a pod that never gets ready and a failed
Job each said plainly; --delete removes what --apply made but the volumes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cmx import api
from cmx.k8s.cluster import MissingPrerequisites, NotReady, SmokeTestFailed, Waits
from cmx.k8s.stack_options import StackOptions
from cmx.settings import Settings
from tests.k8s.fake_cluster import GATEWAY_CRDS, FakeCluster, crd, real_crd

MODEL = "meta-llama/Llama-2-70b-chat-hf"
QUERY = "app mlperf inference llama2 _cuda"
TARGET = {"target_qps_offline": "60"}  # a full run's Offline target: deploy checks the plan its Job runs
FAST = Waits(ready_s=2.0, poll_s=0.01)
OPTIONS = {"image": "registry.example.com/cmx:1", "name": "vllm-llama2"}
RESULT = {"outputs": {"results_dir": "/results/vllm-llama2-benchmark-0", "summary": [{"validity": "VALID"}]}}
ISTIO_CRD = crd("networking.istio.io", "v1beta1", "DestinationRule", "destinationrules")
POOL_CRD = "inference.networking.k8s.io_inferencepools.yaml"


def _deploy(cluster: FakeCluster, settings: Settings, tmp_path: Path, stack: StackOptions | None = None,
            **request: Any) -> api.K8sDeployment:
    return api.deploy_k8s(QUERY, inputs=TARGET, out_dir=tmp_path / "k8s", settings=settings, apply=True,
                          kubeconfig=cluster.kubeconfig(tmp_path / "kubeconfig"), waits=FAST,
                          options=api.K8sOptions(**OPTIONS, stack=stack or StackOptions()), **request)


def _patched(cluster: FakeCluster) -> list[str]:
    """The objects server-side applied, in order: `kind-plural/name`."""
    return ["/".join(path.split("/")[-2:]) for method, path in cluster.requests if method == "PATCH"]


def test_the_vllm_stack_is_applied_waited_for_smoke_tested_then_benchmarked(repo_settings: Settings,
                                                                             tmp_path: Path) -> None:
    with FakeCluster(namespace="mlperf", served_model=MODEL) as cluster:
        cluster.job_log = "progress lines\n" + json.dumps(RESULT, indent=2) + "\n"
        said: list[str] = []
        result = _deploy(cluster, repo_settings, tmp_path, say=said.append)
        stack_json = json.loads(cluster.get("v1", "ConfigMap", "vllm-llama2-stack")["data"]["stack.json"])
        job = cluster.get("batch/v1", "Job", "vllm-llama2-benchmark")
    applied = _patched(cluster)
    assert applied.index("jobs/vllm-llama2-benchmark") > applied.index("deployments/vllm-llama2")
    assert applied.index("jobs/vllm-llama2-benchmark") > applied.index("configmaps/vllm-llama2-stack")
    assert result.models == (MODEL,) and result.job is not None and result.job.succeeded
    assert result.job.result == RESULT and result.job.pod == "vllm-llama2-benchmark-0"
    assert stack_json["name"] == "vllm" and stack_json["versions"]["image (vllm)"] == result.rendered.spec.serving_image
    assert "endpoint_url=http://vllm-llama2:8000/v1" in job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert any("serves meta-llama/Llama-2-70b-chat-hf" in line for line in said)
    assert result.to_json()["job"]["succeeded"] is True


def test_a_missing_crd_is_refused_with_a_line_per_missing_piece_before_anything_is_applied(
        repo_settings: Settings, tmp_path: Path) -> None:
    with FakeCluster([real_crd(POOL_CRD)]) as cluster, pytest.raises(MissingPrerequisites) as err:
        _deploy(cluster, repo_settings, tmp_path, StackOptions(name="llm-d", llmd_form="pieces"))
    text = err.value.message
    assert "gateways.gateway.networking.k8s.io" in text and "httproutes.gateway.networking.k8s.io" in text
    assert "destinationrules.networking.istio.io" in text and "inferencepools" not in text
    assert "gateway-api/releases/download" in text and "istioctl install" in text
    assert _patched(cluster) == []
    assert (tmp_path / "k8s" / "30-inferencepool.yaml").is_file()  # written before the cluster was asked


@pytest.mark.parametrize("reason, match", [("ImagePullBackOff", "will not become ready: pod vllm-llama2-0: "
                                                                "container vllm is ImagePullBackOff"),
                                           ("Unschedulable", "did not become ready in 2 s .*Insufficient nvidia")])
def test_a_pod_that_never_gets_ready_is_named_with_what_the_cluster_says(repo_settings: Settings, tmp_path: Path,
                                                                         reason: str, match: str) -> None:
    with FakeCluster(served_model=MODEL) as cluster:
        cluster.never_ready("vllm-llama2", reason=reason)
        with pytest.raises(NotReady, match=match) as err:
            _deploy(cluster, repo_settings, tmp_path)
    assert "kubectl -n default" in (err.value.hint or "")
    assert "jobs/vllm-llama2-benchmark" not in _patched(cluster)


def test_a_failed_benchmark_job_is_read_back_as_failed(repo_settings: Settings, tmp_path: Path) -> None:
    with FakeCluster(served_model=MODEL) as cluster:
        cluster.job_fails = True
        cluster.job_log = "cmx: the server answered 500\n"
        result = _deploy(cluster, repo_settings, tmp_path)
    assert result.job is not None and not result.job.succeeded and result.job.result is None
    assert "answered 500" in result.job.log_tail


def test_an_entry_point_without_the_model_fails_the_smoke_test(repo_settings: Settings, tmp_path: Path) -> None:
    with FakeCluster(served_model="someone/else") as cluster, pytest.raises(SmokeTestFailed, match="someone/else"):
        _deploy(cluster, repo_settings, tmp_path)
    assert "jobs/vllm-llama2-benchmark" not in _patched(cluster)


def test_the_pieces_job_targets_the_gateways_own_service(repo_settings: Settings, tmp_path: Path) -> None:
    crds = [real_crd(POOL_CRD), *GATEWAY_CRDS, ISTIO_CRD]
    with FakeCluster(crds, namespace="mlperf", served_model=MODEL) as cluster:
        cluster.controllers["Gateway"] = _gateway_named("gw-svc")
        result = _deploy(cluster, repo_settings, tmp_path, StackOptions(name="llm-d", llmd_form="pieces"),
                         detach=True)
        job = cluster.get("batch/v1", "Job", "vllm-llama2-benchmark")
    url = "http://gw-svc.mlperf.svc.cluster.local:80/v1"
    assert f"endpoint_url={url}" in job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert result.job is None and result.rendered.stack.entry_url == url
    assert "InferencePool" in result.rendered.validation.checked  # against the cluster's own CRD
    assert "the cluster at" in result.rendered.validation.checked["InferencePool"]
    assert ("GET", "/api/v1/namespaces/mlperf/services/gw-svc:80/proxy/v1/models") in cluster.requests


def _gateway_named(service: str) -> Any:
    """A gateway implementation that names its Service its own way (found by label, not by name)."""
    from tests.k8s.fake_cluster import gateway_controller

    def controller(cluster: FakeCluster, body: dict[str, Any]) -> None:
        gateway_controller(cluster, body)
        made = next(s for s in cluster.objects("Service") if s["metadata"].get("labels", {}).get(
            "gateway.networking.k8s.io/gateway-name") == body["metadata"]["name"])
        made["metadata"]["name"] = service
        cluster.add(made)
    return controller


def test_kserve_is_ready_by_its_condition_and_reached_at_its_own_address(repo_settings: Settings,
                                                                        tmp_path: Path) -> None:
    crds = [real_crd("serving.kserve.io_llminferenceservices.yaml"), real_crd(POOL_CRD), *GATEWAY_CRDS]
    with FakeCluster(crds, served_model=MODEL) as cluster:
        cluster.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gateways"}})
        cluster.add({"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": 80}]},
                     "metadata": {"name": "inference-gw", "namespace": "gateways"}})

        def kserve(cluster: FakeCluster, body: dict[str, Any]) -> None:
            url = f"http://inference-gw.gateways.svc.cluster.local/default/{body['metadata']['name']}"
            body["status"] = {"url": "http://203.0.113.7/default/x", "addresses": [{"url": url}],
                              "conditions": [{"type": "Ready", "status": "True"}]}
        cluster.controllers["LLMInferenceService"] = kserve
        models = json.dumps({"data": [{"id": MODEL}]})
        cluster.proxy[("inference-gw", "default/vllm-llama2/v1/models")] = (200, models)
        result = _deploy(cluster, repo_settings, tmp_path, StackOptions(name="llm-d"), detach=True)
    assert result.rendered.stack.entry_url == "http://inference-gw.gateways.svc.cluster.local/default/vllm-llama2/v1"
    assert "LLMInferenceService" in result.rendered.validation.checked
    assert ("GET", "/api/v1/namespaces/gateways/services/inference-gw:80/proxy/default/vllm-llama2/v1/models") \
        in cluster.requests


def test_delete_removes_what_apply_made_but_the_volumes(repo_settings: Settings, tmp_path: Path) -> None:
    with FakeCluster(served_model=MODEL) as cluster:
        _deploy(cluster, repo_settings, tmp_path)
        result = api.deploy_k8s(QUERY, inputs=TARGET, out_dir=tmp_path / "k8s", settings=repo_settings, delete=True,
                                kubeconfig=tmp_path / "kubeconfig",
                                options=api.K8sOptions(**OPTIONS))
        left = {(o["kind"], o["metadata"]["name"]) for kind in ("PersistentVolumeClaim", "Deployment", "Job")
                for o in cluster.objects(kind)}
    assert [a.kind for a in result.deleted] == ["Job", "ConfigMap", "Service", "Deployment"]
    assert left == {("PersistentVolumeClaim", "vllm-llama2-model-cache"),
                    ("PersistentVolumeClaim", "vllm-llama2-results")}
