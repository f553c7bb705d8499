"""`cmx deploy QUERY --k8s OUT`: from a query and the user's options to the ServingSpec, its validated manifests
written to OUT, and with --apply the objects sent to the cluster."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cmx.k8s import K8sError
from cmx.k8s.apply import Applied
from cmx.k8s.devices import PodDeviceProfile
from cmx.k8s.output import Rendered
from cmx.settings import Settings

# the inputs the benchmark Job sets itself: a user's value would point it somewhere else
JOB_INPUTS = ("endpoint_url", "endpoint_model", "results_dir", "model_path")


@dataclass(frozen=True)
class K8sOptions:
    """How `deploy --k8s` renders the manifests. None: the default that the plan or the device profile gives."""

    image: str | None = None            # the benchmark Job's cmx image (default: the tag `run --docker` builds)
    serving_image: str | None = None    # the vLLM image (default: the device's pinned vLLM base image)
    namespace: str | None = None
    name: str | None = None             # the objects' base name (default: vllm-<model>)
    gpus: int | None = None             # GPUs per serving pod (default: tensor_parallel_size)
    nodes: int = 1                      # above 1: a LeaderWorkerSet, pipeline parallel over the nodes
    gpu_name: str = ""                  # the target GPU ("AMD Instinct MI300X"), for the profile's choices
    hf_token_secret: str = "hf-token"
    cache_size: str | None = None       # default: by model
    results_size: str = "10Gi"
    storage_class: str | None = None
    shm_size: str = "16Gi"
    runtime_class: str | None = None    # cuda only; None: the profile's ("nvidia"), "": none
    supplemental_groups: tuple[int, ...] | None = None  # rocm only; None: the profile's (44, 109)


@dataclass(frozen=True)
class DeployRequest:
    """What `cmx deploy` is asked: the benchmark query, where the manifests go, whether to apply them."""

    query: str
    out_dir: Path
    inputs: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    options: K8sOptions = K8sOptions()
    apply: bool = False
    kubeconfig: Path | None = None      # default: $KUBECONFIG or ~/.kube/config


@dataclass(frozen=True)
class K8sDeployment:
    """Rendered (and written) manifests; `applied` lists what --apply sent to the cluster."""

    rendered: Rendered
    out_dir: Path
    files: tuple[Path, ...]
    image_is_default: bool
    applied: tuple[Applied, ...] = ()

    def to_json(self) -> dict[str, Any]:
        spec = self.rendered.spec
        return {
            "out_dir": str(self.out_dir), "files": [str(f) for f in self.files],
            "objects": [{"kind": m.kind, "name": m.name, "file": m.filename} for m in self.rendered.manifests],
            "device": spec.device, "gpu_resource": spec.profile.resource, "gpus_per_pod": spec.gpus,
            "nodes": spec.nodes, "model": spec.model.repo, "revision": spec.model.revision,
            "serving_image": spec.serving_image, "image": spec.benchmark_image,
            "image_is_default": self.image_is_default, "namespace": spec.namespace,
            "service_url": spec.service_url, "benchmark_query": spec.benchmark_query,
            "applied": [{"kind": a.kind, "name": a.name, "namespace": a.namespace} for a in self.applied],
        }


def job_query(query: str) -> str:
    """The query the benchmark Job runs: the same, against the Service (`_endpoint`)."""
    words = query.split()
    return query if "_endpoint" in words else f"{query} _endpoint"


def default_name(repo: str) -> str:
    """vllm-<the repository's name>, as a DNS label of at most 40 characters."""
    slug = re.sub(r"[^a-z0-9]+", "-", repo.rsplit("/", 1)[-1].lower()).strip("-")
    return f"vllm-{slug}"[:40].rstrip("-")


def refuse_job_inputs(given: Mapping[str, Any]) -> None:
    clash = [k for k in JOB_INPUTS if k in given]
    if clash:
        raise K8sError(f"--input {', '.join(clash)} cannot be given to deploy --k8s: the benchmark Job sets "
                       f"{'it' if len(clash) == 1 else 'them'} (the Service's URL, the served model, its results "
                       "volume, the model cache)",
                       hint="to benchmark a server you already run, use `cmx run 'QUERY _endpoint' --input "
                            "endpoint_url=...` instead")


def pod_profile_for(device: str | None, options: K8sOptions) -> PodDeviceProfile:
    """The device's pod profile with the user's runtime class or groups, each refused on the wrong vendor."""
    from cmx.k8s.devices import pod_profile

    profile = pod_profile(device)
    if options.runtime_class is not None:
        if profile.name != "cuda":
            raise K8sError(f"--runtime-class is for NVIDIA GPUs; a {profile.name} pod takes no runtime class")
        profile = replace(profile, runtime_class=options.runtime_class or None)
    if options.supplemental_groups is not None:
        if profile.name != "rocm":
            raise K8sError(f"--supplemental-groups is for AMD GPUs (the /dev/kfd and render groups), not "
                           f"{profile.name}")
        profile = replace(profile, supplemental_groups=tuple(options.supplemental_groups))
    return profile


def deploy(request: DeployRequest, settings: Settings) -> K8sDeployment:
    """Render the manifests that serve the plan's model with vLLM and run the benchmark against it as a Job,
    validate them against the Kubernetes schemas, write them to `out_dir`, and with `apply` send them to the
    kubeconfig's cluster (after writing, so the files are there to read when applying fails)."""
    from cmx.docker import profile_for
    from cmx.docker.render import plan_device
    from cmx.docker.request import DockerQuery, dockerfile
    from cmx.execute.request import Runtime, resolved
    from cmx.k8s.manifests import ServingSpec
    from cmx.k8s.output import render, write
    from cmx.k8s.served import engine_inputs, plan_precision, served_model
    from cmx.mlperf.loadgen.harness_config import EngineSettings

    given, context, options = dict(request.inputs), dict(request.context), request.options
    refuse_job_inputs(given)
    query = job_query(request.query)
    p = resolved(query, given, context, Runtime(settings))
    profile = pod_profile_for(plan_device(p), options)
    model = served_model(p)
    engine = engine_inputs(p)
    tp = int(engine["tensor_parallel_size"] or 1)
    image = options.image or dockerfile(DockerQuery(query, given, context), settings).tag
    spec = ServingSpec(
        name=options.name or default_name(model.repo), profile=profile, model=model,
        serving_image=options.serving_image or profile_for(profile.name).default_base_image,
        benchmark_image=image, benchmark_query=query,
        benchmark_inputs=tuple((k, str(v)) for k, v in given.items()),
        benchmark_context=tuple((k, str(v)) for k, v in context.items()),
        namespace=options.namespace, gpus=options.gpus or tp, nodes=options.nodes,
        engine=EngineSettings(precision=plan_precision(p), tensor_parallel_size=tp, max_num_seqs=engine["max_num_seqs"],
                              max_num_batched_tokens=engine["max_num_batched_tokens"],
                              gpu_memory_utilization=engine["gpu_memory_utilization"],
                              max_model_len=engine["max_model_len"]),
        gpu_name=options.gpu_name, hf_token_secret=options.hf_token_secret,
        cache_size=options.cache_size or model.cache_size, results_size=options.results_size,
        storage_class=options.storage_class, shm_size=options.shm_size)
    rendered = render(spec, image_is_default=options.image is None)
    out = Path(request.out_dir)
    result = K8sDeployment(rendered, out, write(rendered, out), options.image is None)
    return apply_to_cluster(result, request.kubeconfig) if request.apply else result


def apply_to_cluster(deployment: K8sDeployment, kubeconfig: Path | None = None) -> K8sDeployment:
    """Server-side apply the rendered objects to the cluster of the kubeconfig ($KUBECONFIG or ~/.kube/config
    unless given); the deployment with what was applied."""
    from cmx.k8s.apply import apply

    applied = apply([m.body for m in deployment.rendered.manifests], kubeconfig=kubeconfig,
                    namespace=deployment.rendered.spec.namespace)
    return replace(deployment, applied=tuple(applied))
