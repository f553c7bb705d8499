"""Applying the objects to the cluster the user's kubeconfig names, with the kubernetes Python client.

Server-side apply (field manager `cmx`): applying the same manifests twice changes nothing, and a changed
manifest updates the object in place, as `kubectl apply --server-side` does. The kubeconfig is found as
kubectl finds it ($KUBECONFIG, else ~/.kube/config); the cluster is asked for its version first, so an
unreachable server is one error naming its URL, before any object is sent.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx.k8s import K8sError

FIELD_MANAGER = "cmx"
CONNECT_TIMEOUT_S = 10


class KubeconfigError(K8sError):
    """No kubeconfig, or one the client cannot use."""


class ClusterError(K8sError):
    """The cluster cannot be reached or refused an object."""


@dataclass(frozen=True)
class Applied:
    kind: str
    name: str
    namespace: str


def kubeconfig_paths(environ: Mapping[str, str] | None = None, home: Path | None = None) -> list[Path]:
    """Where kubectl looks: every file of $KUBECONFIG (a path list), else ~/.kube/config."""
    env = os.environ if environ is None else environ
    listed = [Path(p) for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    return listed or [(home or Path.home()) / ".kube" / "config"]


def find_kubeconfig(environ: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """The first existing kubeconfig; an error naming each place looked in when there is none."""
    paths = kubeconfig_paths(environ, home)
    for path in paths:
        if path.is_file():
            return path
    looked = ", ".join(str(p) for p in paths)
    source = "$KUBECONFIG" if (os.environ if environ is None else environ).get("KUBECONFIG") else "the default path"
    raise KubeconfigError(f"--apply needs a kubeconfig, and there is none at {looked} ({source})",
                          hint="point KUBECONFIG at your cluster's kubeconfig (your provider's CLI writes one: "
                               "`aws eks update-kubeconfig`, `gcloud container clusters get-credentials`...), or "
                               "apply the written files yourself with `kubectl apply -f OUT_DIR`")


def _client(path: Path) -> tuple[Any, str]:
    """An API client for the kubeconfig's current context, and that context's namespace."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=str(path), client_configuration=configuration)
        _, active = config.list_kube_config_contexts(config_file=str(path))
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        raise KubeconfigError(f"cannot use the kubeconfig {path}: {exc}",
                              hint="check it with `kubectl config view`") from None
    configuration.retries = 1  # an unreachable server is an answer, not something to wait out
    namespace = (active or {}).get("context", {}).get("namespace") or "default"
    return client.ApiClient(configuration), namespace


def _check_reachable(api: Any) -> None:
    from kubernetes import client

    server = api.configuration.host
    try:
        client.VersionApi(api).get_code(_request_timeout=CONNECT_TIMEOUT_S)
    except client.ApiException as exc:
        if exc.status in (401, 403):
            raise ClusterError(f"the cluster at {server} refused the kubeconfig's credentials ({exc.status} "
                               f"{exc.reason})", hint="renew them (your provider's login command)") from None
        raise ClusterError(f"the cluster at {server} answered {exc.status} {exc.reason}") from None
    except Exception as exc:  # noqa: BLE001 - urllib3's connection errors and timeouts, whatever their class
        raise ClusterError(f"cannot reach the Kubernetes API server at {server}: {_reason(exc)}",
                           hint="check that the cluster is up and this machine can reach it (VPN, "
                                "`kubectl cluster-info`), or that the kubeconfig's current context is the "
                                "one you mean") from None


def connect(kubeconfig: Path | None = None) -> tuple[Any, str]:
    """An API client for the kubeconfig's current context ($KUBECONFIG or ~/.kube/config unless given), the
    cluster asked for its version first; and that context's namespace."""
    api, namespace = _client(kubeconfig or find_kubeconfig())
    _check_reachable(api)
    return api, namespace


def apply_bodies(api: Any, bodies: Iterable[dict[str, Any]], namespace: str) -> list[Applied]:
    """Server-side apply each object, in order; objects without a namespace go to `namespace`."""
    from kubernetes import dynamic
    from kubernetes.client import ApiException
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    client = dynamic.DynamicClient(api)
    done = []
    for body in bodies:
        kind, name = body["kind"], body["metadata"]["name"]
        ns = body["metadata"].get("namespace") or namespace
        try:
            resource = client.resources.get(api_version=body["apiVersion"], kind=kind)
        except ResourceNotFoundError:
            hint = ("install LeaderWorkerSet (https://lws.sigs.k8s.io/docs/installation/) or serve on one node"
                    if kind == "LeaderWorkerSet" else None)
            raise ClusterError(f"the cluster at {api.configuration.host} has no {body['apiVersion']} {kind}",
                               hint=hint) from None
        try:
            client.server_side_apply(resource, body=body, name=name, namespace=ns, field_manager=FIELD_MANAGER,
                                     force_conflicts=True)
        except ApiException as exc:
            raise ClusterError(f"the cluster refused {kind} {ns}/{name}: {exc.status} {exc.reason}: "
                               f"{_api_message(exc)}") from None
        done.append(Applied(kind, name, ns))
    return done


def apply(bodies: Iterable[dict[str, Any]], *, kubeconfig: Path | None = None,
          namespace: str | None = None) -> list[Applied]:
    """Server-side apply each object, in order, to the kubeconfig's current context. Objects without a
    namespace go to `namespace`, else the context's."""
    api, context_namespace = connect(kubeconfig)
    return apply_bodies(api, bodies, namespace or context_namespace)


def _reason(exc: BaseException) -> str:
    """The cause in a few words ("[Errno 111] Connection refused"), not urllib3's wrapper around it."""
    text = str(getattr(exc, "reason", None) or exc)
    return text[text.index("[Errno"):] if "[Errno" in text else text.rsplit(": ", 1)[-1] or type(exc).__name__


def _api_message(exc: Any) -> str:
    import json

    try:
        return str(json.loads(exc.body).get("message", exc.body))
    except (TypeError, ValueError, AttributeError):
        return str(exc.body)
