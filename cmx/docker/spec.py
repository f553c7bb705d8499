"""The container a run starts, the same for every engine: image, command, user, environment, mounts and devices.

Each engine (cmx.docker.engines) writes it as its own settings: the Docker SDK's keyword arguments, podman's
command line.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from cmx.docker.profiles import DeviceSettings
from cmx.secrets import mask_urls


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool = False


@dataclass(frozen=True)
class ContainerSpec:
    """Everything a container is started with: image, command, user, environment, mounts and the device settings
    (an engine takes the device settings that are its own: Docker the device requests, podman the CDI devices)."""

    image: str
    command: tuple[str, ...]
    user: str | None
    environment: tuple[tuple[str, str], ...]
    secret_names: tuple[str, ...]       # variables in `environment` whose values are secrets
    mounts: tuple[Mount, ...]
    device: DeviceSettings
    working_dir: str
    # the host's name: a step keyed by a machine fingerprint (detect-system) keys the same in every container
    # (Docker would name each one anew) and so stays cached, and a locked replay finds the locked key
    hostname: str = ""
    cmx_install: str = ""   # the image's line that installs cmx (cmx.docker.cmx_source), for `--print-run`

    def to_json(self) -> dict[str, Any]:
        """The settings as `cmx docker --print-run` shows them, secrets replaced by ********."""
        d = self.device
        return {
            "image": self.image, "cmx_install": self.cmx_install, "command": [mask_urls(a) for a in self.command],
            "user": self.user,
            "environment": {k: "********" if k in self.secret_names else mask_urls(v) for k, v in self.environment},
            "mounts": [asdict(m) for m in self.mounts], "working_dir": self.working_dir, "hostname": self.hostname,
            "devices": list(d.devices), "device_requests": [asdict(r) for r in d.device_requests],
            "cdi_devices": list(d.cdi_devices),
            "group_add": list(d.group_add), "security_opt": list(d.security_opt), "cap_add": list(d.cap_add),
            "ipc_mode": d.ipc_mode, "shm_size": d.shm_size,
            "ulimits": [{"name": n, "soft": s, "hard": h} for n, s, h in d.ulimits],
        }
