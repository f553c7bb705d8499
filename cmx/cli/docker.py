"""`cmx docker QUERY` (and its twin `cmx podman QUERY`): the Dockerfile, build context, container settings and run
command `cmx run --docker` (`--container podman`) would use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from cmx.cli.common import app, echo_json, parse_query, query_arg, query_options, registry_option
from cmx.cli.docker_options import ENGINES, docker_options, docker_options_of

HELP = """Show what `cmx run QUERY {run_flag}` would build and run, without building or
running anything.

--dockerfile-only prints the rendered Dockerfile, then the build context (one
`size  name` line per file) and the image tag, a hash of both: the same plan
renders the same file and reuses the same image, in either engine. --print-run
prints as JSON the engine, `run`: the exact command line that engine runs (for
Docker, the `docker run` that does what cmx asks its API for; secrets are named
by `--env NAME` and reach the engine through its environment, listed under
`from_environment`), `notes` on what the engine changes here (rootless podman),
and the container settings (image, command, user, environment with secrets
hidden, mounts, devices, device requests, CDI devices, groups, shm size, ipc,
ulimits). {engine_text}

\b
    cmx {name} "app mlperf inference llama2 _rocm" --dockerfile-only
    cmx {name} "app mlperf inference llama2 _cuda" --print-run --gpus 0,1
"""
CHOSEN = ("The engine: --container's, else CMX_CONTAINER's or the cmx home's\nsettings.yaml `container:`, else "
          "Docker where it is reachable, else podman.")


def verb(name: str, engine: str | None) -> click.Command:
    """The verb, for `engine` (None: the one --container or cmx chooses)."""
    text = HELP.format(name=name, run_flag="--container podman" if engine == "podman" else "--docker",
                       engine_text=f"`cmx {name}` is `cmx docker --container {engine}`." if engine else CHOSEN)
    decorators: list[Callable[[Any], Any]] = [
        click.command(name, help=text),
        query_arg,
        query_options(input_help="As for cmx run.", context_help="As for cmx run."),
        click.option("--dockerfile-only", is_flag=True, help="Print the Dockerfile and the build context listing."),
        click.option("--print-run", is_flag=True,
                     help="Print the engine's run command and the container settings as JSON."),
        click.option("--container", "container", type=click.Choice(ENGINES), default=engine, metavar="ENGINE",
                     show_default=bool(engine), help="The engine whose command --print-run shows (docker, podman; "
                                                    "default: the one `cmx run --container` would choose)."),
        docker_options,
        registry_option,
        click.pass_context,
    ]
    fn: Any = _show
    for decorate in reversed(decorators):
        fn = decorate(fn)
    return fn


# options: click's values, of the types the option decorators give
def _show(ctx: click.Context, query: tuple[str, ...], inputs: tuple[str, ...], inputs_file: str | None,
          input_envs: tuple[str, ...], contexts: tuple[str, ...], dockerfile_only: bool, print_run: bool,
          **options: Any) -> None:
    from cmx import api

    if dockerfile_only == print_run:
        raise click.UsageError("give one of --dockerfile-only and --print-run")
    q = parse_query(query, inputs, contexts, inputs_file, input_envs)
    options_, settings = docker_options_of(**options), app(ctx).settings()
    if dockerfile_only:
        rendered = api.docker_file(q.query, inputs=q.inputs, context=q.context, options=options_, settings=settings)
        click.echo(rendered.dockerfile, nl=False)
        click.echo(f"\n# build context of {rendered.tag} ({len(rendered.files)} files):")
        for line in rendered.listing():
            click.echo(f"# {line}")
        return
    echo_json(api.docker_print_run(q.query, inputs=q.inputs, context=q.context, options=options_, settings=settings))


command = verb("docker", None)
