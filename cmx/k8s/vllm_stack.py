"""--stack vllm: one `vllm serve` Deployment (a LeaderWorkerSet across nodes) behind a Service, the objects
cmx.k8s.manifests renders; the benchmark Job sends to the Service, ready when its /health answers."""

from __future__ import annotations

from cmx.k8s.manifests import JobTarget, Manifest, ServingSpec, model_cache, service_target
from cmx.k8s.stack import StackDefaults, vllm_servers
from cmx.mlperf.serving_stack import VLLM


class VllmStack(StackDefaults):
    kind = VLLM

    def objects(self, spec: ServingSpec) -> tuple[Manifest, ...]:
        return (model_cache(spec), *vllm_servers(spec))

    def target(self, spec: ServingSpec) -> JobTarget:
        return super().target(spec) if spec.stack.entry_url else service_target(spec)

    def url(self, spec: ServingSpec) -> str:
        return spec.service_url


STACK = VllmStack()

__all__ = ["STACK", "VllmStack"]
