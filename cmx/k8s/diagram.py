"""A stack's diagram, drawn from its rendered manifests: what sends to what, as a Mermaid flowchart.

Each edge is read from a reference the objects hold, never drawn by hand: a Service's selector matching a
workload's pod labels, an HTTPRoute's parent Gateway and backend InferencePool, a pool's selector and
endpoint picker, the Job's endpoint URL naming a host. What a controller makes from a custom resource
(KServe from an LLMInferenceService, Dynamo's operator from a graph) is drawn dashed, labelled with the
controller, from what the resource itself says (its router, its services).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from cmx.k8s.manifests import Manifest

WORKLOADS = ("Deployment", "LeaderWorkerSet")


def _id(kind: str, name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", f"{kind}_{name}")


def _node(kind: str, name: str) -> str:
    return f'{_id(kind, name)}["{kind}<br/>{name}"]'


def _pod_labels(body: Mapping[str, Any]) -> Mapping[str, str]:
    spec = body.get("spec", {})
    template = spec.get("leaderWorkerTemplate", {}).get("leaderTemplate", {}) if body.get("kind") == "LeaderWorkerSet" \
        else spec.get("template", {})
    labels: Mapping[str, str] = template.get("metadata", {}).get("labels", {})
    return labels


def _selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _job_url(body: Mapping[str, Any]) -> str:
    command = body["spec"]["template"]["spec"]["containers"][0]["command"]
    return next((c.split("=", 1)[1] for c in command if c.startswith("endpoint_url=")), "")


def edges(manifests: Sequence[Manifest]) -> Iterator[tuple[str, str, str]]:
    """(from node, to node, label) for every reference between the objects; label "" for a plain arrow,
    a label starting with "~" for what a controller makes."""
    bodies = [m.body for m in manifests]
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for b in bodies:
        by_kind.setdefault(str(b["kind"]), []).append(b)
    named = {(str(b["kind"]), str(b["metadata"]["name"])) for b in bodies}
    for svc in by_kind.get("Service", []):
        for w in (w for kind in WORKLOADS for w in by_kind.get(kind, [])):
            if _selects(svc["spec"].get("selector", {}), _pod_labels(w)):
                yield _node("Service", svc["metadata"]["name"]), _node(w["kind"], w["metadata"]["name"]), ""
    for route in by_kind.get("HTTPRoute", []):
        for parent in route["spec"].get("parentRefs", []):
            yield _node("Gateway", parent["name"]), _node("HTTPRoute", route["metadata"]["name"]), ""
        for rule in route["spec"].get("rules", []):
            for ref in rule.get("backendRefs", []):
                yield _node("HTTPRoute", route["metadata"]["name"]), _node(ref["kind"], ref["name"]), ""
    for pool in by_kind.get("InferencePool", []):
        name = pool["metadata"]["name"]
        picker = pool["spec"].get("endpointPickerRef", {}).get("name")
        if picker:
            yield _node("InferencePool", name), _node("Service", picker), "asks which pod"
        for w in (w for kind in WORKLOADS for w in by_kind.get(kind, [])):
            if _selects(pool["spec"]["selector"].get("matchLabels", {}), _pod_labels(w)):
                yield _node("InferencePool", name), _node(w["kind"], w["metadata"]["name"]), "routes to"
    for svc in by_kind.get("Service", []):  # the picker's Service to its Deployment, by selector too
        for d in by_kind.get("Deployment", []):
            labels = _pod_labels(d)
            if "inferencepool" in labels and _selects(svc["spec"].get("selector", {}), labels):
                yield _node("Service", svc["metadata"]["name"]), _node("Deployment", d["metadata"]["name"]), ""
    for isvc in by_kind.get("LLMInferenceService", []):
        name = isvc["metadata"]["name"]
        me = _node("LLMInferenceService", name)
        made = ["HTTPRoute on KServe's gateway", f"InferencePool<br/>{name}-inference-pool", "endpoint picker",
                "LeaderWorkerSet (vLLM)" if "worker" in isvc["spec"] else "Deployment (vLLM)"]
        for text in made:
            yield me, f'{_id("kserve", text)}["{text}"]', "~KServe makes"
    for graph in by_kind.get("DynamoGraphDeployment", []):
        yield from _dynamo_edges(graph)
    for job in by_kind.get("Job", []):
        to = _entry(urlsplit(_job_url(job)).hostname or "", named, by_kind)
        yield _node("Job", job["metadata"]["name"]), to, "samples"


def _dynamo_edges(graph: Mapping[str, Any]) -> Iterator[tuple[str, str, str]]:
    """The operator's services, the Frontend's routing to its workers (its router mode, from its env), and the KV
    cache a prefill worker hands to a decode worker."""
    name = graph["metadata"]["name"]
    services = graph["spec"]["services"]
    front = next((k for k, v in services.items() if v.get("componentType") == "frontend"), None)
    roles = {k: v.get("subComponentType", "") for k, v in services.items() if k != front}
    for key, service in services.items():
        env = {e.get("name"): e.get("value") for e in service.get("envs") or []}
        detail = f"{env['DYN_ROUTER_MODE']} router" if env.get("DYN_ROUTER_MODE") else f"x{service.get('replicas', 1)}"
        yield _node("DynamoGraphDeployment", name), f'{_id(name, key)}["{key}<br/>{detail}"]', "~operator makes"
    if front is None:
        return
    for key, role in roles.items():
        yield _id(name, front), _id(name, key), role or "routes to"
    for p in (k for k, r in roles.items() if r == "prefill"):
        for d in (k for k, r in roles.items() if r == "decode"):
            yield _id(name, p), _id(name, d), "~KV cache"


def _entry(host: str, named: set[tuple[str, str]], by_kind: Mapping[str, list[Mapping[str, Any]]]) -> str:
    """The node the Job's URL reaches: a Service of ours, a Gateway of ours (its Service is the implementation's,
    `<gateway>-<class>`), a Dynamo Frontend (`<graph>-frontend`), else the host itself."""
    first = host.split(".")[0]
    if ("Service", first) in named:
        return _node("Service", first)
    gateway = next((n for k, n in sorted(named) if k == "Gateway" and first.startswith(n + "-")), None)
    if gateway:
        return _node("Gateway", gateway)
    for graph in by_kind.get("DynamoGraphDeployment", []):
        name = graph["metadata"]["name"]
        for key, service in graph["spec"]["services"].items():
            if service.get("componentType") == "frontend" and first == f"{name}-{key.lower()}":
                return _id(name, key)
    return f'{_id("entry", host)}["{host}"]'


def mermaid(manifests: Sequence[Manifest]) -> str:
    """The flowchart, left to right, each edge once, each node's label given where it first appears."""
    lines = ["flowchart LR"]
    seen: set[tuple[str, str, str]] = set()
    labelled: set[str] = set()

    def once(node: str) -> str:
        ident = node.split("[", 1)[0]
        if ident in labelled:
            return ident
        labelled.add(ident)
        return node

    for a, b, label in edges(manifests):
        key = (a.split("[", 1)[0], b.split("[", 1)[0], label)
        if key in seen:
            continue
        seen.add(key)
        a, b = once(a), once(b)
        if label.startswith("~"):
            lines.append(f"  {a} -. {label[1:]} .-> {b}")
        elif label:
            lines.append(f"  {a} -- {label} --> {b}")
        else:
            lines.append(f"  {a} --> {b}")
    return "\n".join(lines) + "\n"


__all__ = ["edges", "mermaid"]
