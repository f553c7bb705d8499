"""Checking the objects against the real schemas, offline: Kubernetes' for the built-in kinds, each CRD's own for
custom resources.

kubernetes-validate ships the OpenAPI schemas of each Kubernetes release; strict mode also refuses a
field the schema does not have (a typo such as `volumeMount` would otherwise be dropped silently by the
API server). The version is pinned, so the same manifests pass or fail the same way on every machine.

A custom resource (LeaderWorkerSet, InferencePool, Gateway, LLMInferenceService, DynamoGraphDeployment...)
is checked against its CRD's openAPIV3Schema when one is at hand (cmx.k8s.crd_schema: a file the user
names, or the cluster's on --apply). Without one, the pod specs it carries, where nearly everything that
can be wrong lives, are still checked against Kubernetes' PodTemplateSpec, and the object is reported as
not checked against its CRD: a result says which, never more than was done.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cmx.k8s import K8sError
from cmx.k8s.crd_schema import CrdSchema, check

KUBERNETES_VERSION = "1.30"  # the oldest release kubernetes-validate ships a strict schema for that we target
# the groups kubernetes-validate has schemas for (the built-in kinds cmx renders)
BUILT_IN_GROUPS = ("", "apps", "batch", "rbac.authorization.k8s.io")
MAX_PROBLEMS = 8


class InvalidManifest(K8sError):
    """An object does not match its schema."""


@dataclass(frozen=True)
class Validation:
    """What the objects were checked against: the CRD (and where it was read) of each custom kind that had one,
    and the custom kinds that had none (their pod specs checked, the rest not)."""

    checked: Mapping[str, str]          # kind -> "the CRD NAME from SOURCE"
    unchecked: tuple[str, ...] = ()     # kinds with no CRD at hand
    cel_rules: int = 0                  # CRD validation rules left to the API server

    def describe(self) -> str:
        parts = [f"{kind} against {where}" for kind, where in sorted(self.checked.items())]
        pods = [k for k in self.unchecked if k in POD_SPECS]
        bare = [k for k in self.unchecked if k not in POD_SPECS]
        if pods:
            parts.append(f"{', '.join(pods)}: no CRD at hand, only the pod specs checked")
        if bare:
            parts.append(f"{', '.join(bare)}: no CRD at hand, not checked")
        if self.unchecked:
            parts.append("give --crd FILE, or --apply to read the cluster's")
        return "; ".join(parts)


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def is_built_in(body: Mapping[str, Any]) -> bool:
    return group_of(str(body.get("apiVersion", ""))) in BUILT_IN_GROUPS


def validate(body: dict[str, Any], version: str = KUBERNETES_VERSION, crds: Mapping[str, CrdSchema] | None = None) \
        -> tuple[str, int]:
    """Raise InvalidManifest when `body` does not match its schema. Returns where its schema came from
    ("kubernetes-validate", a CRD's name and source, or "" for a custom kind without a CRD) and the CEL rules
    left to the API server. `crds`: kind -> CrdSchema."""
    label = _label(body)
    if is_built_in(body):
        _schema_check(body, version, label)
        return "kubernetes-validate", 0
    crd = (crds or {}).get(str(body.get("kind")))
    if crd is not None:
        result = check(body, crd)
        if result.problems:
            shown = "; ".join(result.problems[:MAX_PROBLEMS])
            more = f" (and {len(result.problems) - MAX_PROBLEMS} more)" if len(result.problems) > MAX_PROBLEMS else ""
            raise InvalidManifest(f"{label} does not match the CRD {crd.name} ({crd.source}): {shown}{more}",
                                  hint="this is a bug in cmx's manifests, or a CRD of another release than cmx "
                                       "renders for (check the CRD's served versions)")
        _pod_specs_check(body, version, label)
        return f"the CRD {crd.name} from {crd.source}", result.cel_rules
    _pod_specs_check(body, version, label)
    return "", 0


def validate_all(bodies: Iterable[dict[str, Any]], version: str = KUBERNETES_VERSION,
                 crds: Iterable[CrdSchema] = ()) -> Validation:
    by_kind = {c.kind: c for c in crds}
    checked: dict[str, str] = {}
    unchecked: list[str] = []
    cel = 0
    for body in bodies:
        where, rules = validate(body, version, by_kind)
        cel += rules
        kind = str(body.get("kind"))
        if where.startswith("the CRD"):
            checked[kind] = where
        elif not where and kind not in unchecked:
            unchecked.append(kind)
    return Validation(checked, tuple(unchecked), cel)


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


# --- the pod specs inside custom resources ---------------------------------------------------------------


def _lws_pods(body: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    lwt = body.get("spec", {}).get("leaderWorkerTemplate")
    if not isinstance(lwt, dict) or "workerTemplate" not in lwt:
        raise InvalidManifest(f"{_label(dict(body))}: spec.leaderWorkerTemplate.workerTemplate is missing")
    for key in ("leaderTemplate", "workerTemplate"):
        if key in lwt:
            yield key, lwt[key]


def _kserve_pods(body: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    spec = body.get("spec", {})
    for key in ("template", "worker"):
        if key in spec:
            yield key, {"spec": spec[key]}


def _dynamo_pods(body: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """extraPodSpec is a PodSpec's fields inline, and its main container beside them (named by the operator)."""
    for name, service in (body.get("spec", {}).get("services") or {}).items():
        extra = dict(service.get("extraPodSpec") or {})
        main = extra.pop("mainContainer", None)
        if main is not None:
            yield f"services.{name}.extraPodSpec", {"spec": {**extra, "containers": [{"name": "main", **main}]}}


def _no_pods(body: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    return iter(())


# kind -> its pod templates (as PodTemplateSpecs)
POD_SPECS: Mapping[str, Callable[[Mapping[str, Any]], Iterator[tuple[str, dict[str, Any]]]]] = {
    "LeaderWorkerSet": _lws_pods, "LLMInferenceService": _kserve_pods, "DynamoGraphDeployment": _dynamo_pods}


def _pod_specs_check(body: dict[str, Any], version: str, label: str) -> None:
    if not body.get("metadata", {}).get("name") or not body.get("apiVersion"):
        raise InvalidManifest(f"{label} lacks an apiVersion or a name")
    for where, template in POD_SPECS.get(str(body.get("kind")), _no_pods)(body):
        wrapper = {"apiVersion": "v1", "kind": "PodTemplate",
                   "metadata": {"name": f"{body['metadata']['name']}-{where.lower().replace('.', '-')}"[:63]},
                   "template": template}
        _schema_check(wrapper, version, f"{label} {where}")


__all__ = ["KUBERNETES_VERSION", "InvalidManifest", "Validation", "is_built_in", "validate", "validate_all"]
