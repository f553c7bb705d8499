"""Dockerised runs: a container profile per device kind, a Dockerfile from the plan, the image built and run."""

from __future__ import annotations

from collections.abc import Mapping

from cmx.devices import KINDS
from cmx.docker.profiles import ContainerProfile
from cmx.errors import CmxError

PROFILES: Mapping[str, ContainerProfile] = {name: ContainerProfile(kind) for name, kind in KINDS.items()}


class DockerError(CmxError):
    """Docker is not usable, or an image could not be built or run."""


def profile_for(device: str | None) -> ContainerProfile:
    """The profile of the plan's device; a plan that names none runs on the CPU profile."""
    name = device or "cpu"
    if name not in PROFILES:
        raise DockerError(f"no container profile for device {name!r}", hint=f"profiles: {', '.join(PROFILES)}")
    return PROFILES[name]
