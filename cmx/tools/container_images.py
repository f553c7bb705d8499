"""What both container engines (cmx.tools.docker, cmx.tools.podman) answer and raise: an image's identity, their one
error, and the message of a failed build."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cmx.errors import CmxError

TAIL_LINES = 15  # the last lines of a failed build's step that its error quotes


class ContainerEngineError(CmxError):
    """A container engine is missing or not reachable, or an image is missing, fails to build, or a container fails
    to start."""


@dataclass(frozen=True)
class ImageInfo:
    id: str              # sha256:<hex>, the image's content digest (its config's): the same in Docker and podman
    digest: str          # the registry digest (repo@sha256:...) when the image came from a registry, else its id


def build_failure(step: str, why: str, tail: Iterable[str], hint: str) -> ContainerEngineError:
    """A failed build, said the same way for both engines: the instruction, why, and its last lines of output."""
    return ContainerEngineError(f"the image build failed at {step or 'its start'}: {why}\n"
                                + "\n".join(f"  | {line}" for line in tail),
                                hint=hint or "fix the cause the output names and run again")
