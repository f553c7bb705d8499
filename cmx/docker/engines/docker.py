"""Docker, through its SDK (cmx.tools.docker): a spec as docker-py's keyword arguments, and as the `docker run`
line that does the same (`cmx docker --print-run`).

The GPUs of a kind with a device request (NVIDIA's) go as that request (`--gpus`); the device files, groups and
the rest of the device settings as they are.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.docker.engines.base import Emit, EngineKind, RunLine, env_flags, hidden_values
from cmx.docker.spec import ContainerSpec
from cmx.tools.container_images import ImageInfo

if TYPE_CHECKING:
    from docker import DockerClient

SOCKET = Path("/var/run/docker.sock")


class DockerEngine:
    """A connected Docker engine."""

    name = "docker"

    def __init__(self, client: DockerClient) -> None:
        self.client = client

    def image(self, ref: str) -> ImageInfo | None:
        from cmx.tools import docker

        return docker.image(self.client, ref)

    def require_base_image(self, ref: str, emit: Emit) -> ImageInfo:
        from cmx.tools import docker

        return docker.require_base_image(self.client, ref, emit)

    def build(self, context: Path, tag: str, *, buildargs: Mapping[str, str], emit: Emit, keep_hint: str,
              nocache: bool) -> str:
        from cmx.tools import docker

        return docker.build(self.client, context, tag, buildargs=buildargs, emit=emit, keep_hint=keep_hint,
                            nocache=nocache)

    def run(self, spec: ContainerSpec, image_ref: str, emit: Emit, *, keep: bool = False) -> int:
        from cmx.tools import docker

        return docker.run(self.client, image_ref=image_ref, command=list(spec.command), settings=sdk_settings(spec),
                          emit=emit, keep=keep)

    def save(self, ref: str, path: Path) -> None:
        from cmx.tools import docker

        docker.save(self.client, ref, path)

    def load(self, path: Path) -> list[str]:
        from cmx.tools import docker

        return docker.load(self.client, path)


def connect() -> DockerEngine:
    from cmx.tools import docker, podman

    hint = "podman is installed and needs no daemon: `--container podman`" if podman.present() else ""
    return DockerEngine(docker.connect(podman_hint=hint))


def present() -> bool:
    """A Docker engine to talk to: DOCKER_HOST, or the daemon's socket (rootful, or this user's rootless one)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return bool(os.environ.get("DOCKER_HOST")) or SOCKET.exists() or bool(runtime and
                                                                         Path(runtime, "docker.sock").exists())


def sdk_settings(spec: ContainerSpec) -> dict[str, Any]:
    """Keyword arguments of docker-py's containers.run."""
    from docker.types import DeviceRequest, Ulimit
    from docker.types import Mount as SdkMount

    d = spec.device
    settings: dict[str, Any] = {
        "environment": dict(spec.environment), "working_dir": spec.working_dir,
        "mounts": [SdkMount(m.target, m.source, type="bind", read_only=m.read_only) for m in spec.mounts],
    }
    if spec.user:
        settings["user"] = spec.user
    optional = {"hostname": spec.hostname, "devices": list(d.devices), "group_add": list(d.group_add),
                "security_opt": list(d.security_opt),
                "cap_add": list(d.cap_add), "ipc_mode": d.ipc_mode, "shm_size": d.shm_size,
                "device_requests": [DeviceRequest(driver=r.driver, count=r.count, device_ids=list(r.device_ids),
                                                  capabilities=[list(c) for c in r.capabilities])
                                    for r in d.device_requests],
                "ulimits": [Ulimit(name=n, soft=s, hard=h) for n, s, h in d.ulimits]}
    settings.update({k: v for k, v in optional.items() if v})
    return settings


def run_line(spec: ContainerSpec, image_ref: str) -> RunLine:
    """The `docker run` command that starts what the SDK starts for `spec` (cmx itself talks to the engine's API)."""
    argv = ["docker", "run", "--rm", "--workdir", spec.working_dir]
    if spec.hostname:
        argv += ["--hostname", spec.hostname]
    if spec.user:
        argv += ["--user", spec.user]
    argv += env_flags(spec)
    for m in spec.mounts:
        argv += ["--mount", f"type=bind,source={m.source},target={m.target}" + (",readonly" if m.read_only else "")]
    d = spec.device
    for request in d.device_requests:
        # the CLI's --gpus writes the same request: "all", or the chosen ids (quoted: a comma separates fields)
        argv += ["--gpus", "all" if request.count == -1 else f'"device={",".join(request.device_ids)}"']
    argv += [flag for dev in d.devices for flag in ("--device", dev)]
    argv += [flag for group in d.group_add for flag in ("--group-add", group)]
    argv += [flag for opt in d.security_opt for flag in ("--security-opt", opt)]
    argv += [flag for cap in d.cap_add for flag in ("--cap-add", cap)]
    if d.ipc_mode:
        argv += ["--ipc", d.ipc_mode]
    if d.shm_size:
        argv += ["--shm-size", d.shm_size]
    argv += [flag for n, soft, hard in d.ulimits for flag in ("--ulimit", f"{n}={soft}:{hard}")]
    return RunLine((*argv, image_ref, *spec.command), hidden_values(spec))


DOCKER = EngineKind(name="docker", present=present, connect=connect, run_line=run_line,
                    notes=lambda spec: [])
