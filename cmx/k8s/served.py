"""What the serving pods run, read from a resolved plan: the model (a Hugging Face repository at a
pinned commit) and the engine choices the benchmark's recipe was given.

The model is the root step's dep named `model` (the app recipes' `as: model`, get-ml-model-llama2 or
-llama3); the benchmark it belongs to (a tag of that recipe, found with benchmark_for) gives the size
of its weights, which the model cache is sized for. Its repository and revision are that step's own
inputs, so the weights served in the cluster are the weights `cmx run` would have downloaded. A tiny
model is generated on the machine that runs the step and a `model_path` is a folder on it: neither
can be fetched by a pod from a hub, so both are refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cmx.k8s import K8sError, values
from cmx.resolve.plan import Plan, Step

# the model cache a PVC is sized for by default: the benchmark's weights (its model_size) and half as much
# again, for the tokenizer and config files, a download's partial files and a second revision fetched
# beside the first, in steps of CACHE_STEP_GI (llama2-70b: 130 GB -> 200Gi; llama3.1-8b: 16 GB -> 50Gi)
CACHE_HEADROOM = 1.5
CACHE_STEP_GI = 50
DEFAULT_CACHE_SIZE = "200Gi"  # a model step of no benchmark cmx knows
_GI = 2**30
# the root recipe's inputs that are vLLM engine choices (as cmx.mlperf.app_step reads them)
ENGINE_INPUTS = ("tensor_parallel_size", "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization",
                 "max_model_len")


class ServedModelError(K8sError):
    """The plan's model cannot be served from a pod."""


@dataclass(frozen=True)
class ServedModel:
    """A Hugging Face repository at a commit, as `vllm serve REPO --revision REV` downloads it.

    recipe: the step that provides it (get-ml-model-llama2), for messages.
    quantized: a pre-quantized checkpoint (the fp8 variation's), so vLLM is not asked to quantize it again.
    model_size: bytes of the benchmark's weights (its Benchmark.model_size); 0 when no benchmark is known.
    """

    repo: str
    revision: str
    recipe: str
    quantized: bool = False
    model_size: int = 0

    def __post_init__(self) -> None:
        # the pods download exactly this: a path or a newline would reach `vllm serve` and the Job's arguments
        prefix = "fp8_" if self.quantized else ""
        values.repo_id(f"--input {self.recipe}.{prefix}repo", self.repo)
        values.revision(f"--input {self.recipe}.{prefix}revision", self.revision)

    @property
    def cache_size(self) -> str:
        """The model cache's default size: the weights with CACHE_HEADROOM, rounded up to CACHE_STEP_GI."""
        return cache_size_for(self.model_size) if self.model_size else DEFAULT_CACHE_SIZE

    def snapshot_dir(self, hf_home: str) -> str:
        """Where huggingface_hub puts this commit's files under HF_HOME: the benchmark Job reads the
        tokenizer from there instead of downloading the weights a second time."""
        return f"{hf_home}/hub/models--{self.repo.replace('/', '--')}/snapshots/{self.revision}"


def model_step(plan: Plan) -> Step:
    """The step the root step reads as `model`."""
    root = plan.root_step
    found = [plan.steps[e.step] for e in root.deps if e.as_ == "model"]
    if not found:
        raise ServedModelError(f"{root.name} has no dependency named `model`: there is no model to serve",
                               hint="deploy --k8s serves the model of an app recipe such as "
                                    "`app mlperf inference llama2`")
    return found[0]


def served_model(plan: Plan) -> ServedModel:
    """The repository and commit the plan's model step would download."""
    step = model_step(plan)
    i = step.inputs
    if "tiny" in step.variations:
        raise ServedModelError(
            f"the plan's model is {step.name} _tiny, which cmx generates on the machine that runs it: a pod cannot "
            "download it from a hub", hint="drop _tiny from the query (deploy --k8s serves the real model)")
    if i.get("model_path"):
        raise ServedModelError(f"the plan's model is a local folder ({i['model_path']}), which a pod cannot reach",
                               hint="drop --input model_path: the pods download the pinned repository themselves")
    fp8 = "fp8" in step.variations and "fp8_repo" in i
    repo, revision = (i.get("fp8_repo"), i.get("fp8_revision")) if fp8 else (i.get("repo"), i.get("revision"))
    if not repo:
        raise ServedModelError(f"{step.name} names no Hugging Face repository (its `repo` input)",
                               hint="deploy --k8s serves a model the recipe downloads from a hub")
    if not revision:
        name = "fp8_revision" if fp8 else "revision"
        raise ServedModelError(f"{step.name} pins no commit of {repo} (its {name} input)",
                               hint=f"give --input {step.name}.{name}=<40-hex commit>: pods must serve the "
                                    "weights a rerun would get")
    return ServedModel(repo=str(repo), revision=str(revision), recipe=step.name, quantized=fp8,
                       model_size=model_size(step))


def model_size(step: Step) -> int:
    """Bytes of the weights of the benchmark whose name the model recipe carries as a tag (get-ml-model-llama2:
    llama2-70b), read from the benchmark through the registry; 0 for a recipe of no benchmark."""
    from cmx.mlperf.benchmarks import UnknownBenchmark, benchmark_for

    for tag in step.recipe.tags:
        try:
            return benchmark_for(tag).model_size
        except UnknownBenchmark:
            continue
    return 0


def cache_size_for(weights: int) -> str:
    """A Kubernetes quantity for a cache that holds `weights` bytes with CACHE_HEADROOM: 130 GB -> 200Gi."""
    steps = math.ceil(weights * CACHE_HEADROOM / (CACHE_STEP_GI * _GI))
    return f"{max(steps, 1) * CACHE_STEP_GI}Gi"


def engine_inputs(plan: Plan) -> dict[str, Any]:
    """The root step's engine choices (tensor_parallel_size and the rest), None where not given."""
    inputs: Mapping[str, Any] = plan.root_step.inputs
    return {name: inputs.get(name) for name in ENGINE_INPUTS}


def plan_precision(plan: Plan) -> str | None:
    value = plan.root_step.full_context.get("precision")
    return str(value) if value else None
