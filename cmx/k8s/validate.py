"""Checking the objects against the real Kubernetes schemas, offline, with kubernetes-validate.

kubernetes-validate ships the OpenAPI schemas of each Kubernetes release; strict mode also refuses a
field the schema does not have (a typo such as `volumeMount` would otherwise be dropped silently by the
API server). The version is pinned, so the same manifests pass or fail the same way on every machine.

LeaderWorkerSet is a CRD (leaderworkerset.x-k8s.io), and kubernetes-validate has schemas for the
built-in kinds only. Its pod templates (leaderTemplate, workerTemplate), where nearly everything that
can be wrong lives, are validated instead as the built-in PodTemplate's `template` (a PodTemplateSpec);
the few fields around them are checked here by hand.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cmx.k8s import K8sError

KUBERNETES_VERSION = "1.30"  # the oldest release kubernetes-validate ships a strict schema for that we target


class InvalidManifest(K8sError):
    """An object does not match the Kubernetes schema."""


def validate(body: dict[str, Any], version: str = KUBERNETES_VERSION) -> None:
    """Raise InvalidManifest with the validator's message when `body` is not a valid object."""
    if body.get("kind") == "LeaderWorkerSet":
        _validate_lws(body, version)
        return
    _schema_check(body, version, _label(body))


def validate_all(bodies: Iterable[dict[str, Any]], version: str = KUBERNETES_VERSION) -> None:
    for body in bodies:
        validate(body, version)


def _label(body: dict[str, Any]) -> str:
    return f"{body.get('kind', '?')} {body.get('metadata', {}).get('name', '?')}"


def _schema_check(body: dict[str, Any], version: str, label: str) -> None:
    import kubernetes_validate

    try:
        kubernetes_validate.validate(body, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = "/".join(str(p) for p in exc.absolute_path) or "(top)"
        raise InvalidManifest(f"{label} is not a valid Kubernetes {version} object: {exc.message} at {path}",
                              hint="this is a bug in cmx's manifests, or an option value Kubernetes refuses "
                                   "(a name that is not a DNS label, a size that is not a quantity)") from None
    except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError) as exc:
        raise InvalidManifest(f"no Kubernetes {version} schema for {label} ({body.get('apiVersion')}): {exc}") \
            from None


def _validate_lws(body: dict[str, Any], version: str) -> None:
    """The LeaderWorkerSet's own fields by hand, its pod templates against the PodTemplateSpec schema."""
    label = _label(body)
    lwt = body.get("spec", {}).get("leaderWorkerTemplate")
    if body.get("apiVersion") != "leaderworkerset.x-k8s.io/v1" or not body.get("metadata", {}).get("name") \
            or not isinstance(lwt, dict):
        raise InvalidManifest(f"{label} lacks apiVersion leaderworkerset.x-k8s.io/v1, a name or "
                              "spec.leaderWorkerTemplate")
    size = lwt.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise InvalidManifest(f"{label}: leaderWorkerTemplate.size must be a positive integer, not {size!r}")
    if "workerTemplate" not in lwt:
        raise InvalidManifest(f"{label}: leaderWorkerTemplate has no workerTemplate")
    for key in ("leaderTemplate", "workerTemplate"):
        if key in lwt:
            wrapper = {"apiVersion": "v1", "kind": "PodTemplate",
                       "metadata": {"name": f"{body['metadata']['name']}-{key.lower()}"}, "template": lwt[key]}
            _schema_check(wrapper, version, f"{label} {key}")
