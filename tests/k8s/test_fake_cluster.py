"""The fake API server answers the real kubernetes client as a cluster would, for the calls `cmx deploy` makes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, config, dynamic  # noqa: E402 - only once the scale extra is known to be there
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError  # noqa: E402 - likewise

from tests.k8s.fake_cluster import GATEWAY_CRDS, GATEWAY_NAME_LABEL, FakeCluster, real_crd  # noqa: E402 - likewise

NS = "mlperf"


@pytest.fixture(scope="module")
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster([real_crd("leaderworkerset.x-k8s.io_leaderworkersets.yaml")], namespace=NS) as fake:
        yield fake


def api_for(fake: FakeCluster, directory: Path) -> Any:
    return config.new_client_from_config(str(fake.kubeconfig(directory / "kubeconfig")))


@pytest.fixture(scope="module")
def api(cluster: FakeCluster, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return api_for(cluster, tmp_path_factory.mktemp("kube"))


@pytest.fixture(scope="module")
def dyn(api: Any) -> Any:
    return dynamic.DynamicClient(api)


def apply(dyn: Any, body: dict[str, Any]) -> Any:
    resource = dyn.resources.get(api_version=body["apiVersion"], kind=body["kind"])
    return dyn.server_side_apply(resource, body=body, name=body["metadata"]["name"], namespace=NS,
                                 field_manager="cmx", force_conflicts=True)


def deployment(name: str, replicas: int = 2) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "vllm", "image": "vllm:1"}]}}}}


def test_version_and_crds_read_as_from_a_real_server(api: Any) -> None:
    assert client.VersionApi(api).get_code().git_version.startswith("v1.")
    crds = client.ApiextensionsV1Api(api)
    names = [c.metadata.name for c in crds.list_custom_resource_definition().items]
    assert names == ["leaderworkersets.leaderworkerset.x-k8s.io"]
    assert crds.read_custom_resource_definition(names[0]).spec.names.kind == "LeaderWorkerSet"
    with pytest.raises(client.ApiException) as err:
        crds.read_custom_resource_definition("gateways.gateway.networking.k8s.io")
    assert err.value.status == 404 and json.loads(err.value.body)["reason"] == "NotFound"


def test_discovery_finds_builtin_and_installed_kinds_only(cluster: FakeCluster, dyn: Any) -> None:
    assert dyn.resources.get(api_version="apps/v1", kind="Deployment").namespaced
    assert dyn.resources.get(api_version="leaderworkerset.x-k8s.io/v1", kind="LeaderWorkerSet").name == \
        "leaderworkersets"
    with pytest.raises(ResourceNotFoundError):
        dyn.resources.get(api_version="inference.networking.k8s.io/v1", kind="InferencePool")
    cluster.install_crd(real_crd("inference.networking.k8s.io_inferencepools.yaml"))
    assert dyn.resources.get(api_version="inference.networking.k8s.io/v1", kind="InferencePool")


def test_two_fakes_do_not_share_a_discovery_cache(tmp_path: Path) -> None:
    with FakeCluster(GATEWAY_CRDS) as with_gateways:
        dynamic.DynamicClient(api_for(with_gateways, tmp_path)).resources.get(kind="Gateway")
    with FakeCluster() as bare, pytest.raises(ResourceNotFoundError):
        dynamic.DynamicClient(api_for(bare, tmp_path)).resources.get(kind="Gateway")


def test_server_side_apply_twice_changes_nothing_and_the_controller_makes_pods(cluster: FakeCluster,
                                                                                 dyn: Any, api: Any) -> None:
    first = apply(dyn, deployment("twice"))
    again = apply(dyn, deployment("twice"))
    assert (again.metadata.uid, again.metadata.resourceVersion) == (first.metadata.uid, first.metadata.resourceVersion)
    assert again.status.readyReplicas == 2
    pods = client.CoreV1Api(api).list_namespaced_pod(NS, label_selector="app=twice").items
    assert [(p.metadata.name, p.status.phase) for p in pods] == [("twice-0", "Running"), ("twice-1", "Running")]


def test_listing_by_labels_returns_only_what_matches_every_term(dyn: Any) -> None:
    for name, labels in [("a", {"app": "x", "tier": "web"}), ("b", {"app": "x"}), ("c", {"app": "y", "tier": "web"})]:
        apply(dyn, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}})
    config_maps = dyn.resources.get(api_version="v1", kind="ConfigMap")
    assert [i.metadata.name for i in config_maps.get(namespace=NS, label_selector="app=x,tier=web").items] == ["a"]
    assert [i.metadata.name for i in config_maps.get(namespace=NS, label_selector="app=x").items] == ["a", "b"]


def test_a_jobs_pod_log_is_what_the_test_set(cluster: FakeCluster, dyn: Any, api: Any) -> None:
    cluster.job_log = "tokens/s: 1234.5\n"
    job = apply(dyn, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bench"},
                      "spec": {"template": {"spec": {"restartPolicy": "Never",
                                                     "containers": [{"name": "bench", "image": "cmx:1"}]}}}})
    assert [c.type for c in job.status.conditions if c.status == "True"][-1] == "Complete"
    core = client.CoreV1Api(api)
    (pod,) = core.list_namespaced_pod(NS, label_selector="batch.kubernetes.io/job-name=bench").items
    assert core.read_namespaced_pod_log(pod.metadata.name, NS, container="bench") == "tokens/s: 1234.5\n"


def test_a_stuck_workload_reports_why_and_a_slow_one_is_ready_after_some_reads(cluster: FakeCluster,
                                                                               dyn: Any, api: Any) -> None:
    cluster.never_ready("stuck")
    assert apply(dyn, deployment("stuck", replicas=1)).status.readyReplicas is None  # zero is left out, as for real
    (pod,) = client.CoreV1Api(api).list_namespaced_pod(NS, label_selector="app=stuck").items
    assert (pod.status.phase, pod.status.conditions[0].reason) == ("Pending", "Unschedulable")
    cluster.hide_status["slow"] = 1
    apply(dyn, deployment("slow"))
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    hidden, shown = (deployments.get(name="slow", namespace=NS) for _ in range(2))
    assert hidden.status is None and shown.status.readyReplicas == 2


def test_the_service_proxy_answers_once_a_ready_pod_backs_the_service(cluster: FakeCluster, dyn: Any,
                                                                      api: Any) -> None:
    apply(dyn, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "served"},
                "spec": {"selector": {"app": "served"}, "ports": [{"port": 8000}]}})
    core = client.CoreV1Api(api)

    def models() -> Any:  # the raw body: the client would turn a JSON answer into a Python repr of it
        raw = core.connect_get_namespaced_service_proxy_with_path("served:8000", NS, "v1/models",
                                                                  _preload_content=False)
        return json.loads(raw.data)

    with pytest.raises(client.ApiException) as err:
        models()
    assert err.value.status == 503
    apply(dyn, deployment("served", replicas=1))
    assert [m["id"] for m in models()["data"]] == [cluster.served_model]
    cluster.proxy[("served", "v1/models")] = (200, '{"data": [{"id": "other"}]}')
    assert models() == {"data": [{"id": "other"}]}


def test_a_gateway_gets_a_service_labelled_with_its_name(tmp_path: Path) -> None:
    with FakeCluster(GATEWAY_CRDS) as fake:
        dyn = dynamic.DynamicClient(api_for(fake, tmp_path))
        gateway = dyn.resources.get(api_version="gateway.networking.k8s.io/v1", kind="Gateway")
        body = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "inference"},
                "spec": {"gatewayClassName": "istio", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}
        applied = dyn.server_side_apply(gateway, body=body, name="inference", namespace="default",
                                        field_manager="cmx", force_conflicts=True)
        assert {c.type: c.status for c in applied.status.conditions}["Programmed"] == "True"
        services = client.CoreV1Api(dyn.client).list_namespaced_service(
            "default", label_selector=f"{GATEWAY_NAME_LABEL}=inference").items
        assert [s.spec.ports[0].port for s in services] == [80]


def test_delete_removes_the_object_and_its_pods_and_then_answers_404(cluster: FakeCluster, dyn: Any,
                                                                      api: Any) -> None:
    apply(dyn, deployment("doomed"))
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    deployments.delete(name="doomed", namespace=NS, body={"propagationPolicy": "Foreground"})
    assert ("Deployment", NS, "doomed") in cluster.deleted
    assert client.CoreV1Api(api).list_namespaced_pod(NS, label_selector="app=doomed").items == []
    with pytest.raises(NotFoundError):
        deployments.get(name="doomed", namespace=NS)
    with pytest.raises(NotFoundError):
        deployments.delete(name="doomed", namespace=NS, body={"propagationPolicy": "Foreground"})
