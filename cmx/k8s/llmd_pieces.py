"""--stack llm-d --llm-d-form pieces: the upstream parts llm-d's Helm guides install, rendered as objects.

- the vLLM servers: cmx's own Deployment (a LeaderWorkerSet across nodes) with `replicas` pods, the same
  `vllm serve` as --stack vllm, and the Service in front of them (for a direct look, not the benchmark);
- InferencePool `<name>` (inference.networking.k8s.io/v1) selecting those pods on port 8000, its endpoint
  picker the Service `<name>-epp`;
- the endpoint picker (EPP): its ServiceAccount, Role and RoleBinding (read pods and pools), its
  EndpointPickerConfig in a ConfigMap, its Deployment and Service (gRPC ext-proc on 9002);
- a Gateway of `gateway_class` (or none: `--gateway NAME` attaches to yours) and the HTTPRoute sending
  every path to the pool; with Istio, the DestinationRule that lets the gateway reach the EPP's TLS.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cmx.k8s.llmd import LlmdStack, picker_config
from cmx.k8s.manifests import PORT, Manifest, ServingSpec, labels, model_cache, object_meta, server_selector
from cmx.k8s.prerequisites import GATEWAY, ISTIO, POOL, ROUTE, Requirement
from cmx.k8s.stack import vllm_servers
from cmx.mlperf.serving_stack import LLMD_PIECES

if TYPE_CHECKING:
    from cmx.k8s.cluster import Cluster

POOL_API = "inference.networking.k8s.io/v1"
GATEWAY_API = "gateway.networking.k8s.io/v1"
ISTIO_API = "networking.istio.io/v1beta1"
EPP_CONFIG_API = "inference.networking.x-k8s.io/v1alpha1"  # GIE's endpoint picker reads the older group
EPP_GRPC, EPP_HEALTH, EPP_METRICS = 9002, 9003, 9090
GATEWAY_PORT = 80
# a benchmark's longest request (a reasoning model's 20,000 tokens at a loaded server) must not be cut by the route
ROUTE_TIMEOUT = "3600s"


def epp_name(spec: ServingSpec) -> str:
    return f"{spec.name}-epp"


def gateway_name(spec: ServingSpec) -> str:
    return spec.stack.gateway or f"{spec.name}-gateway"


def inference_pool(spec: ServingSpec) -> dict[str, Any]:
    return {"apiVersion": POOL_API, "kind": "InferencePool", "metadata": object_meta(spec, spec.name, "router"),
            "spec": {"selector": {"matchLabels": server_selector(spec)}, "targetPorts": [{"number": PORT}],
                     "appProtocol": "http",
                     # FailClose: a request the picker cannot place fails, rather than going to any pod unscored
                     "endpointPickerRef": {"name": epp_name(spec), "port": {"number": EPP_GRPC},
                                           "failureMode": "FailClose"}}}


def epp_rbac(spec: ServingSpec) -> tuple[dict[str, Any], ...]:
    name = epp_name(spec)
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch", "list"]},
             {"apiGroups": ["inference.networking.k8s.io"], "resources": ["inferencepools"],
              "verbs": ["get", "watch", "list"]},
             {"apiGroups": ["inference.networking.x-k8s.io"],
              "resources": ["inferenceobjectives", "inferencemodelrewrites"], "verbs": ["get", "watch", "list"]}]
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": object_meta(spec, name, "router")}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": object_meta(spec, name, "router"),
            "rules": rules}
    subject: dict[str, Any] = {"kind": "ServiceAccount", "name": name}
    if spec.namespace:
        subject["namespace"] = spec.namespace
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": object_meta(spec, name, "router"),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
               "subjects": [subject]}
    return account, role, binding


def epp_config_map(spec: ServingSpec) -> dict[str, Any]:
    import yaml

    text = yaml.safe_dump(picker_config(spec.stack.scorer, EPP_CONFIG_API), sort_keys=False)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": object_meta(spec, epp_name(spec), "router"),
            "data": {"config.yaml": text}}


def _grpc_probe(period: int) -> dict[str, Any]:
    return {"grpc": {"port": EPP_HEALTH, "service": "inference-extension"}, "periodSeconds": period}


def epp_deployment(spec: ServingSpec) -> dict[str, Any]:
    name = epp_name(spec)
    pod_labels = {**labels(spec, "router"), "inferencepool": name}
    args = ["--pool-name", spec.name, "--pool-namespace", "$(NAMESPACE)", "--pool-group", "inference.networking.k8s.io",
            "--config-file", "/config/config.yaml", "--grpc-port", str(EPP_GRPC), "--grpc-health-port",
            str(EPP_HEALTH), "--metrics-port", str(EPP_METRICS), "--zap-encoder", "json"]
    container = {
        "name": "epp", "image": spec.stack.epp_image, "args": args,
        "env": [{"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "ports": [{"name": "grpc", "containerPort": EPP_GRPC}, {"name": "grpc-health", "containerPort": EPP_HEALTH},
                  {"name": "metrics", "containerPort": EPP_METRICS}],
        "livenessProbe": {**_grpc_probe(10), "initialDelaySeconds": 5},
        "readinessProbe": _grpc_probe(2),
        "volumeMounts": [{"name": "config", "mountPath": "/config"}],
    }
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": object_meta(spec, name, "router"),
            "spec": {"replicas": 1, "strategy": {"type": "Recreate"},  # one picker holds the pool's state
                     "selector": {"matchLabels": {"inferencepool": name}},
                     "template": {"metadata": {"labels": pod_labels},
                                  "spec": {"serviceAccountName": name, "containers": [container],
                                           "volumes": [{"name": "config", "configMap": {"name": name}}]}}}}


def epp_service(spec: ServingSpec) -> dict[str, Any]:
    name = epp_name(spec)
    return {"apiVersion": "v1", "kind": "Service", "metadata": object_meta(spec, name, "router"),
            "spec": {"type": "ClusterIP", "selector": {"inferencepool": name},
                     "ports": [{"name": "grpc-ext-proc", "port": EPP_GRPC, "targetPort": EPP_GRPC, "protocol": "TCP",
                                "appProtocol": "http2"},
                               {"name": "http-metrics", "port": EPP_METRICS, "targetPort": EPP_METRICS,
                                "protocol": "TCP"}]}}


def gateway(spec: ServingSpec) -> dict[str, Any]:
    return {"apiVersion": GATEWAY_API, "kind": "Gateway", "metadata": object_meta(spec, gateway_name(spec), "router"),
            "spec": {"gatewayClassName": spec.stack.gateway_class,
                     "listeners": [{"name": "http", "port": GATEWAY_PORT, "protocol": "HTTP"}]}}


def http_route(spec: ServingSpec) -> dict[str, Any]:
    return {"apiVersion": GATEWAY_API, "kind": "HTTPRoute", "metadata": object_meta(spec, spec.name, "router"),
            "spec": {"parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                     "name": gateway_name(spec)}],
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                                "backendRefs": [{"group": "inference.networking.k8s.io", "kind": "InferencePool",
                                                 "name": spec.name}],
                                "timeouts": {"request": ROUTE_TIMEOUT}}]}}


def istio_destination_rule(spec: ServingSpec) -> dict[str, Any]:
    """The EPP serves its gRPC over TLS with a certificate of its own: Istio's gateway is told not to verify it,
    as GIE's chart does for Istio."""
    host = f"{epp_name(spec)}.{spec.namespace}.svc.cluster.local" if spec.namespace else epp_name(spec)
    return {"apiVersion": ISTIO_API, "kind": "DestinationRule", "metadata": object_meta(spec, epp_name(spec), "router"),
            "spec": {"host": host, "trafficPolicy": {"tls": {"mode": "SIMPLE", "insecureSkipVerify": True}}}}


def pieces_objects(spec: ServingSpec) -> tuple[Manifest, ...]:
    account, role, binding = epp_rbac(spec)
    out = [*vllm_servers(spec),
           Manifest("30-inferencepool.yaml", inference_pool(spec)),
           Manifest("31-serviceaccount-epp.yaml", account), Manifest("32-role-epp.yaml", role),
           Manifest("33-rolebinding-epp.yaml", binding), Manifest("34-configmap-epp.yaml", epp_config_map(spec)),
           Manifest("35-deployment-epp.yaml", epp_deployment(spec)), Manifest("36-service-epp.yaml", epp_service(spec))]
    if spec.stack.gateway is None:
        out.append(Manifest("40-gateway.yaml", gateway(spec)))
    out.append(Manifest("41-httproute.yaml", http_route(spec)))
    if spec.stack.gateway_class == "istio":
        out.append(Manifest("42-destinationrule-epp.yaml", istio_destination_rule(spec)))
    return tuple(out)


def gateway_service_url(spec: ServingSpec) -> str:
    """The Gateway's in-cluster Service as GEP-1762 says an implementation should name it (`<gateway>-<class>`):
    --apply finds the real one by its `gateway.networking.k8s.io/gateway-name` label instead."""
    host = f"{gateway_name(spec)}-{spec.stack.gateway_class}"
    return f"http://{host}.{spec.namespace}.svc.cluster.local:{GATEWAY_PORT}/v1" if spec.namespace \
        else f"http://{host}:{GATEWAY_PORT}/v1"


class LlmdPieces(LlmdStack):
    kind = LLMD_PIECES
    options = LlmdStack.options | {"gateway", "gateway_class", "epp_image"}
    readme = "k8s/stacks/llmd_pieces.md.j2"

    def objects(self, spec: ServingSpec) -> tuple[Manifest, ...]:
        return (model_cache(spec), *pieces_objects(spec))

    def url(self, spec: ServingSpec) -> str:
        return gateway_service_url(spec)

    def versions(self, spec: ServingSpec) -> dict[str, str]:
        return {**super().versions(spec), "endpoint picker image": spec.stack.epp_image}

    def crds(self, spec: ServingSpec) -> tuple[Requirement, ...]:
        return (POOL, ROUTE, *((GATEWAY,) if spec.stack.gateway is None else ()),
                *((ISTIO,) if spec.stack.gateway_class == "istio" else ()))

    def found_url(self, cluster: Cluster, spec: ServingSpec, manifests: Sequence[Manifest]) -> str | None:
        """The Gateway's Service as the cluster labels it."""
        return cluster.gateway_url(gateway_name(spec), GATEWAY_PORT)


STACK = LlmdPieces()

__all__ = ["GATEWAY_PORT", "STACK", "LlmdPieces", "gateway_name", "gateway_service_url", "pieces_objects"]
