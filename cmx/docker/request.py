"""The Docker verbs: `cmx docker` (the Dockerfile, the container settings) and `cmx run --docker`, from a query and
the user's build options to the DockerRun the launcher takes."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.docker.launch import DockerRun, Emit
from cmx.docker.render import Rendered
from cmx.docker.spec import ContainerSpec
from cmx.execute.request import Runtime, resolved
from cmx.resolve.plan import Plan
from cmx.settings import Settings

if TYPE_CHECKING:
    from cmx.mlperf.tune.target import TuneRequest


@dataclass(frozen=True)
class DockerOptions:
    """How `run --docker` and `docker` build and start the container."""

    container: str | None = None         # the engine (cmx.docker.engines): None chooses one (CMX_CONTAINER, ...)
    base_image: str | None = None        # instead of the device profile's pinned base
    gpus: tuple[str, ...] | None = None  # the GPU ids the container gets (None: all)
    ca_bundle: Path | None = None        # an extra CA bundle for the build (default: pip's or requests', if set)
    wheelhouse: Path | None = None       # wheels pip may install from in the image
    cmx_wheel: Path | None = None        # the running cmx's wheel, to install in the image (cmx.docker.cmx_source)
    rebuild: bool = False                # build without the engine's layer cache
    keep: bool = False                   # keep the build context


@dataclass(frozen=True)
class DockerQuery:
    """A query as the Docker verbs take it; `jobs`, `install_missing` and `argv` (the host command line,
    recorded with its secrets hidden) matter only to a run."""

    query: str
    inputs: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    options: DockerOptions = DockerOptions()
    jobs: int | None = None
    install_missing: bool = False
    argv: Sequence[str] | None = None
    tune: TuneRequest | None = None      # `cmx tune --docker`: the container tunes the query as asked


def docker_run(plan: Plan, asked: DockerQuery) -> DockerRun:
    """What the container is asked to do. Only a CPU image installs torch, so only it takes pip's configured
    wheel folder by default."""
    from cmx.docker.engines import choose
    from cmx.docker.launch import default_ca_bundle, default_wheelhouse
    from cmx.docker.render import BuildOptions, host_user, plan_device
    from cmx.execute.record import redact_argv

    device = plan_device(plan)
    options = asked.options
    build = BuildOptions(base_image=options.base_image, ca_bundle=options.ca_bundle or default_ca_bundle(),
                         wheelhouse=options.wheelhouse or (default_wheelhouse() if device in (None, "cpu") else None),
                         user=host_user(), cmx_wheel=options.cmx_wheel)
    host_command = tuple(redact_argv(list(asked.argv), plan)) if asked.argv else ()
    engine = choose(options.container)
    tune = asked.tune
    if tune is not None and tune.out is not None:
        tune = replace(tune, out=Path(os.path.abspath(tune.out)))  # the container's folder is /
    return DockerRun(query=asked.query, inputs=dict(asked.inputs), context=dict(asked.context), build=build,
                     engine=engine.kind.name, engine_note=engine.note, gpus=options.gpus, rebuild=options.rebuild,
                     keep=options.keep, jobs=asked.jobs,
                     install_missing=asked.install_missing, host_command=host_command,
                     tune=tune.options() if tune else (), tune_out=tune.out if tune else None)


def _plan(asked: DockerQuery, settings: Settings) -> Plan:
    return resolved(asked.query, asked.inputs, asked.context, Runtime(settings))


def dockerfile(asked: DockerQuery, settings: Settings) -> Rendered:
    """The Dockerfile and build context `run --docker` would use (`.dockerfile`, `.listing()`, `.tag`)."""
    from cmx.docker.render import render

    p = _plan(asked, settings)
    return render(p, docker_run(p, asked).build, settings)


def container(asked: DockerQuery, settings: Settings) -> ContainerSpec:
    """The container `run --docker` would start: image, command, user, environment, mounts, devices."""
    return _container(asked, settings)[0]


def _container(asked: DockerQuery, settings: Settings) -> tuple[ContainerSpec, DockerRun]:
    from cmx.docker.launch import container_spec
    from cmx.docker.render import render

    p = _plan(asked, settings)
    request = docker_run(p, asked)
    rendered = render(p, request.build, settings)
    labels = {"engine": request.engine, "image": rendered.tag, "base_image": rendered.base_image,
              "cmx_source": rendered.cmx.describe()}
    spec = container_spec(p, request, settings, image=rendered.tag, labels=labels)
    return replace(spec, cmx_install=rendered.cmx_install), request


def print_run(asked: DockerQuery, settings: Settings) -> dict[str, Any]:
    """`cmx docker --print-run`: the engine, the exact command it runs (a new container's name in it; secret
    variables and URL passwords in variables named, never shown: they reach the engine through its environment; a
    URL password in an input shown as ***), what the engine changes of the kind's settings here (rootless podman),
    and the container's settings."""
    from cmx.docker.engines import engine_kind
    from cmx.secrets import mask_urls

    spec, request = _container(asked, settings)
    engine = engine_kind(request.engine)
    line = engine.run_line(spec, spec.image)
    notes = [request.engine_note] if request.engine_note else []
    argv = [mask_urls(a) for a in line.argv]  # an input's URL password: shown as *** here, as everywhere cmx prints
    return {"engine": engine.name, "run": argv, "shell": shlex.join(argv),
            "from_environment": sorted(line.environment),
            "notes": notes + engine.notes(spec), **spec.to_json()}


def run(asked: DockerQuery, settings: Settings, emit: Emit) -> int:
    """Build (or reuse) the plan's image and run the same query in it (or, with `asked.tune`, tune it there); the
    container's exit status. What the run or the tune would refuse is refused before the image is built."""
    from cmx.docker.launch import run_in_docker
    from cmx.execute.plan_check import check_plan

    p = _plan(asked, settings)
    request = docker_run(p, asked)
    if request.engine_note:
        emit(request.engine_note)
    if asked.tune is None:
        check_plan(p)
    else:  # the tune's code (numpy's user) loads only for a tune: a run needs none of it on the host
        from cmx.mlperf.tune.step import tune_target
        from cmx.recipe.query import query_of

        tune_target(p.root_step, query_of(asked.query).variations, dict(asked.context), asked.tune)
    return run_in_docker(p, request, settings, emit=emit)
