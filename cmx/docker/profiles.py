"""Container device profiles: what the image is built on and how a container gets at the device, one per target.

Each profile (cuda, rocm, cpu) answers the same small interface: its pinned default base image,
the Dockerfile lines that install cmx into that base, and the container settings that give the
process its GPUs. A profile sets only its own vendor's flags: a ROCm container never gets an
NVIDIA device request, and a CUDA one never /dev/kfd.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class DeviceRequest:
    """An NVIDIA device request (what `docker run --gpus` sends)."""

    driver: str = "nvidia"
    count: int = 0                      # -1: all
    device_ids: tuple[str, ...] = ()
    capabilities: tuple[tuple[str, ...], ...] = (("gpu",),)


@dataclass(frozen=True)
class DeviceSettings:
    """The device part of a container's settings."""

    devices: tuple[str, ...] = ()                       # host:container:rwm
    device_requests: tuple[DeviceRequest, ...] = ()
    group_add: tuple[str, ...] = ()
    security_opt: tuple[str, ...] = ()
    cap_add: tuple[str, ...] = ()
    ipc_mode: str | None = None
    shm_size: str | None = None
    ulimits: tuple[tuple[str, int, int], ...] = ()      # (name, soft, hard)
    environment: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class InstallPlan:
    """How cmx goes into the base image: system packages, the Python to use, the cmx extra to install."""

    apt: tuple[str, ...] = ()
    make_venv: bool = False             # a base without a Python environment of its own gets a venv
    python: str = "python3"
    extra: str = ""                     # the cmx extra ("cpu" brings vLLM's CPU build and LoadGen)
    remove_after: tuple[str, ...] = field(default_factory=tuple)  # distributions to uninstall afterwards


class ContainerProfile(Protocol):
    """One target device's image and container settings."""

    name: str
    default_base_image: str

    def install(self) -> InstallPlan:
        """The packages and Python environment cmx is installed with in this profile's base image."""
        ...

    def device_settings(self, gpus: tuple[str, ...] | None) -> DeviceSettings:
        """Container settings that expose the devices: all of them, or (`gpus`) the ones named."""
        ...
