"""podman, through its command line (cmx.tools.podman says why not its API socket): a spec as `podman run` flags,
rootful or rootless.

What differs from Docker, and why:
- GPUs of a kind with a CDI kind (NVIDIA) go as CDI devices (`--device nvidia.com/gpu=all`, or one per chosen GPU),
  from the spec NVIDIA's container toolkit generates; podman has no Docker device requests. Device files (AMD's
  /dev/kfd and /dev/dri) go as they are.
- Rootless (podman started by a user other than root), the user's own UID and GID are mapped to themselves in
  the container (`--userns=keep-id`), so what the run writes to the mounted cache, run records and results is the
  user's afterwards, as with Docker's `--user`. The device files' groups cannot be named by number there (the
  host's groups are not mapped): the user's own supplementary groups are kept instead (`--group-add keep-groups`,
  which needs the crun runtime), and a user who may use the GPUs on the host may use them inside. Resource limits
  cannot be raised above the user's own hard limits: a kind's limits are lowered to them, and the run says so.
- SELinux: the container runs without SELinux separation (`--security-opt label=disable`, which NVIDIA's CDI
  instructions give for podman too) rather than relabelling the user's folders it mounts (`:z` would relabel the
  cache and every folder a path input names, a home folder included); without SELinux the option does nothing.
- Shared memory: with the host's IPC namespace (`--ipc host`) the container uses the host's /dev/shm, and podman
  refuses a size for it, so none is given.
"""

from __future__ import annotations

import resource
import secrets
from collections.abc import Mapping
from pathlib import Path

from cmx.docker import DockerError
from cmx.docker.engines.base import Emit, EngineKind, RunLine, env_flags, hidden_values
from cmx.docker.spec import ContainerSpec
from cmx.tools.container_images import ImageInfo

_LIMITS = {"memlock": resource.RLIMIT_MEMLOCK, "stack": resource.RLIMIT_STACK, "nofile": resource.RLIMIT_NOFILE,
           "nproc": resource.RLIMIT_NPROC, "core": resource.RLIMIT_CORE}


class PodmanEngine:
    """The podman command, rootful or rootless as the user running cmx is root or not."""

    name = "podman"

    def image(self, ref: str) -> ImageInfo | None:
        from cmx.tools import podman

        return podman.image(ref)

    def require_base_image(self, ref: str, emit: Emit) -> ImageInfo:
        from cmx.tools import podman

        found = podman.image(ref)
        if found is None:
            emit(f"pulling {ref}")
            podman.pull(ref, emit)
            found = podman.image(ref)
        assert found is not None, f"podman pulled {ref} but does not list it"
        return found

    def build(self, context: Path, tag: str, *, buildargs: Mapping[str, str], emit: Emit, keep_hint: str,
              nocache: bool) -> str:
        from cmx.tools import podman

        return podman.build(context, tag, buildargs=buildargs, emit=emit, keep_hint=keep_hint, nocache=nocache)

    def run(self, spec: ContainerSpec, image_ref: str, emit: Emit, *, keep: bool = False) -> int:
        import os

        from cmx.tools import podman

        name = container_name()
        line = run_line(spec, image_ref, name=name)
        for note in notes(spec):
            emit(note)
        # podman's own environment, plus the values its bare --env flags take from it
        return podman.run(line.argv, name=name, env={**os.environ, **line.environment}, emit=emit, keep=keep)

    def save(self, ref: str, path: Path) -> None:
        from cmx.tools import podman

        podman.save(ref, path)

    def load(self, path: Path) -> list[str]:
        from cmx.tools import podman

        return podman.load(path)


def connect() -> PodmanEngine:
    from cmx.tools import podman

    podman.program()  # installed, or an error that says how to install it
    return PodmanEngine()


def present() -> bool:
    from cmx.tools import podman

    return podman.present()


def container_name() -> str:
    """A new container's name, by which a Ctrl-C stops it and the end removes it."""
    return f"cmx-{secrets.token_hex(6)}"


def run_line(spec: ContainerSpec, image_ref: str, *, name: str | None = None, rootless: bool | None = None,
             hard_limits: Mapping[str, int] | None = None) -> RunLine:
    """The `podman run` command of `spec` in `image_ref` (an ID runs as its hex digits), as cmx runs it: rootless
    when `rootless` (default: when this user is not root), with `hard_limits` (default: this process's)."""
    from cmx.tools import podman

    rootless = podman.rootless() if rootless is None else rootless
    argv = ["podman", "run", "--name", name or container_name(), "--pull=never", "--workdir", spec.working_dir,
            "--security-opt", "label=disable"]
    if spec.hostname:
        argv += ["--hostname", spec.hostname]
    if spec.user:
        argv += ["--user", spec.user]
        if rootless:
            argv += ["--userns=keep-id"]
    argv += env_flags(spec)
    for m in spec.mounts:
        if "," in m.source or "," in m.target:
            raise DockerError(f"podman cannot mount {m.source}: its --mount flag separates fields with commas",
                              hint="give the path input a folder whose path has no comma")
        argv += ["--mount", f"type=bind,source={m.source},destination={m.target}" + (",ro=true" if m.read_only
                                                                                     else "")]
    d = spec.device
    argv += [flag for dev in (*d.cdi_devices, *d.devices) for flag in ("--device", dev)]
    groups = ("keep-groups",) if rootless and d.group_add else d.group_add
    argv += [flag for group in groups for flag in ("--group-add", group)]
    argv += [flag for opt in d.security_opt for flag in ("--security-opt", opt)]
    argv += [flag for cap in d.cap_add for flag in ("--cap-add", cap)]
    if d.ipc_mode:
        argv += ["--ipc", d.ipc_mode]
    if d.shm_size and d.ipc_mode != "host":
        argv += ["--shm-size", d.shm_size]
    limits = user_limits(d.ulimits, hard_limits) if rootless else d.ulimits
    argv += [flag for n, soft, hard in limits for flag in ("--ulimit", f"{n}={soft}:{hard}")]
    return RunLine((*argv, image_ref.removeprefix("sha256:"), *spec.command), hidden_values(spec))


def notes(spec: ContainerSpec, *, rootless: bool | None = None, hard_limits: Mapping[str, int] | None = None,
          runtime: str | None = None) -> list[str]:
    """What a rootless run changes of the kind's settings, said before it runs; `runtime`: podman's OCI runtime
    (default: the one `podman info` names)."""
    from cmx.tools import podman

    if not (podman.rootless() if rootless is None else rootless):
        return []
    out = []
    if spec.device.group_add:
        out.append("rootless podman: the container keeps this user's groups (--group-add keep-groups) for the GPU "
                   "device files, instead of the groups that own them")
        used = podman.runtime() if runtime is None else runtime
        if used != "crun":
            out.append(f"rootless podman keeps a user's groups only with the crun runtime, and this podman runs "
                       f"{used or 'an unknown runtime'}: install crun (`sudo apt-get install crun`, `sudo dnf install "
                       "crun`), which podman then prefers, or the GPUs' device files will refuse the container")
    lowered = [f"{n} {soft}:{hard} -> {s2}:{h2}" for (n, soft, hard), (_, s2, h2)
               in zip(spec.device.ulimits, user_limits(spec.device.ulimits, hard_limits), strict=True)
               if (soft, hard) != (s2, h2)]
    if lowered:
        out.append("rootless podman cannot raise a limit above this user's hard limit: " + ", ".join(lowered)
                   + " (raise the user's limits in /etc/security/limits.conf to keep the kind's)")
    return out


def user_limits(ulimits: tuple[tuple[str, int, int], ...],
                hard_limits: Mapping[str, int] | None = None) -> tuple[tuple[str, int, int], ...]:
    """The limits lowered to this user's hard limits (-1: unlimited)."""
    out = []
    for name, soft, hard in ulimits:
        cap = hard_limits.get(name) if hard_limits is not None else _hard_limit(name)
        if cap is None or cap == -1:
            out.append((name, soft, hard))
            continue
        hard = cap if hard == -1 else min(hard, cap)
        out.append((name, hard if soft == -1 else min(soft, hard), hard))
    return tuple(out)


def _hard_limit(name: str) -> int | None:
    which = _LIMITS.get(name)
    if which is None:
        return None
    hard = resource.getrlimit(which)[1]
    return -1 if hard == resource.RLIM_INFINITY else hard


PODMAN = EngineKind(name="podman", present=present, connect=connect, run_line=run_line, notes=notes)
