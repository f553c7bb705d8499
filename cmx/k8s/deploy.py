"""`cmx deploy QUERY --k8s OUT`: from a query and the user's options to the ServingSpec, its validated manifests
written to OUT; with --apply the stack rolled out to the cluster and benchmarked (cmx.k8s.cluster), with
--delete what --apply made removed again."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cmx.k8s import K8sError
from cmx.k8s.apply import Applied
from cmx.k8s.cluster import Cluster, JobOutcome, Waits
from cmx.k8s.devices import PodDeviceProfile
from cmx.k8s.manifests import ServingSpec
from cmx.k8s.output import Rendered
from cmx.k8s.stack_options import StackOptions
from cmx.secrets import mask_urls
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
    stack: StackOptions = field(default_factory=StackOptions)
    crd_files: tuple[Path, ...] = ()    # CRDs to check the custom resources against offline (--crd)


@dataclass(frozen=True)
class DeployRequest:
    """What `cmx deploy` is asked: the benchmark query, where the manifests go, whether to apply them."""

    query: str
    out_dir: Path
    inputs: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    options: K8sOptions = K8sOptions()
    apply: bool = False
    delete: bool = False                # remove what --apply made (the volumes stay)
    detach: bool = False                # with apply: start the benchmark Job and return, not wait for it
    waits: Waits = field(default_factory=Waits)
    kubeconfig: Path | None = None      # default: $KUBECONFIG or ~/.kube/config
    say: Callable[[str], None] = field(default=lambda _: None, compare=False)  # progress lines of --apply


@dataclass(frozen=True)
class K8sDeployment:
    """Rendered (and written) manifests; `applied` lists what --apply sent to the cluster."""

    rendered: Rendered
    out_dir: Path
    files: tuple[Path, ...]
    image_is_default: bool
    applied: tuple[Applied, ...] = ()
    deleted: tuple[Applied, ...] = ()
    models: tuple[str, ...] = ()        # what the stack's entry point listed on --apply
    job: JobOutcome | None = None       # the benchmark Job's end, when --apply waited for it

    def to_json(self) -> dict[str, Any]:
        spec, r = self.rendered.spec, self.rendered
        return {
            "out_dir": str(self.out_dir), "files": [str(f) for f in self.files],
            "objects": [{"kind": m.kind, "name": m.name, "file": m.filename} for m in self.rendered.manifests],
            "device": spec.device, "gpu_resource": spec.profile.resource, "gpus_per_pod": spec.gpus,
            "nodes": spec.nodes, "model": spec.model.repo, "revision": spec.model.revision,
            "serving_image": spec.serving_image, "image": spec.benchmark_image,
            "image_is_default": self.image_is_default, "namespace": spec.namespace,
            "service_url": spec.service_url, "benchmark_query": spec.benchmark_query,
            "applied": [{"kind": a.kind, "name": a.name, "namespace": a.namespace} for a in self.applied],
            "deleted": [{"kind": a.kind, "name": a.name, "namespace": a.namespace} for a in self.deleted],
            "stack": r.stack.to_json(),
            "validated": {"crds": dict(r.validation.checked), "without_crd": list(r.validation.unchecked),
                          "cel_rules_left_to_the_server": r.validation.cel_rules},
            "requirements": [{"crd": q.crd, "what": q.what, "install": q.install} for q in r.requirements],
            "entry_models": list(self.models),
            "job": None if self.job is None else {"name": self.job.name, "pod": self.job.pod,
                                                  "succeeded": self.job.succeeded, "result": self.job.result},
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
    """Refuse what the benchmark Job cannot be given: an input it sets itself, or a URL's credentials (its manifest
    is written to --out and readable in the cluster)."""
    clash = [k for k in JOB_INPUTS if k in given]
    if clash:
        raise K8sError(f"--input {', '.join(clash)} cannot be given to deploy --k8s: the benchmark Job sets "
                       f"{'it' if len(clash) == 1 else 'them'} (the Service's URL, the served model, its results "
                       "volume, the model cache)",
                       hint="to benchmark a server you already run, use `cmx run 'QUERY _endpoint' --input "
                            "endpoint_url=...` instead")
    credentials = [k for k, v in given.items() if isinstance(v, str) and mask_urls(v) != v]
    if credentials:
        raise K8sError(f"--input {', '.join(credentials)} holds a URL with credentials, which the benchmark Job's "
                       "manifest would show to everyone who may read the Job",
                       hint="give a URL the cluster reaches without credentials; cmx passes no input to a "
                            "Kubernetes Job through a Secret (HF_TOKEN is the one it takes from one)")


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
    """Render the manifests of the chosen stack serving the plan's model, and the Job that benchmarks it;
    validate them (the built-in kinds against the Kubernetes schemas, custom resources against the CRD files
    given); write them to `out_dir`; then with `apply` roll the stack out and benchmark it, with `delete`
    remove what apply made. Files are written first, so they are there to read when the cluster refuses."""
    from cmx.k8s.crd_schema import read_crd_files
    from cmx.k8s.output import render, write

    if request.apply and request.delete:
        raise K8sError("--apply and --delete exclude each other", hint="apply first; delete when the results are in")
    spec = serving_spec(request, settings)
    rendered = render(spec, image_is_default=request.options.image is None,
                      crds=read_crd_files(request.options.crd_files))
    out = Path(request.out_dir)
    result = K8sDeployment(rendered, out, write(rendered, out), request.options.image is None)
    if request.delete:
        return delete_from_cluster(result, request.kubeconfig)
    return roll_out(result, request) if request.apply else result


def serving_spec(request: DeployRequest, settings: Settings) -> ServingSpec:
    """The ServingSpec of the query's plan: its model, device and engine choices, and the user's options."""
    from cmx.docker import profile_for
    from cmx.docker.render import plan_device
    from cmx.docker.request import DockerQuery, dockerfile
    from cmx.execute.plan_check import check_plan
    from cmx.execute.request import Runtime, resolved
    from cmx.k8s.served import engine_inputs, plan_precision, served_model
    from cmx.mlperf.loadgen.harness_config import EngineSettings

    given, context, options = dict(request.inputs), dict(request.context), request.options
    refuse_job_inputs(given)
    query = job_query(request.query)
    p = resolved(query, given, context, Runtime(settings))
    profile = pod_profile_for(plan_device(p), options)
    model = served_model(p)
    engine = engine_inputs(p)
    # what the Job's run would refuse at its start (a scenario without a target...) is refused here, before the
    # stack pulls its weights: its plan as the Job runs it, with the endpoint the Job is given
    check_plan(resolved(query, {**given, "endpoint_url": "http://stack-entry:8000/v1"}, context, Runtime(settings)))
    tp = int(engine["tensor_parallel_size"] or 1)
    image = options.image or dockerfile(DockerQuery(query, given, context), settings).tag
    return ServingSpec(
        name=options.name or default_name(model.repo), profile=profile, model=model,
        serving_image=options.serving_image or default_serving_image(options.stack, profile.name,
                                                                     profile_for(profile.name).default_base_image),
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
        storage_class=options.storage_class, shm_size=options.shm_size, stack=options.stack)


def default_serving_image(stack: StackOptions, device: str, vllm_image: str) -> str:
    """The servers' image: the device's pinned vLLM image, or the image the stack's own servers need."""
    from cmx.k8s.stacks import stack_for

    return stack_for(stack).serving_image(device, vllm_image)


def roll_out(deployment: K8sDeployment, request: DeployRequest) -> K8sDeployment:
    """--apply: the CRDs the stack needs (refused with a line per missing one), the stack's objects checked
    against the cluster's own CRDs and applied, its readiness, a smoke test of its entry point, the cluster's
    versions and nodes into the stack's description, then the benchmark Job, waited for unless detached."""
    from cmx.k8s.apply import apply_bodies, connect
    from cmx.k8s.cluster import SmokeTestFailed, require
    from cmx.k8s.output import render, write
    from cmx.k8s.validate import validate_all

    say = request.say
    spec = deployment.rendered.spec
    api, context_namespace = connect(request.kubeconfig)
    namespace = spec.namespace or context_namespace
    crds = require(api, deployment.rendered.requirements)
    validate_all((m.body for m in deployment.rendered.manifests), crds=crds)  # against the cluster's own CRDs
    stack_objects, _ = split_benchmark(deployment.rendered)
    say(f"applying {len(stack_objects)} objects of {deployment.rendered.stack.title()} to {api.configuration.host} "
        f"(namespace {namespace})")
    applied = apply_bodies(api, stack_objects, namespace)
    cluster = Cluster(api, namespace, spec.name, say, request.waits)
    say("waiting for the stack to serve")
    cluster.wait_ready(stack_objects)
    url = entry_url(cluster, deployment.rendered)
    models = cluster.models(url)
    if spec.model.repo not in models:
        raise SmokeTestFailed(f"the stack's entry point {url} lists {', '.join(models) or 'no model'}, not "
                              f"{spec.model.repo}", hint="check the served model name (the servers' "
                                                         "--served-model-name, KServe's spec.model.name)")
    say(f"{url} serves {spec.model.repo}")
    final_spec = replace(spec, stack=replace(spec.stack, entry_url=url))
    record = cluster.observed(replace(deployment.rendered.stack, entry_url=url), crds)
    final = render(final_spec, image_is_default=deployment.image_is_default, crds=crds, stack=record)
    files = write(final, deployment.out_dir)
    _, job_objects = split_benchmark(final)
    job = next(b for b in job_objects if b["kind"] == "Job")
    if cluster.read(job) is not None:  # a Job's pod template cannot change: an earlier run's Job goes first
        say(f"deleting the earlier Job {job['metadata']['name']} (its results stay on the volume)")
        cluster.delete([job])
        cluster.wait_gone(job)
    applied += apply_bodies(api, job_objects, namespace)
    say(f"started the benchmark Job {job['metadata']['name']}")
    outcome = None if request.detach else cluster.wait_job(job)
    return replace(deployment, rendered=final, files=files, applied=tuple(applied), models=models, job=outcome)


def split_benchmark(rendered: Rendered) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The stack's objects, and the benchmark's (its description and Job), which --apply starts last."""
    from cmx.k8s.manifests import stack_config_name

    bench = {("Job", f"{rendered.spec.name}-benchmark"), ("ConfigMap", stack_config_name(rendered.spec))}
    stack = [m.body for m in rendered.manifests if (m.kind, m.name) not in bench]
    return stack, [m.body for m in rendered.manifests if (m.kind, m.name) in bench]


def entry_url(cluster: Cluster, rendered: Rendered) -> str:
    """Where the Job sends: the user's --entry-url; where the cluster says the stack's entry point is (a
    Gateway's Service as the cluster labels it, an LLMInferenceService's own URL); else the rendered one."""
    from cmx.k8s.stacks import job_target, stack_for

    spec = rendered.spec
    if spec.stack.entry_url:
        return spec.stack.entry_url
    found = stack_for(spec.stack).found_url(cluster, spec, rendered.manifests)
    return found or job_target(spec).url


def delete_from_cluster(deployment: K8sDeployment, kubeconfig: Path | None = None) -> K8sDeployment:
    """--delete: every object --apply made, the benchmark first, but the two volumes (weights, results)."""
    from cmx.k8s.apply import connect
    api, context_namespace = connect(kubeconfig)
    spec = deployment.rendered.spec
    cluster = Cluster(api, spec.namespace or context_namespace, spec.name, lambda _: None, Waits())
    bodies = [m.body for m in deployment.rendered.manifests if m.kind != "PersistentVolumeClaim"]
    return replace(deployment, deleted=tuple(cluster.delete(bodies)))


def apply_to_cluster(deployment: K8sDeployment, kubeconfig: Path | None = None) -> K8sDeployment:
    """Server-side apply the rendered objects to the cluster of the kubeconfig ($KUBECONFIG or ~/.kube/config
    unless given), all at once as `kubectl apply -f` would (no waiting, no smoke test: `roll_out` does those);
    the deployment with what was applied."""
    from cmx.k8s.apply import apply

    applied = apply([m.body for m in deployment.rendered.manifests], kubeconfig=kubeconfig,
                    namespace=deployment.rendered.spec.namespace)
    return replace(deployment, applied=tuple(applied))
