"""`cmx deploy --apply` after the objects are rendered: check the cluster has what the stack needs, apply the stack,
wait until it serves, smoke-test it through its entry point, then start the benchmark Job and read its result;
and `--delete`, which removes what --apply made.

Every step talks to the API server through the kubernetes client (cmx.k8s.apply makes it from the kubeconfig):
CRDs are read from apiextensions, objects applied server-side, status read back, the entry point reached
through the API server's service proxy (the cluster's network is not this machine's), the Job's pod log read
at the end. Each failure names the object, what the cluster said, and the kubectl line that shows more.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from cmx.k8s import K8sError
from cmx.k8s.apply import Applied, ClusterError
from cmx.k8s.crd_schema import CrdSchema, crd_from_object
from cmx.k8s.prerequisites import Requirement
from cmx.mlperf.serving_stack import ServingStack

GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"
# a container in one of these states will not start by waiting: said at once, not after the timeout
STUCK = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CrashLoopBackOff", "CreateContainerConfigError",
         "CreateContainerError")
BENCHMARK_CONTAINER = "benchmark"


class MissingPrerequisites(K8sError):
    """The cluster lacks CRDs the stack needs."""


class NotReady(K8sError):
    """A stack object did not become ready, or its pods cannot start."""


class SmokeTestFailed(K8sError):
    """The stack's entry point does not list the served model."""


@dataclass(frozen=True)
class Waits:
    """How long --apply waits, and how often it looks (tests shorten them)."""

    ready_s: float = 3600.0        # the first start downloads the weights
    job_s: float | None = None     # the benchmark: as long as it takes, unless given
    poll_s: float = 10.0


@dataclass(frozen=True)
class JobOutcome:
    """The benchmark Job as it ended: its pod, whether it succeeded, and what its `cmx run --json` printed."""

    name: str
    pod: str
    succeeded: bool
    result: Mapping[str, Any] | None
    log_tail: str


Say = Callable[[str], None]


def _installed_crds(api: Any) -> dict[str, dict[str, Any]]:
    from kubernetes import client

    listing = client.ApiextensionsV1Api(api).list_custom_resource_definition(_preload_content=False)
    return {item["metadata"]["name"]: item for item in json.loads(listing.data).get("items", [])}


def require(api: Any, needs: Sequence[Requirement]) -> tuple[CrdSchema, ...]:
    """The needed CRDs as the cluster serves them; MissingPrerequisites with a line per missing one."""
    installed = _installed_crds(api)
    missing = [r for r in needs if r.crd not in installed]
    if missing:
        lines = "\n".join(f"  - {r.crd} ({r.what}): {r.install}" for r in missing)
        raise MissingPrerequisites(f"the cluster at {api.configuration.host} lacks what the stack needs:\n{lines}",
                                   hint="install each as its project's docs say (the commands above), then run "
                                        "again; `kubectl get crd` lists what is installed")
    source = f"the cluster at {api.configuration.host}"
    return tuple(crd_from_object(installed[r.crd], source) for r in needs)


def crd_versions(crds: Sequence[CrdSchema]) -> dict[str, str]:
    return {f"{c.kind} CRD": c.release for c in crds if c.release}


# --- readiness -----------------------------------------------------------------------------------------


def _condition(body: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in body.get("status", {}).get("conditions") or [] if c.get("type") == kind), None)


def is_ready(body: Mapping[str, Any]) -> bool | None:
    """Whether a stack object serves; None for a kind with nothing to wait for (a volume, a role)."""
    kind, status = body["kind"], body.get("status") or {}
    if kind in ("Deployment", "LeaderWorkerSet", "StatefulSet"):
        wanted = body.get("spec", {}).get("replicas", 1)
        return bool((status.get("readyReplicas") or 0) >= wanted)
    if kind in ("LLMInferenceService", "DynamoGraphDeployment"):
        ready = _condition(body, "Ready")
        return bool(ready and ready.get("status") == "True") or status.get("state") == "successful"
    if kind == "Gateway":
        programmed = _condition(body, "Programmed")
        return bool(programmed and programmed.get("status") == "True")
    return None


def pod_trouble(pod: Mapping[str, Any]) -> tuple[str, bool] | None:
    """What keeps a pod from serving, and whether it is stuck (waiting will not help): a container waiting in
    an error state, or the pod unschedulable (which an autoscaler may still fix)."""
    status = pod.get("status") or {}
    for c in status.get("containerStatuses") or []:
        waiting = (c.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in STUCK:
            return f"container {c.get('name')} is {waiting['reason']}: {waiting.get('message') or ''}".strip(), True
    scheduled = _condition(pod, "PodScheduled")
    if scheduled and scheduled.get("status") == "False":
        return f"{scheduled.get('reason')}: {scheduled.get('message') or ''}".strip(), False
    return None


class Cluster:
    """The API server of a kubeconfig, for one stack's objects in one namespace."""

    def __init__(self, api: Any, namespace: str, prefix: str, say: Say, waits: Waits) -> None:
        from kubernetes import dynamic

        self.api, self.namespace, self.prefix, self.say, self.waits = api, namespace, prefix, say, waits
        self.client = dynamic.DynamicClient(api)

    def read(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        from kubernetes.dynamic.exceptions import NotFoundError

        resource = self.client.resources.get(api_version=body["apiVersion"], kind=body["kind"])
        try:
            return dict(resource.get(name=body["metadata"]["name"], namespace=self._ns(body)).to_dict())
        except NotFoundError:
            return None

    def _ns(self, body: Mapping[str, Any]) -> str:
        return str(body["metadata"].get("namespace") or self.namespace)

    def pods(self, selector: str | None = None) -> list[dict[str, Any]]:
        from kubernetes import client

        listing = client.CoreV1Api(self.api).list_namespaced_pod(self.namespace, label_selector=selector or "",
                                                                 _preload_content=False)
        items = json.loads(listing.data).get("items", [])
        if selector:
            return list(items)
        # the stack's pods are named after it: ours, KServe's (<name>-kserve-...), Dynamo's (<name>-frontend-...)
        return [p for p in items if p["metadata"]["name"].startswith(self.prefix + "-")]

    def wait_ready(self, bodies: Sequence[Mapping[str, Any]]) -> None:
        waiting = [b for b in bodies if is_ready(dict(b, status={})) is not None]
        deadline = time.monotonic() + self.waits.ready_s
        last_note = ""
        while waiting:
            waiting = [b for b in waiting if not is_ready(self.read(b) or b)]
            if not waiting:
                break
            troubles = [(p["metadata"]["name"], t) for p in self.pods() if (t := pod_trouble(p))]
            stuck = [(name, text) for name, (text, hard) in troubles if hard]
            if stuck:
                name, text = stuck[0]
                raise NotReady(f"{_names(waiting)} will not become ready: pod {name}: {text}",
                               hint=f"kubectl -n {self.namespace} describe pod {name}")
            note = "; ".join(f"{name}: {text}" for name, (text, _) in troubles)
            if note and note != last_note:
                self.say(f"waiting for {_names(waiting)}: {note}")
                last_note = note
            if time.monotonic() > deadline:
                raise NotReady(f"{_names(waiting)} did not become ready in {self.waits.ready_s:.0f} s"
                               + (f" ({note})" if note else ""),
                               hint=f"kubectl -n {self.namespace} get pods; kubectl -n {self.namespace} describe "
                                    f"{waiting[0]['kind'].lower()} {waiting[0]['metadata']['name']}")
            time.sleep(self.waits.poll_s)

    # --- the entry point -------------------------------------------------------------------------------
    def gateway_url(self, gateway: str, port: int) -> str | None:
        """The in-cluster URL of a Gateway's Service, found by the label Gateway API implementations set."""
        from kubernetes import client

        listing = client.CoreV1Api(self.api).list_namespaced_service(
            self.namespace, label_selector=f"{GATEWAY_NAME_LABEL}={gateway}", _preload_content=False)
        items = json.loads(listing.data).get("items", [])
        if not items:
            return None
        name = items[0]["metadata"]["name"]
        return f"http://{name}.{self.namespace}.svc.cluster.local:{port}/v1"

    def kserve_url(self, body: Mapping[str, Any]) -> str | None:
        """An LLMInferenceService's URL: an in-cluster address when it lists one, else its status.url."""
        status = (self.read(body) or {}).get("status") or {}
        urls = [a.get("url") for a in status.get("addresses") or [] if a.get("url")]
        inside = next((u for u in urls if ".svc" in (urlsplit(u).hostname or "")), None)
        url = inside or status.get("url")
        return f"{url.rstrip('/')}/v1" if url else None

    def models(self, url: str) -> tuple[str, ...]:
        """GET {url}/models through the API server's proxy (an in-cluster Service), or directly (an address
        outside the cluster); the model ids it lists."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        path = f"{parts.path.rstrip('/')}/models".lstrip("/")
        try:
            if "." not in host or ".svc" in host:
                from kubernetes import client

                labels = host.split(".")
                namespace = labels[1] if len(labels) > 1 and labels[1] != "svc" else self.namespace
                port = parts.port or (443 if parts.scheme == "https" else 80)
                response = client.CoreV1Api(self.api).connect_get_namespaced_service_proxy_with_path(
                    f"{labels[0]}:{port}", namespace, path, _preload_content=False)
                data = json.loads(response.data)
            else:
                import requests

                answer = requests.get(f"{url.rstrip('/')}/models", timeout=30)
                answer.raise_for_status()
                data = answer.json()
        except Exception as exc:  # noqa: BLE001 - the client's ApiException, urllib3's and requests' errors alike
            raise SmokeTestFailed(f"GET {url}/models through the stack's entry point failed: {_short(exc)}",
                                  hint="the stack reported ready, but its route does not answer: check the "
                                       f"gateway and route (kubectl -n {self.namespace} get gateway,httproute)") \
                from None
        return tuple(str(m.get("id")) for m in data.get("data", []) if isinstance(m, Mapping))

    # --- versions and nodes ---------------------------------------------------------------------------------
    def observed(self, stack: ServingStack, crds: Sequence[CrdSchema]) -> ServingStack:
        """The stack with what the cluster says: CRD releases, the images its pods run, the nodes they run on."""
        pods = [p for p in self.pods() if "job-name" not in (p["metadata"].get("labels") or {})]
        images: dict[str, set[str]] = {}
        for pod in pods:
            for c in pod.get("spec", {}).get("containers", []):
                images.setdefault(f"image ({c['name']})", set()).add(c["image"])
        gpu_pods = [p for p in pods if any(_requests_gpu(c) for c in p.get("spec", {}).get("containers", []))]
        nodes = {p["spec"].get("nodeName") for p in gpu_pods if p.get("spec", {}).get("nodeName")}
        versions = {**stack.versions, **crd_versions(crds), **{k: ", ".join(sorted(v)) for k, v in images.items()}}
        return replace(stack, versions=versions, nodes=len(nodes) or None)

    # --- the benchmark ---------------------------------------------------------------------------------
    def wait_job(self, body: Mapping[str, Any]) -> JobOutcome:
        name = body["metadata"]["name"]
        deadline = None if self.waits.job_s is None else time.monotonic() + self.waits.job_s
        while True:
            status = (self.read(body) or {}).get("status") or {}
            if status.get("succeeded") or status.get("failed"):
                break
            if deadline is not None and time.monotonic() > deadline:
                raise ClusterError(f"the benchmark Job {name} did not finish in {self.waits.job_s:.0f} s",
                                   hint=f"it goes on in the cluster: kubectl -n {self.namespace} logs -f job/{name} "
                                        f"-c {BENCHMARK_CONTAINER}")
            time.sleep(self.waits.poll_s)
        pods = self.pods(f"job-name={name}")
        pod = pods[-1]["metadata"]["name"] if pods else ""
        log = self._log(pod) if pod else ""
        return JobOutcome(name=name, pod=pod, succeeded=bool(status.get("succeeded")), result=last_json(log),
                          log_tail=log[-4000:])

    def _log(self, pod: str) -> str:
        from kubernetes import client

        response = client.CoreV1Api(self.api).read_namespaced_pod_log(pod, self.namespace,
                                                                      container=BENCHMARK_CONTAINER,
                                                                      _preload_content=False)
        return bytes(response.data).decode("utf-8", "replace")

    def wait_gone(self, body: Mapping[str, Any]) -> None:
        """Until a deleted object is gone (its dependents first, with foreground deletion)."""
        deadline = time.monotonic() + self.waits.ready_s
        while self.read(body) is not None:
            if time.monotonic() > deadline:
                raise ClusterError(f"{_names([body])} is still there {self.waits.ready_s:.0f} s after its deletion",
                                   hint=f"kubectl -n {self._ns(body)} get {body['kind'].lower()} "
                                        f"{body['metadata']['name']} -o yaml (its finalizers)")
            time.sleep(self.waits.poll_s)

    def delete(self, bodies: Sequence[Mapping[str, Any]]) -> list[Applied]:
        """Delete the objects, last applied first; one already gone, or of a kind the cluster lacks, is skipped."""
        from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

        gone = []
        for body in reversed(bodies):
            try:
                resource = self.client.resources.get(api_version=body["apiVersion"], kind=body["kind"])
            except ResourceNotFoundError:
                continue
            try:
                resource.delete(name=body["metadata"]["name"], namespace=self._ns(body),
                                body={"propagationPolicy": "Foreground"})
            except NotFoundError:
                continue
            gone.append(Applied(body["kind"], body["metadata"]["name"], self._ns(body)))
        return gone


def _requests_gpu(container: Mapping[str, Any]) -> bool:
    limits = (container.get("resources") or {}).get("limits") or {}
    return any(k.endswith("/gpu") for k in limits)


def last_json(log: str) -> Mapping[str, Any] | None:
    """The JSON document `cmx run --json` prints last (its first line starts at column 0 with `{`)."""
    start = log.rfind("\n{")
    start = 0 if start < 0 and log.startswith("{") else start + 1
    if start < 0:
        return None
    try:
        value = json.loads(log[start:])
    except ValueError:
        return None
    return value if isinstance(value, Mapping) else None


def _names(bodies: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"{b['kind']} {b['metadata']['name']}" for b in bodies)


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "reason", None) or exc)
    status = getattr(exc, "status", None)
    return f"{status} {text}" if status else text


__all__ = ["Cluster", "JobOutcome", "MissingPrerequisites", "NotReady", "SmokeTestFailed", "Waits",
           "is_ready", "last_json", "pod_trouble", "require"]
