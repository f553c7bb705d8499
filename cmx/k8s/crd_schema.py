"""Custom resources checked against their CustomResourceDefinition's own schema (`openAPIV3Schema`).

kubernetes-validate knows the built-in kinds only. A custom resource (InferencePool, LeaderWorkerSet,
LLMInferenceService, DynamoGraphDeployment...) is checked here against the schema its CRD serves, read from
a file the user names or from the cluster on --apply, as the API server checks it with strict field
validation (`kubectl apply --validate=strict`):

- a field the schema does not declare is refused, unless the object declaring it says
  `x-kubernetes-preserve-unknown-fields` or has `additionalProperties` (a map);
- types (`integer` is not a bool, `number` takes integers), `x-kubernetes-int-or-string`, `nullable`,
  `enum`, `required`, `pattern`, the numeric and length bounds, and the ranges of `format: int32` and `int64`
  (the API server refuses 99999999999999999999 replicas; a JSON schema check alone lets it through);
- `allOf`, `anyOf`, `oneOf` and `not` as value checks: in a structural schema their branches never declare
  fields, so a branch is judged on values only;
- `x-kubernetes-validations` (CEL rules) are not evaluated here: the API server evaluates them on --apply.
  They are counted, so a caller can say how many were left to the server.

`metadata` is left to the API server too: a CRD's schema says only that it is an object.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx.k8s import K8sError
from cmx.k8s.values import show

_INT_FORMATS: Mapping[str, tuple[int, int]] = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_TYPES: Mapping[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,),
                                          "boolean": (bool,), "integer": (int,), "number": (int, float)}
# labels and annotations that carry a CRD's release, most telling first
# (controller-gen's version annotation is the generator's, not the project's: not one of them)
VERSION_KEYS = ("app.kubernetes.io/version", "inference.networking.k8s.io/bundle-version",
                "gateway.networking.k8s.io/bundle-version")


class CrdError(K8sError):
    """A file or object is not a CustomResourceDefinition cmx can read."""


@dataclass(frozen=True)
class CrdSchema:
    """One CRD's kind and the schema of each version it serves.

    name: `plural.group`, the CRD's own name (`kubectl get crd NAME`).
    source: where it was read (a file's path, or "the cluster at URL"), for messages.
    release: the CRD's release as its labels or annotations give it (VERSION_KEYS), "" when none does.
    """

    name: str
    group: str
    kind: str
    schemas: Mapping[str, Mapping[str, Any]]  # served version -> openAPIV3Schema
    source: str
    release: str = ""

    @property
    def api_versions(self) -> tuple[str, ...]:
        return tuple(f"{self.group}/{v}" for v in self.schemas)

    def schema_for(self, api_version: str) -> Mapping[str, Any] | None:
        group, _, version = api_version.rpartition("/")
        return self.schemas.get(version) if group == self.group else None


def crd_from_object(body: Mapping[str, Any], source: str) -> CrdSchema:
    """The CrdSchema of a CustomResourceDefinition object; CrdError when `body` is not one."""
    if body.get("kind") != "CustomResourceDefinition" or not isinstance(body.get("spec"), Mapping):
        raise CrdError(f"{source} is not a CustomResourceDefinition (its kind is {body.get('kind')!r})",
                       hint="name the CRD's YAML, as `kubectl get crd NAME -o yaml` prints it")
    spec, meta = body["spec"], body.get("metadata") or {}
    schemas = {str(v["name"]): v.get("schema", {}).get("openAPIV3Schema") or {}
               for v in spec.get("versions") or [] if v.get("served", True)}
    if not schemas:
        raise CrdError(f"the CRD {meta.get('name', '?')} in {source} serves no version")
    marks = {**(meta.get("labels") or {}), **(meta.get("annotations") or {})}
    release = next((str(marks[k]) for k in VERSION_KEYS if marks.get(k)), "")
    return CrdSchema(name=str(meta.get("name") or f"{spec['names']['plural']}.{spec['group']}"),
                     group=str(spec["group"]), kind=str(spec["names"]["kind"]), schemas=schemas, source=source,
                     release=release)


def read_crd_files(paths: Iterable[Path]) -> tuple[CrdSchema, ...]:
    """Every CRD in the files (a file may hold several YAML documents, as a release's manifests do; the
    documents that are not CRDs are skipped, but a file with none is an error)."""
    import yaml

    # libyaml's loader: a CRD with pod templates is megabytes (KServe's LLMInferenceService: 2.7 MB), which
    # the pure-Python loader reads in seconds
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    found: list[CrdSchema] = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
            docs = [d for d in yaml.load_all(text, Loader=loader) if isinstance(d, dict)]
        except (OSError, yaml.YAMLError) as exc:
            raise CrdError(f"cannot read the CRD file {path}: {exc}") from None
        crds = [crd_from_object(d, str(path)) for d in docs if d.get("kind") == "CustomResourceDefinition"]
        if not crds:
            raise CrdError(f"{path} holds no CustomResourceDefinition",
                           hint="give the CRD's YAML (`kubectl get crd NAME -o yaml > FILE`, or the CRD file of "
                                "the project's release)")
        found += crds
    return tuple(found)


@dataclass(frozen=True)
class SchemaCheck:
    """What checking one object found: its problems (a dotted path and what is wrong), and the CEL rules
    on its path that were left to the API server."""

    problems: tuple[str, ...]
    cel_rules: int


def check(body: Mapping[str, Any], crd: CrdSchema) -> SchemaCheck:
    """Check `body` against the schema of its apiVersion in `crd` (an apiVersion the CRD does not serve is
    itself the problem)."""
    schema = crd.schema_for(str(body.get("apiVersion", "")))
    if schema is None:
        served = ", ".join(crd.api_versions)
        return SchemaCheck((f"apiVersion {body.get('apiVersion')!r} is not served by the CRD {crd.name} "
                            f"({served})",), 0)
    counter = _Walk()
    trimmed = {k: v for k, v in body.items() if k != "metadata"}
    problems = list(counter.walk(trimmed, {**schema, "properties": {**schema.get("properties", {}),
                                                                   "metadata": {"type": "object"}}}, ""))
    return SchemaCheck(tuple(problems), counter.cel_rules)


class _Walk:
    def __init__(self) -> None:
        self.cel_rules = 0

    def walk(self, value: Any, schema: Mapping[str, Any], path: str, *, fields: bool = True) -> Iterator[str]:
        """The problems of `value` under `schema`; `fields` False inside allOf/anyOf/oneOf/not branches."""
        where = path or "(top)"
        if fields:
            self.cel_rules += len(schema.get("x-kubernetes-validations") or ())
        if value is None:
            if not schema.get("nullable") and schema.get("type"):
                yield f"{where}: null is not allowed"
            return
        if schema.get("x-kubernetes-int-or-string"):
            if not isinstance(value, (int, str)) or isinstance(value, bool):
                yield f"{where}: {_show(value)} is neither an integer nor a string"
                return
        elif schema.get("type"):
            kind = schema["type"]
            allowed = _TYPES.get(kind, ())
            if not isinstance(value, allowed) or (isinstance(value, bool) and kind in ("integer", "number")):
                yield f"{where}: {_show(value)} is not of type {kind}"
                return
        yield from self._values(value, schema, where)
        for key in ("allOf", "anyOf", "oneOf"):
            branches = schema.get(key) or ()
            if not branches:
                continue
            passed = sum(1 for b in branches if not list(self.walk(value, b, path, fields=False)))
            if (key == "allOf" and passed < len(branches)) or (key == "anyOf" and passed == 0) or \
                    (key == "oneOf" and passed != 1):
                yield f"{where}: {_show(value)} does not match {key} of the schema"
        if "not" in schema and not list(self.walk(value, schema["not"], path, fields=False)):
            yield f"{where}: {_show(value)} matches a schema it must not"
        if isinstance(value, dict):
            yield from self._object(value, schema, path, fields=fields)
        elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
            for i, item in enumerate(value):
                yield from self.walk(item, schema["items"], f"{path}[{i}]", fields=fields)

    def _object(self, value: dict[str, Any], schema: Mapping[str, Any], path: str, *,
                fields: bool) -> Iterator[str]:
        props: Mapping[str, Any] = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if name not in value:
                yield f"{_join(path, name)}: required, missing"
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = _join(path, key)
            if key in props:
                yield from self.walk(item, props[key], sub, fields=fields)
            elif isinstance(extra, Mapping):
                yield from self.walk(item, extra, sub, fields=fields)
            elif fields and extra is not True and not schema.get("x-kubernetes-preserve-unknown-fields") \
                    and not (schema.get("x-kubernetes-embedded-resource") and key in ("apiVersion", "kind",
                                                                                     "metadata")):
                yield f"{sub}: unknown field"

    @staticmethod
    def _values(value: Any, schema: Mapping[str, Any], where: str) -> Iterator[str]:
        if "enum" in schema and value not in schema["enum"]:
            yield f"{where}: {_show(value)} is not one of {schema['enum']}"
        if isinstance(value, str):
            if "pattern" in schema and not re.search(schema["pattern"], value):
                yield f"{where}: {_show(value)} does not match {schema['pattern']!r}"
            if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", len(value)):
                yield f"{where}: {_show(value)} has a length outside the schema's bounds"
        if isinstance(value, int) and not isinstance(value, bool) and schema.get("format") in _INT_FORMATS:
            low, high = _INT_FORMATS[schema["format"]]
            if not low <= value <= high:
                yield f"{where}: {_show(value)} is outside the {schema['format']} range ({low} to {high})"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if "minimum" in schema and (value < schema["minimum"] or
                                        (schema.get("exclusiveMinimum") is True and value == schema["minimum"])):
                yield f"{where}: {_show(value)} is below the minimum {schema['minimum']}"
            if "maximum" in schema and (value > schema["maximum"] or
                                        (schema.get("exclusiveMaximum") is True and value == schema["maximum"])):
                yield f"{where}: {_show(value)} is above the maximum {schema['maximum']}"
        if isinstance(value, list) and not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems",
                                                                                               len(value)):
            yield f"{where}: {len(value)} items, outside the schema's bounds"
        if isinstance(value, dict) and len(value) > schema.get("maxProperties", len(value)):
            yield f"{where}: {len(value)} fields, more than the schema's {schema['maxProperties']}"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _show(value: Any) -> str:
    return show(value)


__all__ = ["VERSION_KEYS", "CrdError", "CrdSchema", "SchemaCheck", "check", "crd_from_object", "read_crd_files"]
