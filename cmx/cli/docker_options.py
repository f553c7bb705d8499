"""The options `cmx run --docker` and `cmx docker` share, and the DockerRun they make."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import click


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
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def docker_run(query: str, inputs: dict[str, str], context: dict[str, Any], *, base_image: str | None,
               gpus: str | None, ca_bundle: Path | None, wheelhouse: Path | None, rebuild: bool = False,
               keep: bool = False, jobs: int | None = None, install_missing: bool = False,
               host_command: tuple[str, ...] = (), device: str | None = None) -> Any:
    """The DockerRun of the options; `device` is the plan's: only a CPU image installs torch, so only it
    takes pip's configured wheel folder by default."""
    from cmx.docker.launch import DockerRun, default_ca_bundle, default_wheelhouse
    from cmx.docker.render import BuildOptions, host_user

    build = BuildOptions(base_image=base_image, ca_bundle=ca_bundle or default_ca_bundle(),
                         wheelhouse=wheelhouse or (default_wheelhouse() if device in (None, "cpu") else None),
                         user=host_user())
    ids = tuple(g.strip() for g in gpus.split(",") if g.strip()) if gpus else None
    return DockerRun(query=query, inputs=inputs, context=context, build=build, gpus=ids, rebuild=rebuild,
                     keep=keep, jobs=jobs, install_missing=install_missing, host_command=host_command)
