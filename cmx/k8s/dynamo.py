"""NVIDIA Dynamo's object: one DynamoGraphDeployment (nvidia.com/v1alpha1) serving the plan's model with vLLM.

Dynamo's operator makes the pods and Services from it: a Frontend (the OpenAI API on port 8000, the Service
`<name>-frontend`, routing KV-aware or round-robin by DYN_ROUTER_MODE), and vLLM workers (`python3 -m
dynamo.vllm`, which takes vLLM's own engine flags): prefill workers and decode workers joined by Dynamo's KV
transfer, each role with its replicas and tensor parallelism, or, with no prefill workers, aggregated
workers doing both. The backend framework is vLLM: cmx's plan names vLLM engine arguments, which
TensorRT-LLM does not take, so a TensorRT-LLM graph cannot be rendered from it.

The workers share cmx's model cache (a PersistentVolumeClaim the graph names, `create: false`) as HF_HOME, so
a restarted worker finds the weights, and the benchmark Job reads the tokenizer from it. A worker spans one
pod: Dynamo's multi-node workers need Grove or LeaderWorkerSet through the operator's own configuration,
which cmx does not render (`--nodes` above 1 is refused for this stack).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cmx.k8s.manifests import (
    HF_HOME,
    PORT,
    Manifest,
    ServingSpec,
    engine_args,
    hf_token_env,
    model_cache,
    object_meta,
    security_context,
)
from cmx.k8s.prerequisites import DYNAMO, Requirement
from cmx.k8s.stack import StackDefaults
from cmx.k8s.stack_options import DYNAMO_IMAGE, StackOptionError
from cmx.mlperf.backends.vllm_server import engine_flags
from cmx.mlperf.serving_stack import DYNAMO as DYNAMO_STACK  # DYNAMO is the CRD it needs
from cmx.mlperf.serving_stack import Role

DYNAMO_API = "nvidia.com/v1alpha1"
FRONTEND = "Frontend"
# the role flags every Dynamo release since 0.4 takes (newer ones also spell them --disaggregation-mode ROLE)
ROLE_FLAGS = {"prefill": "--is-prefill-worker", "decode": "--is-decode-worker"}
# the KV transfer between a prefill and a decode worker: NIXL, named explicitly (newer Dynamo has no default)
KV_TRANSFER = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
SERVICE_KEYS = {"prefill": "VllmPrefillWorker", "decode": "VllmDecodeWorker", "worker": "VllmWorker"}


def roles(spec: ServingSpec) -> tuple[tuple[str, int, int], ...]:
    """(role, replicas, tensor parallel) of each worker service: prefill and decode, or one aggregated role."""
    s, tp = spec.stack, spec.engine.tensor_parallel_size
    if s.prefill_workers == 0:
        return (("worker", s.decode_workers, s.decode_tp or tp),)
    return (("prefill", s.prefill_workers, s.prefill_tp or tp), ("decode", s.decode_workers, s.decode_tp or tp))


def worker_args(spec: ServingSpec, role: str, tp: int) -> list[str]:
    """`dynamo.vllm`'s arguments: the pinned model, the role's flag, and the device profile's engine flags for
    a worker of `tp` GPUs (the same function as `vllm serve`'s)."""
    role_spec = replace(spec, gpus=tp, engine=replace(spec.engine, tensor_parallel_size=tp))
    m = spec.model
    args = ["--model", m.repo, "--revision", m.revision, "--tokenizer-revision", m.revision,
            "--served-model-name", m.repo]
    if role in ROLE_FLAGS:
        args += [ROLE_FLAGS[role], "--kv-transfer-config", KV_TRANSFER]
    if spec.engine.max_model_len is not None:
        args += ["--max-model-len", str(spec.engine.max_model_len)]
    return args + engine_flags(engine_args(role_spec)[0])


def _envs(spec: ServingSpec) -> list[dict[str, Any]]:
    _, defaults = engine_args(spec)
    return [*({"name": k, "value": v} for k, v in sorted(defaults.items())), {"name": "HF_HOME", "value": HF_HOME},
            hf_token_env(spec)]


def _pod_extras(spec: ServingSpec, container: dict[str, Any]) -> dict[str, Any]:
    """extraPodSpec: the main container and the device's pod settings (its runtime class or its groups)."""
    pod: dict[str, Any] = {"mainContainer": container}
    if spec.profile.runtime_class:
        pod["runtimeClassName"] = spec.profile.runtime_class
    if spec.profile.supplemental_groups:
        pod["securityContext"] = {"supplementalGroups": list(spec.profile.supplemental_groups)}
    return pod


def worker_service(spec: ServingSpec, role: str, replicas: int, tp: int) -> dict[str, Any]:
    container: dict[str, Any] = {"image": spec.serving_image, "command": ["python3", "-m", "dynamo.vllm"],
                                 "args": worker_args(spec, role, tp)}
    security = security_context(spec.profile)
    if security:
        container["securityContext"] = security
    gpus = {"gpu": str(tp), "gpuType": spec.profile.resource}  # the device's resource, never the other vendor's
    service: dict[str, Any] = {
        "componentType": "worker", "replicas": replicas,
        "resources": {"requests": dict(gpus), "limits": dict(gpus)},
        "envs": _envs(spec),
        "sharedMemory": {"size": spec.shm_size},
        "volumeMounts": [{"name": f"{spec.name}-model-cache", "mountPoint": HF_HOME}],
        "extraPodSpec": _pod_extras(spec, container),
    }
    if role in ROLE_FLAGS:
        service["subComponentType"] = role
    return service


def frontend_service(spec: ServingSpec) -> dict[str, Any]:
    return {"componentType": "frontend", "replicas": 1,
            "envs": [{"name": "DYN_ROUTER_MODE", "value": spec.stack.router}, hf_token_env(spec)],
            "extraPodSpec": {"mainContainer": {"image": spec.serving_image}}}


def graph_deployment(spec: ServingSpec) -> dict[str, Any]:
    services = {FRONTEND: frontend_service(spec)}
    for role, replicas, tp in roles(spec):
        services[SERVICE_KEYS[role]] = worker_service(spec, role, replicas, tp)
    return {"apiVersion": DYNAMO_API, "kind": "DynamoGraphDeployment",
            "metadata": object_meta(spec, spec.name, "server"),
            "spec": {"backendFramework": "vllm",
                     "pvcs": [{"name": f"{spec.name}-model-cache", "create": False}],
                     "services": services}}


def dynamo_objects(spec: ServingSpec) -> tuple[Manifest, ...]:
    return (Manifest("10-dynamographdeployment.yaml", graph_deployment(spec)),)


def frontend_url(spec: ServingSpec) -> str:
    """The Frontend's Service, which the operator names `<graph>-frontend`."""
    host = f"{spec.name}-{FRONTEND.lower()}"
    return f"http://{host}.{spec.namespace}.svc:{PORT}/v1" if spec.namespace else f"http://{host}:{PORT}/v1"


class DynamoStack(StackDefaults):
    """--stack dynamo: the graph's roles, each worker one pod; the Frontend routes by --router."""

    kind = DYNAMO_STACK
    options = frozenset({"prefill_workers", "decode_workers", "prefill_tp", "decode_tp", "router"})
    readme = "k8s/stacks/dynamo.md.j2"

    def check(self, spec: ServingSpec) -> None:
        s = spec.stack
        if spec.multi_node:
            raise StackOptionError("--stack dynamo renders workers of one pod each; --nodes above 1 is not rendered",
                                   hint="Dynamo spreads a worker over nodes with Grove or LeaderWorkerSet configured "
                                        "in its operator: give each role a TP within a node (--prefill-tp, "
                                        "--decode-tp), or serve across nodes with --stack llm-d or --stack vllm")
        for role, tp in (("prefill", s.prefill_tp), ("decode", s.decode_tp)):
            if tp is not None and tp > spec.gpus and tp > spec.engine.tensor_parallel_size:
                raise StackOptionError(f"--{role}-tp {tp} asks for more GPUs than one pod is given ({spec.gpus})",
                                       hint="raise --gpus, or lower the role's TP")

    def objects(self, spec: ServingSpec) -> tuple[Manifest, ...]:
        return (model_cache(spec), *dynamo_objects(spec))

    def url(self, spec: ServingSpec) -> str:
        return frontend_url(spec)

    def roles(self, spec: ServingSpec) -> tuple[Role, ...]:
        return tuple(Role(name, replicas, tp, gpus_per_pod=tp) for name, replicas, tp in roles(spec))

    def routing(self, spec: ServingSpec) -> str:
        return spec.stack.router

    def crds(self, spec: ServingSpec) -> tuple[Requirement, ...]:
        return (DYNAMO,)

    def serving_image(self, device: str, vllm_image: str) -> str:
        """Dynamo's vLLM runtime (CUDA only: Dynamo publishes no ROCm image, so a ROCm graph names its own)."""
        if device != "cuda":
            raise StackOptionError(f"--stack dynamo has no default image for {device}: NVIDIA publishes Dynamo's "
                                   "vLLM runtime for CUDA only",
                                   hint="build Dynamo with vLLM for ROCm and give it with --serving-image IMAGE")
        return DYNAMO_IMAGE


STACK = DynamoStack()

__all__ = ["DYNAMO_API", "STACK", "DynamoStack", "dynamo_objects", "frontend_url", "graph_deployment", "roles"]
