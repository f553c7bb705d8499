"""What a serving pod needs for its GPUs: one pod profile per device kind that has a GPU resource (cuda, rocm).

The Kubernetes counterpart of cmx.docker's container profiles, built from the kinds' pod facts
(cmx.devices): the extended resource the device plugin advertises, the runtime class, and the
security settings and groups a vendor's stack needs inside a pod. A profile holds only its own
kind's fields: the ROCm profile has no `nvidia.com/gpu` and no NVIDIA runtime class, the CUDA profile
no `amd.com/gpu` and no /dev/kfd groups. A kind without a pod section (the CPU) has no profile, and
`deploy --k8s` refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cmx.devices import KINDS, DeviceKind
from cmx.k8s import K8sError


class UnsupportedDevice(K8sError):
    """The plan's device has no GPU resource to request in a pod."""


@dataclass(frozen=True)
class PodDeviceProfile:
    """One kind's GPU settings for a pod (cmx.devices.base.Pod says what each field means); the CLI's
    --runtime-class and --supplemental-groups replace those two fields."""

    name: str
    resource: str
    runtime_class: str | None = None
    supplemental_groups: tuple[int, ...] = ()
    seccomp_unconfined: bool = False
    capabilities: tuple[str, ...] = ()


def _profile(kind: DeviceKind) -> PodDeviceProfile | None:
    pod = kind.pod
    if pod is None:
        return None
    return PodDeviceProfile(name=kind.name, resource=pod.resource, runtime_class=pod.runtime_class,
                            supplemental_groups=pod.supplemental_groups, seccomp_unconfined=pod.seccomp_unconfined,
                            capabilities=pod.capabilities)


PROFILES: Mapping[str, PodDeviceProfile] = {p.name: p for p in map(_profile, KINDS.values()) if p is not None}
CUDA = PROFILES["cuda"]
ROCM = PROFILES["rocm"]
# the ids a ROCm pod joins unless --supplemental-groups says otherwise (cmx/devices/rocm.py says why)
ROCM_DEVICE_GROUPS = ROCM.supplemental_groups


def pod_profile(device: str | None) -> PodDeviceProfile:
    """The profile of the plan's device; a device without a GPU resource (cpu, none) is refused."""
    if device is None or device not in PROFILES:
        raise UnsupportedDevice(
            f"deploy --k8s serves the model on GPUs; the plan's device is {device or 'none'!r}, which has no GPU "
            "resource to request in a pod",
            hint=f"supported devices: {', '.join(PROFILES)} (pick one with "
                 f"{' or '.join('_' + name for name in PROFILES)} in the query)")
    return PROFILES[device]
