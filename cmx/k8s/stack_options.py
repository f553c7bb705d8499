"""Which serving stack `cmx deploy` renders, and the choices each stack takes (`--stack` and its options).

- vllm: one `vllm serve` Deployment (a LeaderWorkerSet across nodes) behind a Service: today's renderer.
- llm-d, in two forms. kserve (the default): one KServe LLMInferenceService, from which KServe makes the
  Gateway route, InferencePool, endpoint picker and workloads; it is Red Hat AI's "Distributed Inference
  with llm-d", what Red Hat's v6.0 gpt-oss-120b result ran on. pieces: the upstream parts llm-d's Helm
  guides install, rendered as objects: the vLLM pods, an InferencePool selecting them, the endpoint picker
  (EPP) with its config and RBAC, a Gateway and the HTTPRoute to the pool.
- dynamo: one NVIDIA Dynamo DynamoGraphDeployment: a Frontend, prefill and decode vLLM workers, and a
  KV-aware or round-robin router.
"""

from __future__ import annotations

from dataclasses import dataclass

from cmx.k8s import K8sError, values
from cmx.mlperf.serving_stack import FORMS as LLMD_FORMS  # --llm-d-form's choices: llm-d is the stack with forms
from cmx.mlperf.serving_stack import STACK_NAMES  # --stack's choices

SCORERS = ("prefix", "load")
ROUTERS = ("kv", "round-robin")
# GIE's last release with its own endpoint picker; llm-d's builds (ghcr.io/llm-d/llm-d-inference-scheduler)
# take the same flags and config (--epp-image)
EPP_IMAGE = "registry.k8s.io/gateway-api-inference-extension/epp:v1.5.0"
GATEWAY_CLASS = "istio"
# NVIDIA's Dynamo runtime with vLLM; Dynamo publishes no ROCm image, so _rocm takes --serving-image
DYNAMO_IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.8.1"


class StackOptionError(K8sError):
    """A stack option that does not fit the stack or the plan."""


@dataclass(frozen=True)
class StackOptions:
    """The stack and its choices; a choice of another stack than the one named is refused (`check`).

    replicas: model-server replicas (llm-d: pods the pool spreads requests over; vllm: 1).
    gateway: llm-d pieces: an existing Gateway the HTTPRoute attaches to (None: one is rendered, of
        `gateway_class`).
    prefill_workers, decode_workers, prefill_tp, decode_tp: Dynamo's roles (0 prefill workers: aggregated
        workers that do both); a TP of None is the plan's tensor_parallel_size.
    entry_url: the URL the benchmark Job sends to, when the stack's default (the Service's, the Gateway's
        in-cluster Service, the Frontend's) is not how your cluster reaches it.
    """

    name: str = "vllm"
    llmd_form: str = "kserve"
    scorer: str = "load"
    replicas: int = 1
    gateway: str | None = None
    gateway_class: str = GATEWAY_CLASS
    epp_image: str = EPP_IMAGE
    prefill_workers: int = 1
    decode_workers: int = 1
    prefill_tp: int | None = None
    decode_tp: int | None = None
    router: str = "kv"
    expert_parallel: bool = False
    entry_url: str | None = None

    def __post_init__(self) -> None:
        choices = ((self.name, STACK_NAMES, "--stack"), (self.llmd_form, LLMD_FORMS, "--llm-d-form"),
                   (self.scorer, SCORERS, "--scorer"), (self.router, ROUTERS, "--router"))
        for value, allowed, option in choices:
            if value not in allowed:
                raise StackOptionError(f"{option} {value!r} is not one of {', '.join(allowed)}")
        # the CRDs say int32; cmx.k8s.values bounds them further to what a real deployment has
        values.count("--replicas", self.replicas, 1, values.MAX_REPLICAS, "model-server replicas")
        values.count("--prefill-workers", self.prefill_workers, 0, values.MAX_REPLICAS, "workers of one role")
        values.count("--decode-workers", self.decode_workers, 1, values.MAX_REPLICAS, "workers of one role")
        values.count("--prefill-workers + --decode-workers", self.prefill_workers + self.decode_workers, 1,
                     values.MAX_REPLICAS, "workers of one graph")
        for flag, tp in (("--prefill-tp", self.prefill_tp), ("--decode-tp", self.decode_tp)):
            if tp is not None:
                values.count(flag, tp, 1, values.MAX_GPUS, "GPUs of one pod")
        if self.gateway is not None:
            values.dns_subdomain("--gateway", self.gateway)
        values.dns_subdomain("--gateway-class", self.gateway_class)
        values.image("--epp-image", self.epp_image)
        if self.entry_url is not None:
            values.url("--entry-url", self.entry_url)


__all__ = ["DYNAMO_IMAGE", "EPP_IMAGE", "GATEWAY_CLASS", "ROUTERS", "SCORERS", "StackOptionError", "StackOptions"]
