"""--stack llm-d --llm-d-form kserve (the default form): one KServe LLMInferenceService.

KServe's controller makes the rest from it: the workload Deployment or LeaderWorkerSet, the InferencePool
`<name>-inference-pool`, the endpoint picker, the HTTPRoute on its gateway. It is Red Hat AI's "Distributed
Inference with llm-d", what Red Hat's v6.0 gpt-oss-120b result ran on. KServe's storage initializer fetches
the weights, so the benchmark Job downloads the tokenizer itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cmx.k8s.llmd import LlmdStack, picker_config
from cmx.k8s.manifests import Manifest, ServingSpec, engine_args, object_meta, security_context, server_env
from cmx.k8s.prerequisites import GATEWAY, KSERVE, POOL, ROUTE, Requirement
from cmx.mlperf.backends.vllm_server import engine_flags
from cmx.mlperf.serving_stack import LLMD_KSERVE

if TYPE_CHECKING:
    from cmx.k8s.cluster import Cluster

KSERVE_API = "serving.kserve.io/v1alpha1"   # served by every KServe with LLMInferenceService (v1alpha2 beside it)
# KServe's default endpoint picker is llm-d's router, which reads its own group (GIE's EPP reads the older one)
EPP_CONFIG_API = "llm-d.ai/v1alpha1"


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
                   "scheduler": {"config": {"inline": picker_config(spec.stack.scorer, EPP_CONFIG_API)}}},
    }
    if spec.multi_node:
        body["worker"] = kserve_pod(spec, spec.gpus)
    return {"apiVersion": KSERVE_API, "kind": "LLMInferenceService",
            "metadata": object_meta(spec, spec.name, "server"), "spec": body}


def kserve_objects(spec: ServingSpec) -> tuple[Manifest, ...]:
    return (Manifest("10-llminferenceservice.yaml", llm_inference_service(spec)),)



def kserve_url(spec: ServingSpec) -> str:
    """KServe's route on its default gateway (kserve/kserve-ingress-gateway) serves `/<namespace>/<name>/v1`; the
    gateway's in-cluster host depends on the gateway implementation: --apply reads the service's status.url."""
    namespace = spec.namespace or "default"
    return f"http://kserve-ingress-gateway.kserve.svc.cluster.local/{namespace}/{spec.name}/v1"



class LlmdKserve(LlmdStack):
    kind = LLMD_KSERVE
    options = LlmdStack.options | {"expert_parallel"}
    tokenizer_from_hub = True
    readme = "k8s/stacks/llmd_kserve.md.j2"

    def objects(self, spec: ServingSpec) -> tuple[Manifest, ...]:
        return kserve_objects(spec)

    def url(self, spec: ServingSpec) -> str:
        return kserve_url(spec)

    def crds(self, spec: ServingSpec) -> tuple[Requirement, ...]:
        return KSERVE, GATEWAY, ROUTE, POOL

    def found_url(self, cluster: Cluster, spec: ServingSpec, manifests: Sequence[Manifest]) -> str | None:
        """The LLMInferenceService's own URL (its status.url)."""
        isvc = next(m.body for m in manifests if m.kind == "LLMInferenceService")
        return cluster.kserve_url(isvc)


STACK = LlmdKserve()

__all__ = ["KSERVE_API", "STACK", "LlmdKserve", "kserve_objects", "kserve_url", "llm_inference_service"]
