"""`cmx plan QUERY`: resolve and show the DAG; runs nothing."""

from __future__ import annotations

import click

from cmx.cli.common import app, echo_json, parse_query, query_arg, query_options, registry_option


def print_plan(query: str, inputs: dict[str, str], context: dict[str, object], as_json: bool, verbose: bool,
               ctx: click.Context) -> None:
    from cmx import api
    from cmx.cli.render import plan_summary, plan_tree

    result = api.plan(query, inputs=inputs, context=context, settings=app(ctx).settings())
    if as_json:
        echo_json(result.to_json())
        return
    for line in plan_tree(result.plan, result.cached, show_inputs=verbose, notes=result.notes):
        click.echo(line)
    click.echo(plan_summary(result.plan, result.cached))


@click.command("plan", help="""Show what QUERY would run, without running anything.

Prints the dependency tree: for each step its recipe and variations, the start of its
cache key, and whether it is cached, to build, runs (not cached), or not needed (only
below cached steps); steps to build list the URLs they would fetch. Nothing is
downloaded, built or executed.

\b
    cmx plan "detect system"
    cmx plan "app mlperf inference llama2 _cpu _tiny" --input samples=8 -v
    cmx plan "get python-package" --input package=numpy --json
""")
@query_arg
@query_options()
@click.option("--verbose", "-v", is_flag=True, help="Also show each step's inputs and where they came from.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON for scripts.")
@registry_option
@click.pass_context
def command(ctx: click.Context, query: tuple[str, ...], inputs: tuple[str, ...], inputs_file: str | None,
            input_envs: tuple[str, ...], contexts: tuple[str, ...], verbose: bool, as_json: bool) -> None:
    q = parse_query(query, inputs, contexts, inputs_file, input_envs)
    print_plan(q.query, q.inputs, q.context, as_json, verbose, ctx)
