"""What every container engine is (the protocol, its kind's entry in the registry) and the flags both write alike."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cmx.docker.spec import ContainerSpec
from cmx.secrets import mask_urls
from cmx.tools.container_images import ImageInfo

Emit = Callable[[str], None]


class ContainerEngine(Protocol):
    """A connected engine (a Docker client, the podman command)."""

    name: str

    def image(self, ref: str) -> ImageInfo | None:
        """The local image `ref` (a name or an ID), or None."""
        ...

    def require_base_image(self, ref: str, emit: Emit) -> ImageInfo:
        """The base image, pulled when it is not local; an error naming it and the ways to get it otherwise."""
        ...

    def build(self, context: Path, tag: str, *, buildargs: Mapping[str, str], emit: Emit, keep_hint: str,
              nocache: bool) -> str:
        """The image built from `context`, its output streamed; its ID, or an error naming the failed instruction."""
        ...

    def run(self, spec: ContainerSpec, image_ref: str, emit: Emit, *, keep: bool = False) -> int:
        """`spec` run in the image `image_ref` to its end, its output streamed; the exit status. Stopped on Ctrl-C,
        removed afterwards unless `keep`."""
        ...

    def save(self, ref: str, path: Path) -> None:
        """The image as an archive at `path` (Docker's format, which both engines load)."""
        ...

    def load(self, path: Path) -> list[str]:
        """The images of an archive, loaded; what the engine named them."""
        ...


@dataclass(frozen=True)
class RunLine:
    """The command line that runs a spec, and the variables it takes from its environment (the values of bare
    `--env NAME` flags: secrets, and values holding a URL's password, which no command line shows)."""

    argv: tuple[str, ...]
    environment: Mapping[str, str]


@dataclass(frozen=True)
class EngineKind:
    """One engine: how to find it, connect to it, and write a spec as its command line.

    present: whether it is installed (podman) or reachable without starting anything (Docker's socket).
    connect: the connected engine, or an error saying how to install or start it.
    run_line: the exact `docker run` / `podman run` command of a spec in an image.
    notes: what the engine changes of the kind's settings here, said before a run (rootless podman's limits).
    """

    name: str
    present: Callable[[], bool]
    connect: Callable[[], ContainerEngine]
    run_line: Callable[[ContainerSpec, str], RunLine]
    notes: Callable[[ContainerSpec], list[str]]


def env_flags(spec: ContainerSpec) -> list[str]:
    """`--env NAME=VALUE` for each variable, but `--env NAME` (its value from the engine's own environment) for a
    secret or a value holding a URL's password: no command line shows those (another user's `ps` would)."""
    hidden = hidden_values(spec)
    return [flag for name, value in spec.environment
            for flag in ("--env", name if name in hidden else f"{name}={value}")]


def hidden_values(spec: ContainerSpec) -> dict[str, str]:
    """The variables a command line names without their values."""
    return {name: value for name, value in spec.environment
            if name in spec.secret_names or mask_urls(value) != value}
