"""`cmx docker QUERY`: the Dockerfile, build context and container settings `cmx run --docker` would use."""

from __future__ import annotations

from typing import Any

import click

from cmx.cli.common import app, echo_json, parse_query, query_arg, query_options, registry_option
from cmx.cli.docker_options import docker_options, docker_options_of


@click.command("docker", help="""Show what `cmx run QUERY --docker` would build and run, without Docker.

--dockerfile-only prints the rendered Dockerfile, then the build context (one
`size  name` line per file) and the image tag, a hash of both: the same plan
renders the same file and reuses the same image. --print-run prints the
container settings as JSON (image, command, user, environment with secrets
hidden, mounts, devices, device requests, groups, shm size, ipc, ulimits).

\b
    cmx docker "app mlperf inference llama2 _rocm" --dockerfile-only
    cmx docker "app mlperf inference llama2 _cuda" --print-run --gpus 0,1
""")
@query_arg
@query_options(input_help="As for cmx run.", context_help="As for cmx run.")
@click.option("--dockerfile-only", is_flag=True, help="Print the Dockerfile and the build context listing.")
@click.option("--print-run", is_flag=True, help="Print the container settings as JSON.")
@docker_options
@registry_option
@click.pass_context
# options: click's values, of the types the option decorators give
def command(ctx: click.Context, query: tuple[str, ...], inputs: tuple[str, ...], inputs_file: str | None,
            contexts: tuple[str, ...], dockerfile_only: bool, print_run: bool, **options: Any) -> None:
    from cmx import api

    if dockerfile_only == print_run:
        raise click.UsageError("give one of --dockerfile-only and --print-run")
    q = parse_query(query, inputs, contexts, inputs_file)
    options_, settings = docker_options_of(**options), app(ctx).settings()
    if dockerfile_only:
        rendered = api.docker_file(q.query, inputs=q.inputs, context=q.context, options=options_, settings=settings)
        click.echo(rendered.dockerfile, nl=False)
        click.echo(f"\n# build context of {rendered.tag} ({len(rendered.files)} files):")
        for line in rendered.listing():
            click.echo(f"# {line}")
        return
    echo_json(api.docker_container(q.query, inputs=q.inputs, context=q.context, options=options_,
                                    settings=settings).to_json())
