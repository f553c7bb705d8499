"""The manifests as files: one YAML file per object and a README.md saying how to use them.

One file per object, and no kustomization.yaml or all-in-one file beside them: `kubectl apply -f DIR`
applies every .yaml in the folder (README.md is skipped), in name order, so the numbered names put the
volumes before the pods that mount them; a kustomization.yaml there would itself be sent as an object,
and an all-in-one file would apply everything twice. Nothing is written until every object passed
validation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmx.k8s.crd_schema import CrdSchema
from cmx.k8s.manifests import (
    HF_HOME,
    MANAGED_BY,
    PORT,
    RESULTS,
    Manifest,
    ServingSpec,
    serve_argv,
)
from cmx.k8s.prerequisites import Requirement
from cmx.k8s.stacks import all_objects, job_target, requirements, stack_for, stack_record
from cmx.k8s.validate import KUBERNETES_VERSION, Validation, validate_all
from cmx.mlperf.serving_stack import ServingStack

_MARK = "app.kubernetes.io/managed-by: " + MANAGED_BY["app.kubernetes.io/managed-by"]


@dataclass(frozen=True)
class Rendered:
    """The validated objects of a spec, what they were validated against, what the cluster must have installed,
    the stack's description the Job records, its diagram, and the README that goes with them."""

    spec: ServingSpec
    manifests: tuple[Manifest, ...]
    readme: str
    stack: ServingStack
    validation: Validation = field(default_factory=lambda: Validation({}))
    requirements: tuple[Requirement, ...] = ()
    diagram: str = ""


def render(spec: ServingSpec, *, image_is_default: bool = False, crds: Sequence[CrdSchema] = (),
           stack: ServingStack | None = None) -> Rendered:
    """The objects (validated: InvalidManifest when one is not; custom resources against `crds` where one is
    given for their kind) and the README. `stack`: the description the Job records (default: what the
    manifests say; --apply passes the cluster's versions and nodes)."""
    from cmx.k8s.diagram import mermaid

    record = stack or stack_record(spec)
    manifests = all_objects(spec, record)
    validation = validate_all((m.body for m in manifests), crds=crds)
    needs = requirements(spec)
    diagram = mermaid(manifests)
    from cmx.templates import render as render_template

    entry = stack_for(spec.stack)
    readme = render_template(
        entry.readme, spec=spec, manifests=manifests, serve=" ".join(serve_argv(spec)), port=PORT,
        hf_home=HF_HOME, results=RESULTS, version=KUBERNETES_VERSION, image_is_default=image_is_default,
        namespace_flag=f" -n {spec.namespace}" if spec.namespace else "", validation=validation,
        requirements=needs, stack=record, diagram=diagram, target=job_target(spec), entry=entry)
    return Rendered(spec, manifests, readme, record, validation, needs, diagram)


def dump(body: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(body, sort_keys=False, default_flow_style=False, width=120)


def write(rendered: Rendered, out_dir: Path) -> tuple[Path, ...]:
    """The files in `out_dir` (created). A numbered manifest a previous render wrote that this one does not
    (10-deployment.yaml after switching to a LeaderWorkerSet) is removed, so `kubectl apply -f` never
    applies a stale object; files cmx did not write are left alone."""
    out_dir.mkdir(parents=True, exist_ok=True)
    names = {m.filename for m in rendered.manifests}
    for old in out_dir.glob("[0-9][0-9]-*.yaml"):
        if old.name not in names and _MARK in old.read_text(encoding="utf-8", errors="replace"):
            old.unlink()
    paths = []
    for m in rendered.manifests:
        path = out_dir / m.filename
        path.write_text(f"# rendered by `cmx deploy` for: {rendered.spec.benchmark_query}\n" + dump(m.body),
                        encoding="utf-8")
        paths.append(path)
    readme = out_dir / "README.md"
    readme.write_text(rendered.readme, encoding="utf-8")
    return (*paths, readme)
