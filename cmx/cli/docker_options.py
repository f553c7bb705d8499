"""The options `cmx run --docker` (`--container ENGINE`) and `cmx docker` share, as click options and as the API's
DockerOptions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from cmx.api import DockerOptions


ENGINES = ("docker", "podman", "auto")


def container_option(fn: Callable) -> Callable:
    """`--container ENGINE`: run in a container of that engine; alone (or `auto`), the engine CMX_CONTAINER or the
    home's settings.yaml names, else Docker where it is reachable, else podman."""
    return click.option("--container", "container", type=click.Choice(ENGINES), is_flag=False, flag_value="auto",
                        default=None, metavar="[docker|podman]",
                        help="Run in a container of this engine (podman: rootful or rootless, no daemon). Alone: "
                             "CMX_CONTAINER's, the cmx home's settings.yaml `container:`, else Docker if it is "
                             "reachable, else podman. --docker is --container docker.")(fn)


def container_of(in_docker: bool, container: str | None) -> str | None:
    """The engine asked for (None: no container; "auto": cmx chooses), from --docker and --container."""
    if in_docker and container not in (None, "docker"):
        raise click.UsageError(f"--docker is --container docker: it does not go with --container {container}")
    return "docker" if in_docker else container


def docker_options(fn: Callable) -> Callable:
    options = [
        click.option("--base-image", metavar="IMAGE", help="Build on IMAGE instead of the device profile's pinned "
                                                            "base (cuda: a CUDA vLLM image, rocm: a ROCm vLLM image, "
                                                            "cpu: slim Debian)."),
        click.option("--gpus", metavar="IDS", help="Comma-separated GPU ids the container gets (default: all)."),
        click.option("--ca-bundle", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
                     help="An extra CA bundle for the build (a proxy re-signing TLS); default: the one pip or "
                          "requests is configured with, if any."),
        click.option("--wheelhouse", type=click.Path(path_type=Path, file_okay=False), metavar="DIR",
                     help="Wheels pip may install from in the image (air-gapped clusters, a CPU build of torch); "
                          "default for the cpu profile: the local find-links folder pip is configured with."),
        click.option("--cmx-wheel", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
                     help="The wheel of this cmx (same version) to install in the image; default: a wheel built "
                          "from the checkout cmx runs from, else the wheel pip installed it from, else the "
                          "package index."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def refuse_without_docker(*given: object) -> None:
    """The build and container options (--rebuild, --keep and docker_options' own) given without a container."""
    if any(given):
        raise click.UsageError("--rebuild, --keep, --base-image, --gpus, --ca-bundle, --wheelhouse and --cmx-wheel "
                               "go with --docker or --container")


def docker_options_of(*, base_image: str | None, gpus: str | None, ca_bundle: Path | None,
                      wheelhouse: Path | None, cmx_wheel: Path | None = None, rebuild: bool = False,
                      keep: bool = False, container: str | None = None) -> DockerOptions:
    """The options as the API takes them (`--gpus 0,1` as ids; `--container auto` as no engine named)."""
    from cmx.api import DockerOptions  # here: the Docker layer loads only for the verbs that use it

    ids = tuple(g.strip() for g in gpus.split(",") if g.strip()) if gpus else None
    return DockerOptions(container=None if container in (None, "auto") else container, base_image=base_image,
                         gpus=ids, ca_bundle=ca_bundle, wheelhouse=wheelhouse, cmx_wheel=cmx_wheel, rebuild=rebuild,
                         keep=keep)
