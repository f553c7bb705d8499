"""The serving stacks behind one contract: each renders its serving objects from the same ServingSpec, names
the URL the benchmark Job sends to, the CRDs it needs installed, and the topology the Job records.

What every stack shares lives here once: the results volume, the stack's description and the benchmark Job
(cmx.k8s.manifests), the LeaderWorkerSet requirement of a model across nodes. A stack's own module holds only
its objects (cmx.k8s.llmd, cmx.k8s.dynamo; the vllm stack's are cmx.k8s.manifests' own).
"""

from __future__ import annotations

from dataclasses import dataclass

from cmx.k8s.manifests import (
    JobTarget,
    Manifest,
    ServingSpec,
    benchmark_objects,
    deployment,
    leader_worker_set,
    model_cache,
    results_volume,
    service,
    service_target,
)
from cmx.k8s.stack_options import StackOptionError
from cmx.mlperf.serving_stack import Role, ServingStack

GATEWAY_API_INSTALL = ("kubectl apply --server-side -f https://github.com/kubernetes-sigs/gateway-api/releases/"
                       "download/v1.5.1/standard-install.yaml")
GIE_INSTALL = ("kubectl apply -f https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/"
               "download/v1.5.0/manifests.yaml")
LWS_INSTALL = ("kubectl apply --server-side -f https://github.com/kubernetes-sigs/lws/releases/download/v0.10.0/"
               "manifests.yaml")
KSERVE_INSTALL = ("helm install kserve-llmisvc-crd oci://ghcr.io/kserve/charts/kserve-llmisvc-crd -n kserve "
                  "--create-namespace && helm install kserve-llmisvc-resources "
                  "oci://ghcr.io/kserve/charts/kserve-llmisvc-resources -n kserve (KServe's llmisvc install; it "
                  "also needs cert-manager and a gateway: see KServe's docs)")
ISTIO_INSTALL = "istioctl install --set values.pilot.env.ENABLE_GATEWAY_API_INFERENCE_EXTENSION=true"
DYNAMO_INSTALL = ("helm fetch https://helm.ngc.nvidia.com/nvidia/ai-dynamo/charts/dynamo-platform-${RELEASE}.tgz && "
                  "helm install dynamo-platform dynamo-platform-${RELEASE}.tgz -n dynamo-system --create-namespace "
                  "(Dynamo's platform chart installs its CRDs and operator)")


@dataclass(frozen=True)
class Requirement:
    """A CustomResourceDefinition the stack's objects need, and how its own docs install it."""

    crd: str          # plural.group, as `kubectl get crd` lists it
    what: str
    install: str


LWS = Requirement("leaderworkersets.leaderworkerset.x-k8s.io", "LeaderWorkerSet (a model across nodes)", LWS_INSTALL)
GATEWAY = Requirement("gateways.gateway.networking.k8s.io", "Gateway API's Gateway", GATEWAY_API_INSTALL)
ROUTE = Requirement("httproutes.gateway.networking.k8s.io", "Gateway API's HTTPRoute", GATEWAY_API_INSTALL)
POOL = Requirement("inferencepools.inference.networking.k8s.io", "the Inference Extension's InferencePool",
                   GIE_INSTALL)
KSERVE = Requirement("llminferenceservices.serving.kserve.io", "KServe's LLMInferenceService", KSERVE_INSTALL)
ISTIO = Requirement("destinationrules.networking.istio.io", "Istio's DestinationRule (the Istio gateway)",
                    ISTIO_INSTALL)
DYNAMO = Requirement("dynamographdeployments.nvidia.com", "Dynamo's DynamoGraphDeployment (its operator)",
                     DYNAMO_INSTALL)


def check_spec(spec: ServingSpec) -> None:
    """Refuse what a stack cannot render from this spec, before anything is rendered."""
    s = spec.stack
    if s.name == "dynamo" and spec.multi_node:
        raise StackOptionError("--stack dynamo renders workers of one pod each; --nodes above 1 is not rendered",
                               hint="Dynamo spreads a worker over nodes with Grove or LeaderWorkerSet configured in "
                                    "its operator: give each role a TP within a node (--prefill-tp, --decode-tp), "
                                    "or serve across nodes with --stack llm-d or --stack vllm")
    if s.name == "dynamo":
        for role, tp in (("prefill", s.prefill_tp), ("decode", s.decode_tp)):
            if tp is not None and tp > spec.gpus and tp > spec.engine.tensor_parallel_size:
                raise StackOptionError(f"--{role}-tp {tp} asks for more GPUs than one pod is given ({spec.gpus})",
                                       hint="raise --gpus, or lower the role's TP")


def serving_objects(spec: ServingSpec) -> tuple[Manifest, ...]:
    """The stack's own objects (not the results volume, not the benchmark)."""
    check_spec(spec)
    s = spec.stack
    if s.kserve:
        from cmx.k8s.llmd import kserve_objects

        return kserve_objects(spec)
    if s.pieces:
        from cmx.k8s.llmd import pieces_objects

        return (model_cache(spec), *pieces_objects(spec))
    if s.name == "dynamo":
        from cmx.k8s.dynamo import dynamo_objects

        return (model_cache(spec), *dynamo_objects(spec))
    server = (Manifest("10-leaderworkerset.yaml", leader_worker_set(spec)) if spec.multi_node
              else Manifest("10-deployment.yaml", deployment(spec)))
    return (model_cache(spec), server, Manifest("20-service.yaml", service(spec)))


def job_target(spec: ServingSpec) -> JobTarget:
    """Where the benchmark Job sends: the stack's entry point (or the user's --entry-url), ready when its model
    list answers through it (a gateway's route need not pass /health)."""
    s = spec.stack
    if s.kserve:
        from cmx.k8s.llmd import kserve_url as url_of
    elif s.pieces:
        from cmx.k8s.llmd import gateway_service_url as url_of
    elif s.name == "dynamo":
        from cmx.k8s.dynamo import frontend_url as url_of
    else:
        target = service_target(spec)
        return JobTarget(s.entry_url, s.entry_url + "/models") if s.entry_url else target
    url = s.entry_url or url_of(spec)
    return JobTarget(url, url + "/models", tokenizer_from_hub=s.kserve)


def stack_record(spec: ServingSpec, target: JobTarget | None = None) -> ServingStack:
    """What the Job records of the stack, as far as the manifests say it (--apply adds the cluster's versions
    and nodes)."""
    s = spec.stack
    tp = spec.engine.tensor_parallel_size
    versions = {"serving image": spec.serving_image}
    if s.name == "dynamo":
        from cmx.k8s.dynamo import roles

        found = tuple(Role(name, replicas, role_tp, gpus_per_pod=role_tp) for name, replicas, role_tp in roles(spec))
        routing = s.router
    else:
        per_pod = tp if spec.multi_node else spec.gpus
        found = (Role("server", s.replicas, tp, gpus_per_pod=per_pod, pods_per_replica=spec.nodes),)
        routing = s.scorer if s.name == "llm-d" else "service"
        if s.pieces:
            versions["endpoint picker image"] = s.epp_image
    return ServingStack(name=s.name, roles=found, device=spec.device, form=s.llmd_form if s.name == "llm-d" else "",
                        routing=routing, entry_url=(target or job_target(spec)).url, gpu_name=spec.gpu_name,
                        versions=versions)


def requirements(spec: ServingSpec) -> tuple[Requirement, ...]:
    """The CRDs the stack's objects need, one per custom kind it renders or KServe makes for it."""
    s = spec.stack
    needs: list[Requirement] = []
    if s.kserve:
        needs += [KSERVE, GATEWAY, ROUTE, POOL]
    elif s.pieces:
        needs += [POOL, ROUTE] + ([GATEWAY] if s.gateway is None else []) + ([ISTIO] if s.gateway_class == "istio"
                                                                            else [])
    elif s.name == "dynamo":
        needs.append(DYNAMO)
    if spec.multi_node:
        needs.append(LWS)
    return tuple(needs)


def all_objects(spec: ServingSpec, stack: ServingStack | None = None) -> tuple[Manifest, ...]:
    """Every object in the order they are applied: the volumes before the pods that mount them, the stack, then
    the stack's description and the benchmark Job."""
    target = job_target(spec)
    record = stack or stack_record(spec, target)
    serving = serving_objects(spec)
    volumes = [m for m in serving if m.kind == "PersistentVolumeClaim"]
    rest = [m for m in serving if m.kind != "PersistentVolumeClaim"]
    return (*volumes, results_volume(spec), *rest, *benchmark_objects(spec, record.to_json(), target))


__all__ = ["Requirement", "all_objects", "job_target", "requirements", "serving_objects", "stack_record"]
