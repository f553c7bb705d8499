"""The Docker engine through the Docker SDK: connect (or say how to start it), find, build and run images.

Build and run output is streamed line by line to a callback, so a long build shows progress;
a failed build names the instruction that failed and its last lines of output.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.tools.container_images import TAIL_LINES, ContainerEngineError, ImageInfo, build_failure
from cmx.tools.procs import KILL_WAIT_S, STOP_GRACE_S

if TYPE_CHECKING:  # the SDK is imported when an engine is needed
    from docker import DockerClient

_DOCKER_CHATTER = re.compile(r"^\s*(---> |Removing intermediate container)")
_STATUS = re.compile(r"returned a non-zero code: (\d+)")
Emit = Callable[[str], None]


DockerEngineError = ContainerEngineError  # one error for both engines (cmx.tools.container_images)


def connect(podman_hint: str = "") -> DockerClient:
    """A docker.DockerClient talking to a running engine, or an error that says how to start one (and, with
    `podman_hint`, that podman is here and needs no daemon)."""
    import docker
    from docker.errors import DockerException

    try:
        client = docker.from_env()
        client.ping()
        return client
    except DockerException as exc:
        raise DockerEngineError(f"cannot reach the Docker engine ({_short(exc)})",
                                hint="start it (`sudo systemctl start docker`, or `sudo dockerd &`), check it with "
                                     "`docker info`, and make sure this user may use it (the docker group) or "
                                     "DOCKER_HOST points at it" + (f"; {podman_hint}" if podman_hint else "")) from None


def image(client: DockerClient, ref: str) -> ImageInfo | None:
    """The local image `ref` (a tag or id), or None."""
    from docker.errors import ImageNotFound

    try:
        found = client.images.get(ref)
    except ImageNotFound:
        return None
    assert found.id is not None  # the SDK's Model.id is optional; an image the engine returned has one
    digests = found.attrs.get("RepoDigests") or []
    return ImageInfo(found.id, digests[0] if digests else found.id)


def require_base_image(client: DockerClient, ref: str, emit: Emit) -> ImageInfo:
    """The base image, pulled when it is not local; an error naming it and the ways to get it otherwise."""
    from docker.errors import APIError

    found = image(client, ref)
    if found is not None:
        return found
    emit(f"pulling {ref}")
    try:
        client.images.pull(ref)
    except APIError as exc:
        raise DockerEngineError(f"the base image {ref} is not on this machine and could not be pulled "
                                f"({_short(exc)})",
                                hint="pull it where a registry is reachable and `docker load` it here, or give "
                                     "another with --base-image (a local image works: `docker images`)") from None
    found = image(client, ref)
    assert found is not None
    return found


def build(client: DockerClient, context: Path, tag: str, *, buildargs: Mapping[str, str], emit: Emit,
          keep_hint: str = "", nocache: bool = False) -> str:
    """Build the image in `context`, streaming its output to `emit`; its id, or an error with the failed instruction."""
    step = ""
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    for chunk in client.api.build(path=str(context), tag=tag, rm=True, forcerm=True, pull=False, decode=True,
                                  buildargs=dict(buildargs), nocache=nocache):
        for line in str(chunk.get("stream", "")).splitlines():
            if line.startswith("Step "):
                step = line
                tail.clear()
            elif line.strip() and not _DOCKER_CHATTER.match(line):
                tail.append(line)
            if line.strip():
                emit(line)
        if "error" in chunk:
            detail = str(chunk.get("errorDetail", {}).get("message") or chunk["error"]).strip()
            status = _STATUS.search(detail)
            raise build_failure(step, f"it exited with status {status.group(1)}" if status else detail, tail,
                                keep_hint)
    built = image(client, tag)
    if built is None:
        raise DockerEngineError(f"the build of {tag} ended without an image")
    return built.id


def run(client: DockerClient, *, image_ref: str, command: list[str], settings: Mapping[str, Any], emit: Emit,
        keep: bool = False) -> int:
    """Run a container to its end, streaming its output; its exit status. Removed afterwards unless `keep`."""
    from docker.errors import APIError

    try:
        container = client.containers.run(image_ref, command, detach=True, **settings)
    except APIError as exc:
        raise DockerEngineError(f"the container did not start ({_short(exc)})",
                                hint="the settings it got: `cmx docker QUERY --print-run`") from None
    try:
        for raw in container.logs(stream=True, follow=True):
            for line in raw.decode("utf-8", errors="replace").splitlines():
                emit(line)
        return int(container.wait().get("StatusCode", 1))
    except BaseException:  # Ctrl-C or SIGTERM (cmx.cli.app.Interrupts), or a lost engine: the run inside ends
        _stop(container, emit)
        raise
    finally:
        if keep:
            emit(f"container {container.name} kept (docker rm {container.name} removes it)")
        else:
            container.remove(force=True)


def _stop(container: Any, emit: Emit) -> None:
    """SIGTERM to the cmx inside (PID 1, which handles it as Ctrl-C: it stops its children and records
    "interrupted" in the run record on the mounted runs folder), SIGKILL from Docker when it takes longer
    than its own grace and the kill after it. Kept or not, the container is stopped."""
    from docker.errors import DockerException

    emit(f"stopping container {container.name}")
    try:
        container.stop(timeout=int(STOP_GRACE_S + KILL_WAIT_S))
    except DockerException as exc:  # already gone, or the engine is: removing it (force) is all that is left
        emit(f"could not stop container {container.name}: {_short(exc)}")


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "explanation", None) or exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def save(client: DockerClient, ref: str, path: Path) -> None:
    """`docker save`: the image `ref`, with its tags, as an archive at `path` (`docker load` and `podman load` read
    it)."""
    from docker.errors import DockerException

    try:
        found = client.images.get(ref)
        with open(path, "wb") as out:
            for chunk in found.save(named=True):
                out.write(chunk)
    except DockerException as exc:
        raise DockerEngineError(f"could not save image {ref} to {path} ({_short(exc)})",
                                hint="`docker images` lists what this engine has") from None


def load(client: DockerClient, path: Path) -> list[str]:
    """`docker load`: the images in the archive at `path` (`docker save`'s or `podman save`'s); their IDs."""
    from docker.errors import DockerException

    try:
        with open(path, "rb") as archive:
            return [str(image.id) for image in client.images.load(archive)]
    except (DockerException, OSError) as exc:
        raise DockerEngineError(f"could not load images from {path} ({_short(exc)})",
                                hint="give an archive `docker save` or `podman save --format docker-archive` "
                                     "wrote") from None
