"""What served a benchmark behind its endpoint: the stack, its versions and its topology, as a JSON file.

`cmx deploy --k8s` writes it for the benchmark Job (a ConfigMap mounted in the Job's pod, named to the run
by `--input serving_stack=FILE`): the stack it rendered (vllm, llm-d, dynamo), each role's replicas,
tensor parallelism and pods, and, once applied, the versions read from the cluster and the nodes the
serving pods ran on. The app records it in cmx_run.json (`backend.stack`); the packager names it in the
README and counts its nodes in the system description. Nothing here is guessed: a field the deploy could
not know is absent, and said to be.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cmx.errors import CmxError


@dataclass(frozen=True)
class StackKind:
    """One serving stack (in one of its forms) as a run records it and a reader is shown it.

    name, form: the words `cmx deploy --stack` and `--llm-d-form` choose it by, and stack.json records (form "": the
    stack has one form). title, form_title: how the README, the system description and `cmx deploy` name them.
    Each entry of cmx.k8s.stacks.STACKS names its kind: the facts are here, below cmx.k8s, because the packager
    and the app read a stack.json without the Kubernetes layer.
    """

    name: str
    title: str
    form: str = ""
    form_title: str = ""


VLLM = StackKind("vllm", "vLLM")
LLMD_KSERVE = StackKind("llm-d", "llm-d", "kserve", "KServe LLMInferenceService")
LLMD_PIECES = StackKind("llm-d", "llm-d", "pieces", "InferencePool and endpoint picker")
DYNAMO = StackKind("dynamo", "NVIDIA Dynamo")
# --stack's order (and --llm-d-form's): cmx.k8s.stacks.STACKS holds one entry per kind, in this order
KINDS: tuple[StackKind, ...] = (VLLM, LLMD_KSERVE, LLMD_PIECES, DYNAMO)
STACK_NAMES = tuple(dict.fromkeys(k.name for k in KINDS))  # vllm, llm-d, dynamo
FORMS = tuple(k.form for k in KINDS if k.form)  # the forms of the stack with several (llm-d): kserve, pieces
_TITLES = {k.name: k.title for k in KINDS}
_FORM_TITLES = {k.form: k.form_title for k in KINDS if k.form}
# how requests are spread, as the title says it: llm-d's scorers, Dynamo's routers, a Service's balancing
_ROUTING_TITLES = {"prefix": "prefix-cache-aware scoring", "load": "load-aware scoring", "kv": "KV-aware routing",
                   "round-robin": "round-robin routing", "service": ""}


class ServingStackError(CmxError):
    """A serving-stack file cmx cannot read."""


@dataclass(frozen=True)
class Role:
    """One kind of serving pod group: `replicas` copies of a model instance of `tensor_parallel` GPUs each,
    spread over `pods_per_replica` pods (above 1: one instance across nodes, a LeaderWorkerSet)."""

    name: str                   # server (one kind serves all), prefill, decode
    replicas: int
    tensor_parallel: int
    gpus_per_pod: int
    pods_per_replica: int = 1

    @property
    def pods(self) -> int:
        return self.replicas * self.pods_per_replica

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod


@dataclass(frozen=True)
class ServingStack:
    """A stack as deployed.

    form: llm-d's (kserve: one LLMInferenceService; pieces: InferencePool, endpoint picker, HTTPRoute).
    routing: how requests are spread: llm-d's scorer (prefix, load), Dynamo's router (kv, round-robin),
        a Service's connection balancing (service).
    versions: component -> version, the images the manifests name and, once applied, what the cluster
        reports (a CRD's release, an operator's image).
    nodes: the distinct nodes the serving pods ran on, read from the cluster; None when not applied.
    """

    name: str
    roles: tuple[Role, ...]
    device: str
    form: str = ""
    routing: str = "service"
    entry_url: str = ""
    gpu_name: str = ""          # the cluster's GPU as the user named it (--gpu-name); "" when not named
    versions: Mapping[str, str] = field(default_factory=dict)
    nodes: int | None = None

    def __post_init__(self) -> None:
        if self.name not in STACK_NAMES:
            raise ServingStackError(f"unknown serving stack {self.name!r}", hint=f"one of {', '.join(STACK_NAMES)}")

    @property
    def pods(self) -> int:
        return sum(r.pods for r in self.roles)

    @property
    def gpus(self) -> int:
        return sum(r.gpus for r in self.roles)

    @property
    def disaggregated(self) -> bool:
        return any(r.name == "prefill" for r in self.roles)

    def title(self) -> str:
        """"llm-d (KServe LLMInferenceService, prefix-cache-aware scoring)", "Dynamo (KV-aware routing)"."""
        form = _FORM_TITLES.get(self.form)
        routing = _ROUTING_TITLES.get(self.routing, self.routing)
        name = _TITLES[self.name]
        detail = ", ".join(p for p in (form, routing) if p)
        return f"{name} ({detail})" if detail else name

    def topology(self) -> str:
        """"1 prefill x TP 8 + 2 decode x TP 4, 16 GPUs in 3 pods on 2 nodes"."""
        parts = [f"{r.replicas} {r.name} x TP {r.tensor_parallel}" +
                 (f" over {r.pods_per_replica} pods" if r.pods_per_replica > 1 else "") for r in self.roles]
        where = f"on {self.nodes} node{'s' if self.nodes != 1 else ''}" if self.nodes else "(nodes not read)"
        pods = f"{self.pods} pod{'s' if self.pods != 1 else ''}"
        return f"{' + '.join(parts)}, {self.gpus} {self.device} GPUs in {pods} {where}"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "versions": dict(self.versions), "roles": [asdict(r) for r in self.roles]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "the serving stack") -> ServingStack:
        try:
            roles = tuple(Role(**r) for r in data["roles"])
            keys = ("name", "device", "form", "routing", "entry_url", "gpu_name", "nodes")
            versions = {str(k): str(v) for k, v in (data.get("versions") or {}).items()}
            return cls(**{k: data[k] for k in keys if k in data}, roles=roles, versions=versions)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ServingStackError(f"{source} is not a serving-stack description ({exc})",
                                    hint="it is the stack.json `cmx deploy --k8s` writes; give it unchanged") from None


def read_stack_file(path: Path) -> ServingStack:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ServingStackError(f"cannot read the serving-stack file {path}: {exc}",
                                hint="give the stack.json `cmx deploy --k8s` wrote (--input serving_stack=FILE)") \
            from None
    if not isinstance(data, Mapping):
        raise ServingStackError(f"{path} is not a serving-stack description (not a JSON object)")
    return ServingStack.from_json(data, str(path))


__all__ = ["DYNAMO", "FORMS", "KINDS", "LLMD_KSERVE", "LLMD_PIECES", "STACK_NAMES", "VLLM", "Role", "ServingStack",
           "ServingStackError", "StackKind", "read_stack_file"]
