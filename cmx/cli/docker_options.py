"""The options `cmx run --docker` and `cmx docker` share, as click options and as the API's DockerOptions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from cmx.api import DockerOptions


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
    """The build and container options (--rebuild, --keep and docker_options' own) given without --docker."""
    if any(given):
        raise click.UsageError("--rebuild, --keep, --base-image, --gpus, --ca-bundle, --wheelhouse and --cmx-wheel "
                               "go with --docker")


def docker_options_of(*, base_image: str | None, gpus: str | None, ca_bundle: Path | None,
                      wheelhouse: Path | None, cmx_wheel: Path | None = None, rebuild: bool = False,
                      keep: bool = False) -> DockerOptions:
    """The options as the API takes them (`--gpus 0,1` as ids)."""
    from cmx.api import DockerOptions  # here: the Docker layer loads only for the verbs that use it

    ids = tuple(g.strip() for g in gpus.split(",") if g.strip()) if gpus else None
    return DockerOptions(base_image=base_image, gpus=ids, ca_bundle=ca_bundle, wheelhouse=wheelhouse,
                         cmx_wheel=cmx_wheel, rebuild=rebuild, keep=keep)
