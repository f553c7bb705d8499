"""llm-d's objects: one KServe LLMInferenceService, or the upstream pieces llm-d's Helm guides install.

The kserve form (the default) is one object; KServe's controller makes the rest from it (the workload
Deployment or LeaderWorkerSet, the InferencePool `<name>-inference-pool`, the endpoint picker, the
HTTPRoute on its gateway). The pieces form renders those parts itself:

- the vLLM servers: cmx's own Deployment (a LeaderWorkerSet across nodes) with `replicas` pods, the same
  `vllm serve` as --stack vllm, and the Service in front of them (for a direct look, not the benchmark);
- InferencePool `<name>` (inference.networking.k8s.io/v1) selecting those pods on port 8000, its endpoint
  picker the Service `<name>-epp`;
- the endpoint picker (EPP): its ServiceAccount, Role and RoleBinding (read pods and pools), its
  EndpointPickerConfig in a ConfigMap, its Deployment and Service (gRPC ext-proc on 9002);
- a Gateway of `gateway_class` (or none: `--gateway NAME` attaches to yours) and the HTTPRoute sending
  every path to the pool; with Istio, the DestinationRule that lets the gateway reach the EPP's TLS.

Scoring is the user's choice: `prefix` is llm-d's inference-scheduling default (prefix-cache-aware, with
queue depth and KV-cache use as the load half), `load` the load half alone.
"""

from __future__ import annotations

from typing import Any

from cmx.k8s.manifests import (
    PORT,
    Manifest,
    ServingSpec,
    deployment,
    engine_args,
    labels,
    leader_worker_set,
    object_meta,
    security_context,
    server_env,
    server_selector,
    service,
)
from cmx.mlperf.backends.vllm_server import engine_flags

KSERVE_API = "serving.kserve.io/v1alpha1"   # served by every KServe with LLMInferenceService (v1alpha2 beside it)
POOL_API = "inference.networking.k8s.io/v1"
GATEWAY_API = "gateway.networking.k8s.io/v1"
ISTIO_API = "networking.istio.io/v1beta1"
# KServe's default endpoint picker is llm-d's router, which reads its own group; GIE's EPP reads the older one
EPP_CONFIG_API = {"kserve": "llm-d.ai/v1alpha1", "pieces": "inference.networking.x-k8s.io/v1alpha1"}
EPP_GRPC, EPP_HEALTH, EPP_METRICS = 9002, 9003, 9090
GATEWAY_PORT = 80
# a benchmark's longest request (a reasoning model's 20,000 tokens at a loaded server) must not be cut by the route
ROUTE_TIMEOUT = "3600s"
# the scorers and their weights: llm-d's inference-scheduling guide (prefix 3, queue 2, KV-cache use 2)
SCORERS = {"prefix": (("prefix-cache-scorer", 3), ("queue-scorer", 2), ("kv-cache-utilization-scorer", 2)),
           "load": (("queue-scorer", 1), ("kv-cache-utilization-scorer", 1))}


def picker_config(scorer: str, form: str) -> dict[str, Any]:
    """The EndpointPickerConfig: one scheduling profile, the scorers of `scorer` with their weights, the
    highest score picked."""
    scorers = SCORERS[scorer]
    return {
        "apiVersion": EPP_CONFIG_API[form], "kind": "EndpointPickerConfig",
        "plugins": [{"type": "single-profile-handler"}, *({"type": name} for name, _ in scorers),
                    {"type": "max-score-picker"}],
        "schedulingProfiles": [{"name": "default", "plugins": [*({"pluginRef": name, "weight": weight}
                                                                  for name, weight in scorers),
                                                                {"pluginRef": "max-score-picker"}]}],
    }


# --- the kserve form -----------------------------------------------------------------------------------


def main_container(spec: ServingSpec, gpus: int) -> dict[str, Any]:
    """KServe's `main` container, merged by name over its preset: cmx's image, engine flags (appended to the
    preset's `vllm serve`) and environment, and the device's GPUs, never the other vendor's."""
    container: dict[str, Any] = {
        "name": "main", "image": spec.serving_image,
        # KServe's storage initializer fetched hf://REPO:COMMIT to /mnt/models: no --revision for a local folder
        "args": ["--disable-uvicorn-access-log",
                 *(["--max-model-len", str(spec.engine.max_model_len)] if spec.engine.max_model_len else []),
                 *_without_parallelism(engine_flags(engine_args(spec)[0]))],
        "env": [e for e in server_env(spec) if e["name"] != "HF_HOME"],
        "resources": {"limits": {spec.profile.resource: str(gpus)}, "requests": {spec.profile.resource: str(gpus)}},
    }
    security = security_context(spec.profile)
    if security:
        container["securityContext"] = security
    return container


def _without_parallelism(flags: list[str]) -> list[str]:
    """The engine flags less --tensor-parallel-size: KServe's preset sets it from spec.parallelism.tensor."""
    out: list[str] = []
    skip = False
    for flag in flags:
        if skip:
            skip = False
            continue
        if flag == "--tensor-parallel-size":
            skip = True
            continue
        if not flag.startswith("--tensor-parallel-size="):
            out.append(flag)
    return out


def kserve_pod(spec: ServingSpec, gpus: int) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [main_container(spec, gpus)]}
    if spec.profile.runtime_class:
        pod["runtimeClassName"] = spec.profile.runtime_class
    if spec.profile.supplemental_groups:
        pod["securityContext"] = {"supplementalGroups": list(spec.profile.supplemental_groups)}
    return pod


def kserve_parallelism(spec: ServingSpec) -> dict[str, Any]:
    """Tensor parallel inside a pod; across nodes, KServe's shipped multi-node presets are data parallel
    (each pod `gpus / tp` ranks of `tp` GPUs, over the LeaderWorkerSet's pods), expert parallel with
    --expert-parallel (wide EP for a mixture of experts)."""
    tp = spec.engine.tensor_parallel_size
    out: dict[str, Any] = {"tensor": tp}
    if spec.multi_node:
        local = max(spec.gpus // tp, 1)
        out.update(data=local * spec.nodes, dataLocal=local)
    if spec.stack.expert_parallel:
        out["expert"] = True
    return out


def llm_inference_service(spec: ServingSpec) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": {"uri": f"hf://{spec.model.repo}:{spec.model.revision}", "name": spec.model.repo},
        "replicas": spec.stack.replicas,
        "parallelism": kserve_parallelism(spec),
        "template": kserve_pod(spec, spec.gpus),
        "router": {"gateway": {}, "route": {},
                   "scheduler": {"config": {"inline": picker_config(spec.stack.scorer, "kserve")}}},
    }
    if spec.multi_node:
        body["worker"] = kserve_pod(spec, spec.gpus)
    return {"apiVersion": KSERVE_API, "kind": "LLMInferenceService",
            "metadata": object_meta(spec, spec.name, "server"), "spec": body}


def kserve_objects(spec: ServingSpec) -> tuple[Manifest, ...]:
    return (Manifest("10-llminferenceservice.yaml", llm_inference_service(spec)),)


# --- the pieces form -----------------------------------------------------------------------------------


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

    text = yaml.safe_dump(picker_config(spec.stack.scorer, "pieces"), sort_keys=False)
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
    server = (Manifest("10-leaderworkerset.yaml", leader_worker_set(spec)) if spec.multi_node
              else Manifest("10-deployment.yaml", deployment(spec)))
    account, role, binding = epp_rbac(spec)
    out = [server, Manifest("20-service.yaml", service(spec)),
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


def kserve_url(spec: ServingSpec) -> str:
    """KServe's route on its default gateway (kserve/kserve-ingress-gateway) serves `/<namespace>/<name>/v1`; the
    gateway's in-cluster host depends on the gateway implementation: --apply reads the service's status.url."""
    namespace = spec.namespace or "default"
    return f"http://kserve-ingress-gateway.kserve.svc.cluster.local/{namespace}/{spec.name}/v1"


__all__ = ["gateway_service_url", "kserve_objects", "kserve_url", "picker_config", "pieces_objects"]
