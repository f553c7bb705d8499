"""What a serving pod needs for its GPUs, one small profile per device (cuda, rocm).

The Kubernetes counterpart of cmx.docker's container profiles: the extended resource the device
plugin advertises, the runtime class, and the security settings and groups a vendor's stack needs
inside a pod. A profile sets only its own vendor's fields: the ROCm profile has no `nvidia.com/gpu`
and no NVIDIA runtime class, the CUDA profile no `amd.com/gpu` and no /dev/kfd groups. A CPU has no
GPU resource to request, so there is no profile for it (and `deploy --k8s` refuses it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cmx.k8s import K8sError

# The video and render groups' usual ids on the nodes (Ubuntu, RHEL): the container process must be
# in the groups owning /dev/kfd and /dev/dri/renderD*, whatever the image's /etc/group says.
# A node numbering them differently needs --supplemental-groups.
ROCM_DEVICE_GROUPS = (44, 109)


class UnsupportedDevice(K8sError):
    """The plan's device has no GPU resource to request in a pod."""


@dataclass(frozen=True)
class PodDeviceProfile:
    """One vendor's GPU settings for a pod.

    resource: the extended resource its device plugin advertises (requested as a limit).
    runtime_class: the RuntimeClass the pod runs under (None: the node's default runtime).
    supplemental_groups: numeric groups the container process joins (the device files' owners).
    seccomp_unconfined, capabilities: what the vendor's runtime needs (ROCm's debugger and
        memory-mapping calls are refused by the default seccomp profile).
    """

    name: str
    resource: str
    runtime_class: str | None = None
    supplemental_groups: tuple[int, ...] = ()
    seccomp_unconfined: bool = False
    capabilities: tuple[str, ...] = ()


# The NVIDIA GPU Operator installs the `nvidia` RuntimeClass; a cluster whose default runtime is
# already NVIDIA's (GKE, some managed clusters) can drop it with --runtime-class "".
CUDA = PodDeviceProfile(name="cuda", resource="nvidia.com/gpu", runtime_class="nvidia")
ROCM = PodDeviceProfile(name="rocm", resource="amd.com/gpu", supplemental_groups=ROCM_DEVICE_GROUPS,
                        seccomp_unconfined=True, capabilities=("SYS_PTRACE",))

PROFILES: Mapping[str, PodDeviceProfile] = {p.name: p for p in (CUDA, ROCM)}


def pod_profile(device: str | None) -> PodDeviceProfile:
    """The profile of the plan's device; a device without a GPU resource (cpu, none) is refused."""
    if device not in PROFILES:
        raise UnsupportedDevice(
            f"deploy --k8s serves the model on GPUs; the plan's device is {device or 'none'!r}, which has no GPU "
            "resource to request in a pod",
            hint=f"supported devices: {', '.join(PROFILES)} (pick one with _cuda or _rocm in the query)")
    return PROFILES[device]
