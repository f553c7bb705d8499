"""Container device profiles: what a device kind's image is built on and how its container gets at the devices.

One profile per device kind (cmx.devices), built from the kind's data: its pinned default base
image, the way cmx is installed into that base, and the container settings that give the process
its GPUs, for either engine (cmx.docker.engines writes them as each engine's flags). A kind's
settings are only its own (a ROCm container never gets an NVIDIA device request, a CUDA one never
/dev/kfd), since they come from its file alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cmx.devices import DeviceKind
from cmx.devices.base import InstallPlan


@dataclass(frozen=True)
class DeviceRequest:
    """A Docker device request (what `docker run --gpus` sends), with the driver of the kind that asks for it."""

    driver: str
    count: int = 0                      # -1: all
    device_ids: tuple[str, ...] = ()
    capabilities: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class DeviceSettings:
    """The device part of a container's settings."""

    devices: tuple[str, ...] = ()                       # host:container:rwm
    device_requests: tuple[DeviceRequest, ...] = ()     # Docker's way to the kind's GPUs
    cdi_devices: tuple[str, ...] = ()                   # podman's: CDI names (nvidia.com/gpu=all, =0 ...)
    group_add: tuple[str, ...] = ()
    security_opt: tuple[str, ...] = ()
    cap_add: tuple[str, ...] = ()
    ipc_mode: str | None = None
    shm_size: str | None = None
    ulimits: tuple[tuple[str, int, int], ...] = ()      # (name, soft, hard)
    environment: tuple[tuple[str, str], ...] = ()


def device_groups(kind: DeviceKind, dev: Path = Path("/dev")) -> tuple[str, ...]:
    """The groups that own the kind's device nodes, by the host's numeric ids (an image's own /etc/group may
    lack a group, or number it differently); by the kind's names where the host has no such nodes."""
    gids = set()
    for pattern in kind.container.group_nodes:
        for node in sorted(dev.glob(pattern)):
            try:
                gids.add(os.stat(node).st_gid)
            except OSError:
                continue
    return tuple(str(g) for g in sorted(gids)) if gids else kind.container.fallback_groups


class ContainerProfile:
    """One device kind's image and container settings."""

    def __init__(self, kind: DeviceKind) -> None:
        self.kind = kind
        self.name = kind.name
        self.default_base_image = kind.container.base_image

    def install(self) -> InstallPlan:
        """The packages and Python environment cmx is installed with in this profile's base image."""
        return self.kind.container.install

    def device_settings(self, gpus: tuple[str, ...] | None) -> DeviceSettings:
        """Container settings that expose the devices: all of them, or (`gpus`) the ones named. A kind with a
        device request (Docker) and a CDI kind (podman) chooses GPUs by id in them; one without, by its
        visibility variable inside."""
        c = self.kind.container
        requests: tuple[DeviceRequest, ...] = ()
        cdi = tuple(f"{c.cdi_kind}={g}" for g in (gpus or ("all",))) if c.cdi_kind else ()
        env: tuple[tuple[str, str], ...] = ()
        if c.request_driver:
            requests = (DeviceRequest(driver=c.request_driver, count=0, device_ids=gpus,
                                      capabilities=c.request_capabilities) if gpus else
                        DeviceRequest(driver=c.request_driver, count=-1, capabilities=c.request_capabilities),)
        elif gpus and self.kind.visibility.pin:
            env = ((self.kind.visibility.pin, ",".join(gpus)),)
        return DeviceSettings(
            devices=tuple(f"{n}:{n}:rwm" for n in c.device_nodes), device_requests=requests, cdi_devices=cdi,
            group_add=device_groups(self.kind) if c.group_nodes else (), security_opt=c.security_opt,
            cap_add=c.cap_add, ipc_mode=c.ipc_mode, shm_size=c.shm_size, ulimits=c.ulimits, environment=env)
