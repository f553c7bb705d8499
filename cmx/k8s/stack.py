"""The serving-stack contract (`Stack`) and the defaults most stacks share (`StackDefaults`).

A stack renders its serving objects from a ServingSpec, says where the benchmark Job sends (its target), what
the Job records of it, and the CRDs its objects need. An entry (cmx.k8s.vllm_stack, cmx.k8s.llmd_kserve,
cmx.k8s.llmd_pieces, cmx.k8s.dynamo) holds only what is its own; cmx.k8s.stacks is the registry that knows
them. What every stack shares lives outside the entries: the results volume, the stack's description and the
benchmark Job (cmx.k8s.manifests, assembled by cmx.k8s.stacks.all_objects), the LeaderWorkerSet requirement of
a model across nodes (here).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from cmx.k8s.manifests import JobTarget, Manifest, ServingSpec, deployment, leader_worker_set, service
from cmx.k8s.prerequisites import LWS, Requirement
from cmx.mlperf.serving_stack import Role, ServingStack, StackKind

if TYPE_CHECKING:  # --apply's cluster is only read by a stack that asks it for its entry point
    from cmx.k8s.cluster import Cluster


class Stack(Protocol):
    """One `--stack` (with its `--llm-d-form`, where it has forms).

    kind: the stack and form it renders (cmx.mlperf.serving_stack: its words and titles); `name` and `form` are the
        kind's, the words the options choose it by (form "": the stack has one form).
    options: the StackOptions fields of its own; another stack's, given, are refused.
    readme: the template of the README rendered beside the objects (templates/, its prose about the stack).
    """

    kind: StackKind
    options: frozenset[str]
    readme: str

    @property
    def name(self) -> str: ...

    @property
    def form(self) -> str: ...

    def check(self, spec: ServingSpec) -> None:
        """Refuse what the stack cannot render from this spec (StackOptionError), before anything is."""

    def objects(self, spec: ServingSpec) -> tuple[Manifest, ...]:
        """The stack's own objects (not the results volume, not the benchmark), checked first."""

    def target(self, spec: ServingSpec) -> JobTarget:
        """Where the benchmark Job sends: the stack's entry point, or the user's --entry-url."""

    def record(self, spec: ServingSpec, target: JobTarget) -> ServingStack:
        """What the Job records of the stack, as far as the manifests say it."""

    def requirements(self, spec: ServingSpec) -> tuple[Requirement, ...]:
        """The CRDs the objects need, one per custom kind rendered or made for the stack."""

    def serving_image(self, device: str, vllm_image: str) -> str:
        """The servers' image when --serving-image is not given (`vllm_image`: the device's pinned vLLM)."""

    def found_url(self, cluster: Cluster, spec: ServingSpec, manifests: Sequence[Manifest]) -> str | None:
        """--apply: the entry point as the cluster names it, where that can differ from the rendered one
        (None: the rendered one)."""


class StackDefaults:
    """What a stack does unless it says otherwise: one server role of `replicas` pods, reached at `url`, with
    the tokenizer read from the model cache, routed by a Service, needing no CRD but LeaderWorkerSet across
    nodes, served by the device's vLLM image."""

    kind: StackKind
    options: frozenset[str] = frozenset()
    # a stack with prose of its own extends it (templates/k8s/stacks/)
    readme: str = "k8s/README.md.j2"
    # an init container downloads the tokenizer (the stack's servers do not fill cmx's model cache)
    tokenizer_from_hub: bool = False

    @property
    def name(self) -> str:
        return self.kind.name

    @property
    def form(self) -> str:
        return self.kind.form

    def check(self, spec: ServingSpec) -> None:
        return None

    def objects(self, spec: ServingSpec) -> tuple[Manifest, ...]:
        raise NotImplementedError(f"the {self.name} stack names no objects")

    def url(self, spec: ServingSpec) -> str:
        raise NotImplementedError(f"the {self.name} stack names no entry point")

    def target(self, spec: ServingSpec) -> JobTarget:
        # a gateway's route need not pass /health: the entry point is ready when its model list answers
        url = spec.stack.entry_url or self.url(spec)
        return JobTarget(url, url + "/models", tokenizer_from_hub=self.tokenizer_from_hub)

    def roles(self, spec: ServingSpec) -> tuple[Role, ...]:
        tp = spec.engine.tensor_parallel_size
        per_pod = tp if spec.multi_node else spec.gpus
        return (Role("server", spec.stack.replicas, tp, gpus_per_pod=per_pod, pods_per_replica=spec.nodes),)

    def routing(self, spec: ServingSpec) -> str:
        return "service"

    def versions(self, spec: ServingSpec) -> dict[str, str]:
        return {"serving image": spec.serving_image}

    def record(self, spec: ServingSpec, target: JobTarget) -> ServingStack:
        return ServingStack(name=self.name, roles=self.roles(spec), device=spec.device, form=self.form,
                            routing=self.routing(spec), entry_url=target.url, gpu_name=spec.gpu_name,
                            versions=self.versions(spec))

    def crds(self, spec: ServingSpec) -> tuple[Requirement, ...]:
        return ()

    def requirements(self, spec: ServingSpec) -> tuple[Requirement, ...]:
        return (*self.crds(spec), *((LWS,) if spec.multi_node else ()))

    def serving_image(self, device: str, vllm_image: str) -> str:
        return vllm_image

    def found_url(self, cluster: Cluster, spec: ServingSpec, manifests: Sequence[Manifest]) -> str | None:
        return None


def vllm_servers(spec: ServingSpec) -> tuple[Manifest, Manifest]:
    """cmx's own `vllm serve` pods (a Deployment, a LeaderWorkerSet across nodes) and the Service in front."""
    server = (Manifest("10-leaderworkerset.yaml", leader_worker_set(spec)) if spec.multi_node
              else Manifest("10-deployment.yaml", deployment(spec)))
    return server, Manifest("20-service.yaml", service(spec))


__all__ = ["Stack", "StackDefaults", "vllm_servers"]
