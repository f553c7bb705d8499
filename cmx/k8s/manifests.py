"""The Kubernetes objects, as plain dicts, for serving a model with vLLM and benchmarking it.

Dicts rather than YAML templates: the values (a query with quotes, a revision of hex digits that YAML
would read as a number, flags) are quoted by yaml.safe_dump, never by hand, and each object can be
validated before it is written. `cmx.k8s.stacks.objects(spec)` returns them in the order they are applied:

- PersistentVolumeClaim `<name>-model-cache`: the Hugging Face cache (HF_HOME) the server downloads the
  weights into, so a restarted pod does not download 130 GB again. ReadWriteMany, because several pods
  mount it: the benchmark Job reads the tokenizer from it, and across nodes every LeaderWorkerSet pod
  loads its share of the weights from it.
- PersistentVolumeClaim `<name>-results`: the results trees the Job writes (ReadWriteOnce: one writer).
- Deployment `<name>` running `vllm serve` (one pod, its GPUs), or a LeaderWorkerSet when one model spans
  `nodes` > 1 nodes (pipeline parallelism over Ray: the leader runs `ray start --head` and `vllm serve`,
  each worker joins the leader's Ray cluster).
- Service `<name>` (ClusterIP, port 8000) in front of the serving pod (the leader, with a LeaderWorkerSet).
- Job `<name>-benchmark` running `cmx run "<query> _endpoint"` against the Service, once the server is
  healthy.

The engine arguments are the device profile's (cmx.mlperf.backends.profiles.engine_specs), turned into
`vllm serve` flags by the same function that starts cmx's local server (vllm_server.engine_flags).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace
from typing import Any

from cmx.k8s import K8sError, values
from cmx.k8s.devices import PodDeviceProfile
from cmx.k8s.served import ServedModel
from cmx.k8s.stack_options import StackOptions
from cmx.mlperf.backends.machine import MachineFacts, ModelFacts
from cmx.mlperf.backends.profiles import engine_specs
from cmx.mlperf.backends.vllm_server import engine_flags, merged_spec
from cmx.mlperf.loadgen.harness_config import EngineSettings

PORT = 8000
RAY_PORT = 6379
# the Hugging Face cache (HF_HOME) on the model-cache volume, outside /root: the benchmark image may run as
# the user who built it, who cannot enter /root
HF_HOME = "/cache/huggingface"
RESULTS = "/results"
SHM_SIZE = "16Gi"          # NCCL/RCCL and the engine's worker processes share tensors through /dev/shm
RESULTS_SIZE = "10Gi"
HF_TOKEN_SECRET = "hf-token"
# the benchmark Job's stack description (a ConfigMap) and, for stacks that do not share cmx's model cache, the
# tokenizer its init container downloads
STACK_DIR = "/etc/cmx"
STACK_FILE = "stack.json"
TOKENIZER_DIR = "/tokenizer"
HF_TOKEN_KEY = "token"
# the first start downloads the weights (130 GB for llama2-70b) and loads them onto the GPUs: the startup
# probe allows an hour (360 x 10 s) before the kubelet restarts the container; a restart after that
# finds the weights in the model cache and starts in minutes
PROBE_PERIOD_S = 10
STARTUP_FAILURES = 360
LWS_API = "leaderworkerset.x-k8s.io/v1"
MANAGED_BY = {"app.kubernetes.io/managed-by": "cmx"}
# waits in the Job's init container until the server answers GET /health (the weights are then on the
# model cache, where the benchmark reads the tokenizer)
WAIT_FOR_SERVER = (
    "import sys, time, urllib.request\n"
    "url = sys.argv[1]\n"
    "while True:\n"
    "    try:\n"
    "        with urllib.request.urlopen(url, timeout=5) as r:\n"
    "            if r.status == 200:\n"
    "                break\n"
    "    except OSError:\n"
    "        pass\n"
    "    print('waiting for', url, flush=True)\n"
    "    time.sleep(10)\n"
)
# downloads the files a benchmark client reads (tokenizer, config, chat template), never the weights
FETCH_TOKENIZER = (
    "import sys\n"
    "from huggingface_hub import snapshot_download\n"
    "repo, revision, dest = sys.argv[1:4]\n"
    "snapshot_download(repo, revision=revision, local_dir=dest,\n"
    "                  allow_patterns=['*.json', '*.model', '*.txt', '*.tiktoken', '*.jinja', 'tokenizer*'])\n"
)


# a DNS-1035 label (the Service's name is a host name), short enough for "-model-cache" and "-benchmark"
_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
NAME_MAX = 40


class SpecError(K8sError):
    """An option the manifests cannot be made from (a name Kubernetes refuses, a size that is no quantity)."""


@dataclass(frozen=True)
class ServingSpec:
    """Everything the manifests are made from.

    name: the objects' base name (a DNS label: the Service's name is a host name).
    gpus: GPUs per serving pod; more than tensor_parallel_size makes vLLM data-parallel over groups.
    nodes: pods serving one model; above 1 a LeaderWorkerSet with pipeline_parallel_size = nodes, each pod
        with `gpus` = tensor_parallel_size GPUs.
    gpu_name: the target GPU's product name, when known ("AMD Instinct MI300X" turns on AITER for ROCm);
        the cluster's GPUs are not this machine's, so nothing is detected.
    serving_image: the vLLM image of the pods that serve; benchmark_image: the cmx image the Job runs.
    benchmark_query: the query the Job runs (the user's with `_endpoint`); benchmark_inputs: its --input
        pairs besides the endpoint's, the results folder's and the model folder's.
    """

    name: str
    profile: PodDeviceProfile
    model: ServedModel
    serving_image: str
    benchmark_image: str
    benchmark_query: str
    benchmark_inputs: tuple[tuple[str, str], ...] = ()
    benchmark_context: tuple[tuple[str, str], ...] = ()
    namespace: str | None = None
    gpus: int = 1
    nodes: int = 1
    engine: EngineSettings = field(default_factory=EngineSettings)
    gpu_name: str = ""
    hf_token_secret: str = HF_TOKEN_SECRET
    cache_size: str = "200Gi"
    results_size: str = RESULTS_SIZE
    storage_class: str | None = None
    shm_size: str = SHM_SIZE
    stack: StackOptions = field(default_factory=StackOptions)

    def __post_init__(self) -> None:
        # kubernetes-validate checks types and fields, not the formats of names, quantities and counts: these are
        # (cmx.k8s.values), before anything is rendered
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name) or len(self.name) > NAME_MAX:
            raise SpecError(f"--name {values.show(self.name)} is not a usable name for the objects",
                            hint=f"lower-case letters, digits and '-', starting with a letter, at most {NAME_MAX} "
                                 "characters (a DNS-1035 label, with room for the objects' suffixes)")
        if self.namespace is not None:
            values.dns_label("--namespace", self.namespace)
        for option, size in (("--cache-size", self.cache_size), ("--results-size", self.results_size),
                             ("--shm-size", self.shm_size)):
            values.quantity(option, size)
        values.count("--gpus", self.gpus, 1, values.MAX_GPUS, "GPUs of one pod")
        values.count("--nodes", self.nodes, 1, values.MAX_NODES, "Kubernetes' largest supported cluster")
        values.count("--replicas x --nodes", self.stack.replicas * self.nodes, 1, values.MAX_REPLICAS,
                     "serving pods of one model")
        values.dns_subdomain("--hf-token-secret", self.hf_token_secret)
        if self.storage_class is not None:
            values.dns_subdomain("--storage-class", self.storage_class)
        values.image("--serving-image", self.serving_image)
        values.image("--image", self.benchmark_image)
        values.text("--gpu-name", self.gpu_name)
        if self.profile.runtime_class is not None:
            values.dns_subdomain("--runtime-class", self.profile.runtime_class)
        for gid in self.profile.supplemental_groups:
            values.count("--supplemental-groups", gid, 0, values.MAX_GROUP_ID, "Kubernetes' group ids")
        if self.nodes > 1 and self.gpus != self.engine.tensor_parallel_size:
            raise SpecError(f"across {self.nodes} nodes each pod runs one tensor-parallel group: gpus ({self.gpus}) "
                            f"must equal tensor_parallel_size ({self.engine.tensor_parallel_size})",
                            hint="give --input tensor_parallel_size=N with --gpus N (or leave --gpus out)")

    @property
    def device(self) -> str:
        return self.profile.name

    @property
    def multi_node(self) -> bool:
        return self.nodes > 1

    @property
    def service_url(self) -> str:
        """The OpenAI API's base inside the cluster (the Service's DNS name, qualified by the namespace when given)."""
        host = f"{self.name}.{self.namespace}.svc" if self.namespace else self.name
        return f"http://{host}:{PORT}/v1"


# --- the serving container ----------------------------------------------------------------------------


def engine_args(spec: ServingSpec) -> tuple[dict[str, Any], dict[str, str]]:
    """The engine arguments and environment the device profile gives this spec's pods.

    The facts describe the target pod, not this machine: `gpus` GPUs numbered from 0, as the device
    plugin exposes them. The profile's pinning variables (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES) are
    left out: the device plugin already gives the container exactly its GPUs. Its environment defaults
    go in whole: a pod has no user environment they could override.
    """
    settings = spec.engine
    if spec.multi_node:  # one model over the pods: pipeline stages, placed by vLLM on the leader's Ray cluster
        settings = replace(settings, pipeline_parallel_size=spec.nodes, distributed_executor_backend="ray")
    options = settings.options(spec.device)
    facts = MachineFacts(gpus=tuple(str(i) for i in range(spec.gpus)), gpu_name=spec.gpu_name)
    # the fp8 variation serves a pre-quantized checkpoint: only the KV cache is asked for in FP8
    model = ModelFacts(kv_bytes_per_token=0, max_model_len=0, quantized=True) if spec.model.quantized else None
    kwargs, _pinning, defaults, _unset = merged_spec(engine_specs(options, facts, model))
    return kwargs, defaults


def serve_argv(spec: ServingSpec) -> list[str]:
    """`vllm serve REPO --revision REV ...` with the profile's engine flags."""
    m = spec.model
    argv = ["vllm", "serve", m.repo, "--revision", m.revision, "--tokenizer-revision", m.revision,
            "--served-model-name", m.repo, "--host", "0.0.0.0", "--port", str(PORT),
            # a line per request costs the server CPU at thousands of requests per second
            "--disable-uvicorn-access-log"]
    if spec.engine.max_model_len is not None:
        argv += ["--max-model-len", str(spec.engine.max_model_len)]
    return argv + engine_flags(engine_args(spec)[0])


def hf_token_env(spec: ServingSpec) -> dict[str, Any]:
    """HF_TOKEN from the Secret, never inline; optional, so an ungated model needs no Secret."""
    return {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": spec.hf_token_secret, "key": HF_TOKEN_KEY,
                                                                "optional": True}}}


def server_env(spec: ServingSpec) -> list[dict[str, Any]]:
    _, defaults = engine_args(spec)
    env = [{"name": k, "value": v} for k, v in sorted(defaults.items())]
    return [*env, {"name": "HF_HOME", "value": HF_HOME}, hf_token_env(spec)]


def http_probe(failures: int) -> dict[str, Any]:
    return {"httpGet": {"path": "/health", "port": PORT}, "periodSeconds": PROBE_PERIOD_S,
            "timeoutSeconds": 5, "failureThreshold": failures}


def security_context(profile: PodDeviceProfile) -> dict[str, Any] | None:
    ctx: dict[str, Any] = {}
    if profile.capabilities:
        ctx["capabilities"] = {"add": list(profile.capabilities)}
    if profile.seccomp_unconfined:
        ctx["seccompProfile"] = {"type": "Unconfined"}
    return ctx or None


def gpu_container(spec: ServingSpec, name: str, command: list[str], *, serves: bool) -> dict[str, Any]:
    """A container holding the pod's GPUs; `serves`: it answers the API (ports, probes)."""
    gpus = spec.engine.tensor_parallel_size if spec.multi_node else spec.gpus
    container: dict[str, Any] = {
        "name": name, "image": spec.serving_image, "command": command,
        "env": server_env(spec),
        "resources": {"limits": {spec.profile.resource: str(gpus)}},
        "volumeMounts": [{"name": "model-cache", "mountPath": HF_HOME}, {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if serves:
        container["ports"] = [{"name": "http", "containerPort": PORT}]
        container["startupProbe"] = http_probe(STARTUP_FAILURES)
        container["readinessProbe"] = http_probe(3)
    if spec.multi_node:
        container.setdefault("ports", []).append({"name": "ray", "containerPort": RAY_PORT})
    security = security_context(spec.profile)
    if security:
        container["securityContext"] = security
    return container


def gpu_pod(spec: ServingSpec, container: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "containers": [container],
        "volumes": [
            {"name": "model-cache", "persistentVolumeClaim": {"claimName": f"{spec.name}-model-cache"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": spec.shm_size}},
        ],
    }
    if spec.profile.runtime_class:
        pod["runtimeClassName"] = spec.profile.runtime_class
    if spec.profile.supplemental_groups:
        pod["securityContext"] = {"supplementalGroups": list(spec.profile.supplemental_groups)}
    return pod


# --- the objects --------------------------------------------------------------------------------------


def labels(spec: ServingSpec, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": spec.name, "app.kubernetes.io/component": component, **MANAGED_BY}


def server_selector(spec: ServingSpec) -> dict[str, str]:
    """The serving pods (with a LeaderWorkerSet only the leaders, which run the API server)."""
    selector = {"app.kubernetes.io/name": spec.name, "app.kubernetes.io/component": "server"}
    if spec.multi_node:
        selector["role"] = "leader"
    return selector


def object_meta(spec: ServingSpec, name: str, component: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels(spec, component)}
    if spec.namespace:
        meta["namespace"] = spec.namespace
    return meta


def pvc(spec: ServingSpec, name: str, size: str, access: str, component: str) -> dict[str, Any]:
    body: dict[str, Any] = {"accessModes": [access], "resources": {"requests": {"storage": size}}}
    if spec.storage_class:
        body["storageClassName"] = spec.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": object_meta(spec, name, component),
            "spec": body}


def deployment(spec: ServingSpec) -> dict[str, Any]:
    """One pod serving the model on its GPUs. Recreate: a rolling update would start a second server
    that waits for GPUs the first still holds."""
    pod = gpu_pod(spec, gpu_container(spec, "vllm", serve_argv(spec), serves=True))
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": object_meta(spec, spec.name, "server"),
        "spec": {
            "replicas": spec.stack.replicas,  # 1 but for llm-d, whose endpoint picker spreads requests over them
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": server_selector(spec)},
            "template": {"metadata": {"labels": labels(spec, "server")}, "spec": pod},
        },
    }


def leader_worker_set(spec: ServingSpec) -> dict[str, Any]:
    """One model over `nodes` pods: pipeline parallelism across them over Ray, tensor parallelism inside each.

    LWS sets LWS_LEADER_ADDRESS in every pod; the worker's shell reads it (`$LWS_LEADER_ADDRESS`), so the
    command works whether or not the kubelet expands `$(...)` references first.
    """
    serve = shlex.join(serve_argv(spec))
    leader = ["sh", "-c", f"ray start --head --port={RAY_PORT} && exec {serve}"]
    worker = ["sh", "-c", f'exec ray start --address="$LWS_LEADER_ADDRESS:{RAY_PORT}" --block']
    leader_labels = {**labels(spec, "server"), "role": "leader"}
    worker_labels = {**labels(spec, "server"), "role": "worker"}
    return {
        "apiVersion": LWS_API, "kind": "LeaderWorkerSet", "metadata": object_meta(spec, spec.name, "server"),
        "spec": {
            "replicas": spec.stack.replicas,
            "leaderWorkerTemplate": {
                "size": spec.nodes,
                "restartPolicy": "RecreateGroupOnPodRestart",  # one lost pod breaks the Ray cluster
                "leaderTemplate": {"metadata": {"labels": leader_labels},
                                   "spec": gpu_pod(spec, gpu_container(spec, "vllm-leader", leader, serves=True))},
                "workerTemplate": {"metadata": {"labels": worker_labels},
                                   "spec": gpu_pod(spec, gpu_container(spec, "vllm-worker", worker,
                                                                         serves=False))},
            },
        },
    }


def service(spec: ServingSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Service", "metadata": object_meta(spec, spec.name, "server"),
        "spec": {"type": "ClusterIP", "selector": server_selector(spec),
                 "ports": [{"name": "http", "port": PORT, "targetPort": PORT, "protocol": "TCP"}]},
    }


@dataclass(frozen=True)
class JobTarget:
    """Where the benchmark Job sends its samples and how it gets the model's tokenizer.

    url: the OpenAI API's base; ready_url: what its init container waits to answer 200.
    tokenizer_from_hub: an init container downloads the model's tokenizer and config files (not the weights)
        at the pinned revision into the pod, for a stack whose servers do not fill cmx's model cache (KServe's
        storage initializer, Dynamo's workers); False: read from the model cache the server downloaded into.
    """

    url: str
    ready_url: str
    tokenizer_from_hub: bool = False


def service_target(spec: ServingSpec) -> JobTarget:
    """The vLLM Service's API, ready when its /health answers."""
    return JobTarget(spec.service_url, spec.service_url.removesuffix("/v1") + "/health")


def stack_config_name(spec: ServingSpec) -> str:
    return f"{spec.name}-stack"


def benchmark_argv(spec: ServingSpec, target: JobTarget) -> list[str]:
    """`cmx run "<query> _endpoint"` against the stack's entry point. The model folder holds the tokenizer and
    config (the weights stay unread); each pod writes its own results folder (`$(POD_NAME)`, expanded by the
    kubelet), so a rerun never meets an earlier run's tree; the stack's description is the ConfigMap's."""
    model_path = TOKENIZER_DIR if target.tokenizer_from_hub else spec.model.snapshot_dir(HF_HOME)
    pairs = [("endpoint_url", target.url), ("endpoint_model", spec.model.repo),
             ("results_dir", f"{RESULTS}/$(POD_NAME)"), ("model_path", model_path),
             ("serving_stack", f"{STACK_DIR}/{STACK_FILE}"), *spec.benchmark_inputs]
    argv = ["cmx", "run", spec.benchmark_query]
    for key, value in pairs:
        argv += ["--input", f"{key}={value}"]
    for key, value in spec.benchmark_context:
        argv += ["--context", f"{key}={value}"]
    return [*argv, "--progress", "plain", "--json"]  # the result, as JSON, ends the log (--apply reads it)


def stack_config(spec: ServingSpec, stack: dict[str, Any]) -> dict[str, Any]:
    """The ConfigMap holding stack.json, the serving stack's description the Job's run records (--apply
    rewrites it with the versions and nodes read from the cluster before it starts the Job)."""
    import json

    meta = object_meta(spec, stack_config_name(spec), "benchmark")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            "data": {STACK_FILE: json.dumps(stack, indent=2, sort_keys=True) + "\n"}}


def benchmark_job(spec: ServingSpec, target: JobTarget | None = None) -> dict[str, Any]:
    """The benchmark client: no GPU (the stack serves), the results on their own volume. backoffLimit 0:
    a failed benchmark is a result to read, not something to retry silently."""
    target = target or service_target(spec)
    mounts: list[dict[str, Any]] = [{"name": "results", "mountPath": RESULTS},
                                    {"name": "stack", "mountPath": STACK_DIR, "readOnly": True}]
    volumes: list[dict[str, Any]] = [
        {"name": "results", "persistentVolumeClaim": {"claimName": f"{spec.name}-results"}},
        {"name": "stack", "configMap": {"name": stack_config_name(spec)}}]
    init: list[dict[str, Any]] = [{"name": "wait-for-server", "image": spec.benchmark_image,
             "command": ["python3", "-c", WAIT_FOR_SERVER, target.ready_url]}]
    if target.tokenizer_from_hub:
        mounts.append({"name": "tokenizer", "mountPath": TOKENIZER_DIR})
        volumes.append({"name": "tokenizer", "emptyDir": {}})
        init.insert(0, {"name": "fetch-tokenizer", "image": spec.benchmark_image,
                        "command": ["python3", "-c", FETCH_TOKENIZER, spec.model.repo, spec.model.revision,
                                    TOKENIZER_DIR],
                        "env": [hf_token_env(spec)],
                        "volumeMounts": [{"name": "tokenizer", "mountPath": TOKENIZER_DIR}]})
    else:
        mounts.append({"name": "model-cache", "mountPath": HF_HOME, "readOnly": True})
        volumes.append({"name": "model-cache", "persistentVolumeClaim": {"claimName": f"{spec.name}-model-cache",
                                                                         "readOnly": True}})
    pod = {
        "restartPolicy": "Never",
        "initContainers": init,
        "containers": [{
            "name": "benchmark", "image": spec.benchmark_image, "command": benchmark_argv(spec, target),
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    hf_token_env(spec)],
            "volumeMounts": mounts,
        }],
        "volumes": volumes,
    }
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": object_meta(spec, f"{spec.name}-benchmark", "benchmark"),
        "spec": {"backoffLimit": 0,
                 "template": {"metadata": {"labels": labels(spec, "benchmark")}, "spec": pod}},
    }


@dataclass(frozen=True)
class Manifest:
    """One object and the file it is written to (the number orders `kubectl apply -f DIR`)."""

    filename: str
    body: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body["kind"])

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])


def model_cache(spec: ServingSpec) -> Manifest:
    return Manifest("00-pvc-model-cache.yaml", pvc(spec, f"{spec.name}-model-cache", spec.cache_size, "ReadWriteMany",
                                                   "server"))


def results_volume(spec: ServingSpec) -> Manifest:
    return Manifest("01-pvc-results.yaml", pvc(spec, f"{spec.name}-results", spec.results_size, "ReadWriteOnce",
                                               "benchmark"))


def benchmark_objects(spec: ServingSpec, stack: dict[str, Any],
                      target: JobTarget | None = None) -> tuple[Manifest, ...]:
    """The stack's description and the Job that benchmarks it: applied last, once the stack serves."""
    return (Manifest("90-configmap-stack.yaml", stack_config(spec, stack)),
            Manifest("91-job-benchmark.yaml", benchmark_job(spec, target)))

