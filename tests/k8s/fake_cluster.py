"""A fake Kubernetes API server on 127.0.0.1, for tests of `cmx deploy --apply` driven by the real kubernetes client.

It answers the few calls cmx makes (version, discovery, CRDs, server-side apply, get, list by labels, delete, pod
logs, the service proxy) as an API server does, errors included (a `Status` object), and stands in for the
cluster's controllers just enough: applying a Deployment, StatefulSet, LeaderWorkerSet, Job or Gateway creates
its pods (or Service) and sets its status at once, so a readiness poll sees the final state on its first read.

    with FakeCluster([real_crd("leaderworkerset.x-k8s.io_leaderworkersets.yaml")], namespace="mlperf") as cluster:
        api = kubernetes.config.new_client_from_config(str(cluster.kubeconfig(tmp_path / "kubeconfig")))
        client = kubernetes.dynamic.DynamicClient(api)

Each fake serves under a path of its own (`url` is http://127.0.0.1:PORT/fake-ID): the dynamic client caches
discovery in a temp file named after the server URL, so a unique URL keeps one fake from ever reading another's
cache (a reused port would otherwise find a stale one); within one fake a kind added later is found anyway,
because the client re-reads discovery when a kind is missing from its cache.

Every request is handled under one lock, in arrival order; what a test reads back (`get`, `objects`) are copies.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

SHARED_CRDS = Path("/work/shared/k8s-crds")
APPLY_PATCH = "application/apply-patch+yaml"
CREATED = "2026-01-01T00:00:00Z"
GPU_SHORTAGE = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
JOB_NAME_LABELS = ("job-name", "batch.kubernetes.io/job-name")
GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"

Body = dict[str, Any]
Controller = Callable[["FakeCluster", Body], None]


@dataclass(frozen=True)
class Kind:
    """One resource the server knows: what discovery lists and what the paths name."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


BUILTIN_KINDS = (
    Kind("", "v1", "Pod", "pods"),
    Kind("", "v1", "Service", "services"),
    Kind("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    Kind("", "v1", "ConfigMap", "configmaps"),
    Kind("", "v1", "ServiceAccount", "serviceaccounts"),
    Kind("", "v1", "Secret", "secrets"),
    Kind("", "v1", "Namespace", "namespaces", namespaced=False),
    Kind("apps", "v1", "Deployment", "deployments"),
    Kind("apps", "v1", "StatefulSet", "statefulsets"),
    Kind("batch", "v1", "Job", "jobs"),
    Kind("rbac.authorization.k8s.io", "v1", "Role", "roles"),
    Kind("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings"),
    Kind("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", namespaced=False),
)


def crd(group: str, version: str, kind: str, plural: str, namespaced: bool = True,
        schema: Body | None = None) -> Body:
    """A minimal CustomResourceDefinition, for kinds whose real CRD is not at hand (Gateway API, Dynamo)."""
    schema = schema or {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced" if namespaced else "Cluster",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
                     "versions": [{"name": version, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


def load_yaml(text: str) -> Any:
    """yaml.safe_load, with libyaml's parser where PyYAML has it: the real CRDs are megabytes of schema."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@functools.cache
def _parsed_crd(filename: str) -> Body:
    return dict(load_yaml((SHARED_CRDS / filename).read_text(encoding="utf-8")))


def real_crd(filename: str) -> Body:
    """A copy of one of the projects' own CRDs in /work/shared/k8s-crds (InferencePool, LeaderWorkerSet,
    LLMInferenceService), parsed once per process (LLMInferenceService's 2.7 MB take seconds)."""
    return copy.deepcopy(_parsed_crd(filename))


GATEWAY_CRDS = (crd("gateway.networking.k8s.io", "v1", "Gateway", "gateways"),
                crd("gateway.networking.k8s.io", "v1", "HTTPRoute", "httproutes"))
DYNAMO_CRD = crd("nvidia.com", "v1alpha1", "DynamoGraphDeployment", "dynamographdeployments")


def crd_kinds(body: Body) -> list[Kind]:
    """The kinds a CRD serves, one per served version."""
    spec, names = body["spec"], body["spec"]["names"]
    return [Kind(spec["group"], v["name"], names["kind"], names["plural"], spec.get("scope") != "Cluster")
            for v in spec["versions"] if v.get("served", True)]


def version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes' order of versions in a group (v2 > v1 > v1beta2 > v1beta1 > v1alpha1): the first is preferred."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not match:
        return (-1, 0, 0)
    stability = {"alpha": 0, "beta": 1, None: 2}[match.group(2)]
    return (stability, int(match.group(1)), int(match.group(3) or 0))


@dataclass(frozen=True)
class PodProblem:
    """Why a workload's pods never become ready: `Unschedulable` (Pending, not scheduled) or a container's
    waiting reason (`CrashLoopBackOff`, `ImagePullBackOff`, `ErrImagePull`...)."""

    reason: str = "Unschedulable"
    message: str = GPU_SHORTAGE


def matches(labels: dict[str, str], selector: str) -> bool:
    """Whether labels satisfy a label selector: `a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`."""
    for term in (t.strip() for t in re.split(r",(?![^(]*\))", selector) if t.strip()):
        if match := re.fullmatch(r"([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)", term):
            key, op, values = match.group(1), match.group(2), {v.strip() for v in match.group(3).split(",")}
            if (labels.get(key) in values) != (op == "in") or (op == "in" and key not in labels):
                return False
        elif "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


@dataclass(frozen=True)
class Answer:
    """One HTTP response."""

    code: int
    body: bytes
    content_type: str = "application/json"

    @classmethod
    def json(cls, code: int, value: Any) -> Answer:
        return cls(code, json.dumps(value).encode())


class ApiError(Exception):
    """An error the API server answers with a Status object."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def answer(self) -> Answer:
        return Answer.json(self.code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                       "message": self.message, "reason": self.reason, "code": self.code})


def not_found(kind: Kind, name: str) -> ApiError:
    resource = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
    return ApiError(404, "NotFound", f'{resource} "{name}" not found')


class FakeCluster:
    """A Kubernetes API server on 127.0.0.1 while the `with` block runs.

    State a test sets or reads (attributes, changed before or between requests):
    - `controllers`: kind -> function(cluster, stored object) run after each server-side apply of that kind; it may set
      body["status"] and `add` owned objects. Defaults stand in for Deployment, StatefulSet, LeaderWorkerSet, Job
      and Gateway; replace or delete one to change what the "cluster" does.
    - `stuck`: workload name -> PodProblem: that workload's pods never become ready (`never_ready` sets it).
    - `job_log`, `job_fails`: what a Job's pod prints and whether the Job fails. `logs`: (namespace, pod) -> log of
      any other pod.
    - `proxy`: (service name, path) -> (HTTP status, body) the service proxy answers (a JSON body is sent as
      application/json, as from vLLM); "v1/models" answers a model list of `served_model` unless set here.
    - `hide_status`: object name -> number of GETs of it that still see no status (readiness after N polls).
    - `requests`: (method, path) seen, path without the fake's prefix or query; `deleted`: (kind, namespace, name)
      deleted through the API (their dependents vanish too, unrecorded).
    """

    def __init__(self, crds: Iterable[Body] = (), *, namespace: str = "default", served_model: str = "fake-model",
                 kubernetes_version: str = "v1.33.1") -> None:
        self.namespace = namespace
        self.served_model = served_model
        self.kubernetes_version = kubernetes_version
        self.prefix = f"/fake-{uuid.uuid4().hex[:12]}"
        self.controllers: dict[str, Controller] = {
            "Deployment": workload_controller, "StatefulSet": workload_controller,
            "LeaderWorkerSet": leaderworkerset_controller, "Job": job_controller, "Gateway": gateway_controller,
        }
        self.stuck: dict[str, PodProblem] = {}
        self.job_log = ""
        self.job_fails = False
        self.logs: dict[tuple[str, str], str] = {}
        self.proxy: dict[tuple[str, str], tuple[int, str]] = {}
        self.hide_status: dict[str, int] = {}
        self.requests: list[tuple[str, str]] = []
        self.deleted: list[tuple[str, str, str]] = []
        self._kinds = {(k.api_version, k.kind): k for k in BUILTIN_KINDS}
        self._objects: dict[tuple[str, str, str, str], Body] = {}  # (apiVersion, kind, namespace, name)
        self._version = 0
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        for name in dict.fromkeys(("default", "kube-system", namespace)):
            self.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        for body in crds:
            self.install_crd(body)

    # -- the server's life --------------------------------------------------------------------------------------

    def __enter__(self) -> FakeCluster:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # shutdown() waits for the loop's next poll: 0.5 s by default, per fake
        threading.Thread(target=self._server.serve_forever, args=(0.02,), name="fake-k8s", daemon=True).start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._server is not None:
            cache = Path(tempfile.gettempdir()) / f"osrcp-{hashlib.md5(self.url.encode()).hexdigest()}.json"
            cache.unlink(missing_ok=True)  # the dynamic client's discovery cache of this URL, which no one will read
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the fake serves only inside its `with` block"
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.prefix}"

    def kubeconfig(self, path: Path) -> Path:
        """Write a kubeconfig whose current context is this server, in `namespace`; return its path."""
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": self.namespace}}],
        }), encoding="utf-8")
        return path

    # -- what a test does directly ------------------------------------------------------------------------------

    def install_crd(self, body: Body) -> None:
        """Install a CRD (as read from its YAML): its kinds become discoverable and storable."""
        self.add(body)

    def add(self, body: Body, *, owner: Body | None = None) -> Body:
        """Store an object as given (no controller runs), in `namespace` unless it names one; `owner` makes it a
        dependent that a cascading delete of the owner removes. Returns the stored object."""
        with self._lock:
            kind = self._kind(body["apiVersion"], body["kind"])
            body = copy.deepcopy(body)
            meta = body.setdefault("metadata", {})
            if kind.namespaced:
                meta.setdefault("namespace", self.namespace)
            if owner is not None:
                meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                            "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                            "controller": True, "blockOwnerDeletion": True}]
            return self._store(kind, body)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Body | None:
        """A copy of the stored object, or None; `namespace` defaults to the fake's for a namespaced kind."""
        with self._lock:
            known = self._kinds.get((api_version, kind))
            if known is None:
                return None
            ns = (namespace or self.namespace) if known.namespaced else ""
            found = self._objects.get((api_version, kind, ns, name))
            return copy.deepcopy(found)

    def objects(self, kind: str) -> list[Body]:
        """Copies of every stored object of a kind (any version, any namespace), by namespace and name."""
        with self._lock:
            return [copy.deepcopy(o) for (_, k, _, _), o in sorted(self._objects.items()) if k == kind]

    def never_ready(self, name: str, reason: str = "Unschedulable", message: str = "") -> None:
        """Make the workload `name`'s pods never ready: Pending and unschedulable, or a container waiting on
        `reason` (CrashLoopBackOff, ImagePullBackOff...)."""
        self.stuck[name] = PodProblem(reason, message or (GPU_SHORTAGE if reason == "Unschedulable" else ""))

    # -- storage --------------------------------------------------------------------------------------------------

    def _kind(self, api_version: str, kind: str) -> Kind:
        try:
            return self._kinds[(api_version, kind)]
        except KeyError:
            raise ValueError(f"the fake cluster has no {api_version} {kind}: install its CRD first") from None

    def _store(self, kind: Kind, body: Body) -> Body:
        """Write an object, with the metadata the server owns; a CRD's kinds become known."""
        meta = body["metadata"]
        key = (kind.api_version, kind.kind, meta.get("namespace", "") if kind.namespaced else "", meta["name"])
        old = self._objects.get(key)
        old_meta = (old or {}).get("metadata", {})
        meta["uid"] = old_meta.get("uid") or str(uuid.uuid4())
        meta["creationTimestamp"] = old_meta.get("creationTimestamp", CREATED)
        spec_changed = old is None or old.get("spec") != body.get("spec")
        meta["generation"] = old_meta.get("generation", 0) + 1 if spec_changed else old_meta.get("generation", 1)
        meta["resourceVersion"] = old_meta.get("resourceVersion", "")
        if old == body:  # an unchanged write changes nothing, resourceVersion included (an idempotent apply)
            return old
        self._version += 1
        meta["resourceVersion"] = str(self._version)
        if kind.kind == "CustomResourceDefinition":
            names = body["spec"]["names"]
            body.setdefault("status", {
                "acceptedNames": {"kind": names["kind"], "plural": names["plural"]},
                "storedVersions": [v["name"] for v in body["spec"]["versions"] if v.get("storage")],
                "conditions": [_condition("NamesAccepted", "True", "NoConflicts"),
                               _condition("Established", "True", "InitialNamesAccepted")]})
            self._kinds.update({(k.api_version, k.kind): k for k in crd_kinds(body)})
        self._objects[key] = body
        return body

    def _apply(self, kind: Kind, namespace: str, name: str, applied: Body) -> tuple[int, Body]:
        """Server-side apply with one field manager: create, or merge into what is stored (fields an apply leaves
        out are kept, status included); then the kind's controller runs."""
        if applied.get("apiVersion") != kind.api_version or applied.get("kind") != kind.kind:
            raise ApiError(400, "BadRequest", f"the body's {applied.get('apiVersion')} {applied.get('kind')} "
                                              f"does not match the URL's {kind.api_version} {kind.kind}")
        meta = applied.setdefault("metadata", {})
        if meta.get("name") != name:
            raise ApiError(400, "BadRequest", f"the name of the object ({meta.get('name')}) does not match the "
                                              f"name on the URL ({name})")
        if kind.namespaced:
            if meta.setdefault("namespace", namespace) != namespace:
                raise ApiError(400, "BadRequest", "the namespace of the provided object does not match the "
                                                  "namespace sent on the request")
            if ("v1", "Namespace", "", namespace) not in self._objects:
                raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found')
        old = self._objects.get((kind.api_version, kind.kind, namespace, name))
        stored = self._store(kind, _merged(copy.deepcopy(old), applied) if old else applied)
        controller = self.controllers.get(kind.kind)
        if controller is not None:
            controller(self, stored)
        return (200 if old else 201), stored

    def _delete(self, kind: Kind, namespace: str, name: str, cascade: bool) -> Body:
        key = (kind.api_version, kind.kind, namespace, name)
        body = self._objects.pop(key, None)
        if body is None:
            raise not_found(kind, name)
        if kind.kind == "CustomResourceDefinition":
            for gone in crd_kinds(body):
                self._kinds.pop((gone.api_version, gone.kind), None)
        uid = body["metadata"]["uid"]
        dependents = [k for k, o in self._objects.items()
                      if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences", []))]
        for api_version, dependent_kind, ns, dependent in dependents if cascade else ():
            if (api_version, dependent_kind, ns, dependent) in self._objects:
                self._delete(self._kinds[(api_version, dependent_kind)], ns, dependent, cascade)
        return body

    # -- HTTP ------------------------------------------------------------------------------------------------------

    def handle(self, method: str, target: str, content_type: str, payload: bytes) -> Answer:
        """Answer one request (the handler thread's entry point)."""
        parts = urlsplit(target)
        path = unquote(parts.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        with self._lock:
            if not path.startswith(self.prefix):
                return ApiError(404, "NotFound", f"{path} is not under this fake's {self.prefix}").answer()
            path = path[len(self.prefix):] or "/"
            self.requests.append((method, path))
            try:
                return self._route(method, path, query, content_type, payload)
            except ApiError as exc:
                return exc.answer()
            except Exception as exc:  # noqa: BLE001 - a controller's or the fake's own bug: a 500 the test can read
                return ApiError(500, "InternalError", f"{type(exc).__name__}: {exc}").answer()

    def _route(self, method: str, path: str, query: dict[str, str], content_type: str, payload: bytes) -> Answer:
        segments = path.strip("/").split("/")
        if path.rstrip("/") == "/version":
            major, minor = self.kubernetes_version.lstrip("v").split(".")[:2]
            return Answer.json(200, {"major": major, "minor": minor, "gitVersion": self.kubernetes_version,
                                     "gitCommit": "0" * 40, "gitTreeState": "clean", "buildDate": CREATED,
                                     "goVersion": "go1.24.0", "compiler": "gc", "platform": "linux/amd64"})
        if segments == ["api"]:
            return Answer.json(200, {"kind": "APIVersions", "versions": ["v1"],
                                     "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                                     "serverAddress": "127.0.0.1"}]})
        if segments == ["apis"]:
            return Answer.json(200, self._group_list())
        if segments[:2] == ["api", "v1"]:
            group_version, rest = "v1", segments[2:]
        elif segments[0] == "apis" and len(segments) >= 3:
            group_version, rest = f"{segments[1]}/{segments[2]}", segments[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        kinds = [k for k in self._kinds.values() if k.api_version == group_version]
        if not kinds:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            return Answer.json(200, _resource_list(group_version, kinds))
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        kind = next((k for k in kinds if k.plural == rest[0]), None)
        if kind is None or (namespace and not kind.namespaced):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if "fieldSelector" in query:
            raise ApiError(400, "BadRequest", "the fake cluster does not implement fieldSelector")
        name, subresource = (rest[1] if len(rest) > 1 else ""), (rest[2] if len(rest) > 2 else "")
        if method == "GET" and not name:
            return Answer.json(200, self._list(kind, namespace, query.get("labelSelector", "")))
        if kind.namespaced and not namespace:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if method == "GET" and subresource == "log" and kind.kind == "Pod":
            return self._pod_log(namespace, name, query.get("container"))
        if method == "GET" and subresource == "proxy" and kind.kind == "Service":
            return self._service_proxy(namespace, name, "/".join(rest[3:]))
        if method == "GET" and subresource in ("", "status"):
            return Answer.json(200, self._read(kind, namespace, name))
        if method == "PATCH" and not subresource:
            if content_type.split(";")[0].strip() != APPLY_PATCH:
                raise ApiError(415, "UnsupportedMediaType", f"the fake cluster only takes {APPLY_PATCH} patches")
            applied = load_yaml(payload.decode() or "{}")
            if not isinstance(applied, dict):
                raise ApiError(400, "BadRequest", "the apply body is not an object")
            code, stored = self._apply(kind, namespace, name, applied)
            return Answer.json(code, stored)
        if method == "DELETE" and not subresource:
            options = json.loads(payload or b"{}")
            policy = query.get("propagationPolicy") or options.get("propagationPolicy") or "Background"
            body = self._delete(kind, namespace, name, cascade=policy != "Orphan")
            self.deleted.append((kind.kind, namespace, name))
            return Answer.json(200, body)
        raise ApiError(405, "MethodNotAllowed", f"the fake cluster does not implement {method} {path}")

    def _read(self, kind: Kind, namespace: str, name: str) -> Body:
        body = self._objects.get((kind.api_version, kind.kind, namespace, name))
        if body is None:
            raise not_found(kind, name)
        if self.hide_status.get(name, 0) > 0:
            self.hide_status[name] -= 1
            return {k: v for k, v in body.items() if k != "status"}
        return body

    def _list(self, kind: Kind, namespace: str, selector: str) -> Body:
        items = [o for (v, k, ns, _), o in sorted(self._objects.items())
                 if (v, k) == (kind.api_version, kind.kind) and (not namespace or ns == namespace)
                 and matches(o["metadata"].get("labels") or {}, selector)]
        return {"kind": f"{kind.kind}List", "apiVersion": kind.api_version,
                "metadata": {"resourceVersion": str(self._version)}, "items": items}

    def _group_list(self) -> Body:
        versions: dict[str, set[str]] = {}
        for k in self._kinds.values():
            if k.group:
                versions.setdefault(k.group, set()).add(k.version)
        groups = []
        for group, found in sorted(versions.items()):
            ordered = [{"groupVersion": f"{group}/{v}", "version": v}
                       for v in sorted(found, key=version_priority, reverse=True)]
            groups.append({"name": group, "versions": ordered, "preferredVersion": ordered[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _pod_log(self, namespace: str, name: str, container: str | None) -> Answer:
        pod = self._read(self._kinds[("v1", "Pod")], namespace, name)
        spec = pod.get("spec", {})
        containers = [c["name"] for c in spec.get("containers", []) + spec.get("initContainers", [])]
        if container and container not in containers:
            raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
        labels = pod["metadata"].get("labels") or {}
        default = self.job_log if "job-name" in labels else ""
        return Answer(200, self.logs.get((namespace, name), default).encode(), "text/plain")

    def _service_proxy(self, namespace: str, target: str, path: str) -> Answer:
        """GET through the API server to a Service ("NAME", "NAME:PORT" or "SCHEME:NAME:PORT"); 503 while no
        ready pod matches its selector, as a real server says when the Service has no endpoints."""
        parts = target.split(":")
        name = parts[1] if parts[0] in ("http", "https") and len(parts) > 1 else parts[0]
        service = self._read(self._kinds[("v1", "Service")], namespace, name)
        selector = service.get("spec", {}).get("selector") or {}
        if selector and not any(_ready(p) and all(p["metadata"].get("labels", {}).get(k) == v
                                                  for k, v in selector.items())
                                for (_, kind, ns, _), p in self._objects.items() if kind == "Pod" and ns == namespace):
            raise ApiError(503, "ServiceUnavailable", f'no endpoints available for service "{name}"')
        default = (200, json.dumps({"object": "list", "data": [
            {"id": self.served_model, "object": "model", "owned_by": "vllm", "root": self.served_model}]}))
        code, text = self.proxy.get((name, path), default if path.strip("/") == "v1/models" else
                                    (404, json.dumps({"detail": "Not Found"})))
        try:
            json.loads(text)
            content_type = "application/json"
        except ValueError:
            content_type = "text/plain"
        return Answer(code, text.encode(), content_type)


def _handler_for(cluster: FakeCluster) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the client's connection pool reuses one connection
        disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK wait between

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            payload = self.rfile.read(length) if length else b""
            answer = cluster.handle(self.command, self.path, self.headers.get("Content-Type", ""), payload)
            self.send_response(answer.code)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        do_GET = do_PATCH = do_DELETE = do_POST = do_PUT = _answer

        def log_message(self, format: str, *args: Any) -> None:  # quiet: `requests` records what came
            pass

    return Handler


def _resource_list(group_version: str, kinds: list[Kind]) -> Body:
    resources = []
    for k in sorted(kinds, key=lambda k: k.plural):
        verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
        resources.append({"name": k.plural, "singularName": k.kind.lower(), "namespaced": k.namespaced,
                          "kind": k.kind, "verbs": verbs})
        resources.append({"name": f"{k.plural}/status", "singularName": "", "namespaced": k.namespaced,
                          "kind": k.kind, "verbs": ["get", "patch", "update"]})
    extra = {"pods": ("log", "Pod"), "services": ("proxy", "ServiceProxyOptions")}
    for plural, (sub, sub_kind) in extra.items():
        if any(k.plural == plural for k in kinds):
            resources.append({"name": f"{plural}/{sub}", "singularName": "", "namespaced": True,
                              "kind": sub_kind, "verbs": ["get"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def _merged(stored: Body, applied: Body) -> Body:
    """`applied` merged into `stored`: maps merge key by key, anything else (lists included) is replaced."""
    for key, value in applied.items():
        if isinstance(value, dict) and isinstance(stored.get(key), dict):
            _merged(stored[key], value)
        else:
            stored[key] = copy.deepcopy(value)
    return stored


def _condition(kind: str, status: str, reason: str = "", message: str = "") -> Body:
    condition = {"type": kind, "status": status, "lastTransitionTime": CREATED}
    condition.update({k: v for k, v in (("reason", reason), ("message", message)) if v})
    return condition


def _ready(pod: Body) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in pod.get("status", {}).get("conditions", []))


# -- the cluster's controllers, just enough -------------------------------------------------------------------------


def make_pod(name: str, namespace: str, template: Body, problem: PodProblem | None = None,
             finished: str = "") -> Body:
    """A pod from a pod template that the client's V1Pod accepts: Running and Ready; or stuck on `problem`; or
    `finished` ("Succeeded" / "Failed") as a Job's pod ends."""
    spec = copy.deepcopy(template.get("spec", {}))
    containers = spec.get("containers") or [{"name": "main", "image": "fake:latest"}]
    spec["containers"] = containers

    def container_status(c: Body, ready: bool, state: Body, restarts: int = 0) -> Body:
        return {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": ready,
                "restartCount": restarts, "started": ready, "state": state}

    if finished:
        code = 0 if finished == "Succeeded" else 1
        terminated = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                     "startedAt": CREATED, "finishedAt": CREATED}}
        status = {"phase": finished, "conditions": [_condition("PodScheduled", "True"),
                                                    _condition("Ready", "False", "PodCompleted")],
                  "containerStatuses": [container_status(c, False, terminated) for c in containers]}
    elif problem is None:
        status = {"phase": "Running", "conditions": [_condition("PodScheduled", "True"), _condition("Ready", "True")],
                  "containerStatuses": [container_status(c, True, {"running": {"startedAt": CREATED}})
                                        for c in containers]}
    elif problem.reason == "Unschedulable":
        status = {"phase": "Pending",
                  "conditions": [_condition("PodScheduled", "False", "Unschedulable", problem.message)]}
    else:
        crashing = problem.reason == "CrashLoopBackOff"
        default = (f"back-off 5m0s restarting failed container={containers[0]['name']} pod={name}" if crashing
                   else f'Back-off pulling image "{containers[0].get("image", "")}"')
        waiting = {"waiting": {"reason": problem.reason, "message": problem.message or default}}
        status = {"phase": "Running" if crashing else "Pending",
                  "conditions": [_condition("PodScheduled", "True"),
                                 _condition("Ready", "False", "ContainersNotReady")],
                  "containerStatuses": [container_status(c, False, waiting, 5 if crashing else 0)
                                        for c in containers]}
    metadata = {"name": name, "namespace": namespace,
                "labels": dict(template.get("metadata", {}).get("labels") or {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def _replica_status(replicas: int, ready: int, generation: int) -> Body:
    """A workload's status as the API server sends it: zero counts left out (omitempty)."""
    counts = {"replicas": replicas, "readyReplicas": ready, "availableReplicas": ready, "updatedReplicas": replicas,
              "unavailableReplicas": replicas - ready}
    status: Body = {k: v for k, v in counts.items() if v}
    status["observedGeneration"] = generation
    available = "True" if ready >= replicas else "False"
    status["conditions"] = [_condition("Available", available, "MinimumReplicasAvailable" if available == "True"
                                       else "MinimumReplicasUnavailable")]
    return status


def workload_controller(cluster: FakeCluster, body: Body) -> None:
    """Deployment and StatefulSet: one pod per replica, `<name>-<n>`, labelled as the template."""
    meta, spec = body["metadata"], body.get("spec", {})
    replicas = int(spec.get("replicas", 1))
    problem = cluster.stuck.get(meta["name"])
    for n in range(replicas):
        cluster.add(make_pod(f"{meta['name']}-{n}", meta["namespace"], spec.get("template", {}), problem), owner=body)
    body["status"] = _replica_status(replicas, 0 if problem else replicas, meta["generation"])


def leaderworkerset_controller(cluster: FakeCluster, body: Body) -> None:
    """LeaderWorkerSet: per group i a leader `<name>-<i>` and workers `<name>-<i>-<j>`; a group is a replica."""
    meta, spec = body["metadata"], body.get("spec", {})
    templates = spec.get("leaderWorkerTemplate", {})
    worker = templates.get("workerTemplate", {})
    leader = templates.get("leaderTemplate") or worker
    replicas, size = int(spec.get("replicas", 1)), int(templates.get("size", 1))
    problem = cluster.stuck.get(meta["name"])
    for i in range(replicas):
        for j in range(size):
            template = copy.deepcopy(leader if j == 0 else worker)
            labels = template.setdefault("metadata", {}).setdefault("labels", {})
            labels.update({LWS_NAME_LABEL: meta["name"], "leaderworkerset.sigs.k8s.io/group-index": str(i),
                           "leaderworkerset.sigs.k8s.io/worker-index": str(j)})
            name = f"{meta['name']}-{i}" if j == 0 else f"{meta['name']}-{i}-{j}"
            cluster.add(make_pod(name, meta["namespace"], template, problem), owner=body)
    body["status"] = _replica_status(replicas, 0 if problem else replicas, meta["generation"])


def job_controller(cluster: FakeCluster, body: Body) -> None:
    """Job: its pod `<name>-0` runs to the end at once, printing `cluster.job_log`; it fails if `cluster.job_fails`."""
    meta = body["metadata"]
    template = copy.deepcopy(body.get("spec", {}).get("template", {}))
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    labels.update(dict.fromkeys(JOB_NAME_LABELS, meta["name"]))
    phase = "Failed" if cluster.job_fails else "Succeeded"
    cluster.add(make_pod(f"{meta['name']}-0", meta["namespace"], template, finished=phase), owner=body)
    if cluster.job_fails:
        body["status"] = {"failed": 1, "startTime": CREATED, "conditions": [
            _condition("FailureTarget", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
            _condition("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")]}
    else:
        body["status"] = {"succeeded": 1, "startTime": CREATED, "completionTime": CREATED, "conditions": [
            _condition("SuccessCriteriaMet", "True", "CompletionsReached"),
            _condition("Complete", "True", "CompletionsReached")]}


def gateway_controller(cluster: FakeCluster, body: Body) -> None:
    """Gateway: a Service for it, labelled with its name as implementations do, and Programmed=True."""
    meta, spec = body["metadata"], body.get("spec", {})
    ports = [{"name": listener.get("name", f"port-{listener['port']}"), "port": int(listener["port"]),
              "protocol": "TCP", "targetPort": int(listener["port"])} for listener in spec.get("listeners", [])]
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": f"{meta['name']}-{spec.get('gatewayClassName', 'gateway')}",
                            "namespace": meta["namespace"], "labels": {GATEWAY_NAME_LABEL: meta["name"]}},
               "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "ports": ports or [{"port": 80}]}}
    cluster.add(service, owner=body)
    body["status"] = {"addresses": [{"type": "IPAddress", "value": "10.96.0.10"}],
                      "conditions": [_condition("Accepted", "True", "Accepted"),
                                     _condition("Programmed", "True", "Programmed")]}
