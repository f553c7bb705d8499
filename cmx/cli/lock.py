"""`cmx lock QUERY [-o FILE]`: pin every step of a plan, and the packages it runs on, into a lockfile."""

from __future__ import annotations

from pathlib import Path

import click

from cmx.cli.common import (
    app,
    echo_json,
    join_query,
    parse_context,
    parse_pairs,
    query_arg,
    registry_option,
)


@click.command("lock", help="""Write a lockfile pinning every step of QUERY's plan.

For each step: the recipe, the sha256 of its files, the registry source and its
commit, the chosen variations, the inputs (a secret by its name only) and the
context, the cache key, and the checksums of its cached files (for steps already
in the cache). Beside them: the query, the inputs and context given here, and the
versions of vLLM, torch, LoadGen and the other packages the benchmark runs on.
Nothing runs and nothing is fetched.

`cmx run --locked FILE` replays it, or refuses at the first difference. Every run
whose root step runs also leaves a cmx.lock beside its run.json, and a submission
packaged from its results carries it in src/.

\\b
    cmx lock "app mlperf inference llama2 _cpu _tiny _short" -o cmx.lock
    cmx run --locked cmx.lock --input results_dir=R
""")
@query_arg
@click.option("--input", "-i", "inputs", multiple=True, metavar="NAME=VALUE",
              help="An input of the root recipe; RECIPE.NAME=VALUE sets it on every step of RECIPE.")
@click.option("--context", "-c", "contexts", multiple=True, metavar="KEY=VALUE",
              help="A run-wide context value, as a variation would set it (device=rocm).")
@click.option("--output", "-o", "out", type=click.Path(path_type=Path, dir_okay=False), default=Path("cmx.lock"),
              show_default=True, help="Where the lockfile goes.")
@click.option("--json", "as_json", is_flag=True, help="Print the lockfile's path and step count as JSON.")
@registry_option
@click.pass_context
def command(ctx: click.Context, query: tuple[str, ...], inputs: tuple[str, ...], contexts: tuple[str, ...],
            out: Path, as_json: bool) -> None:
    from cmx import api

    lock = api.lock(join_query(query), inputs=parse_pairs(inputs, "--input"), context=parse_context(contexts),
                    settings=app(ctx).settings())
    path = lock.write(out)
    pinned = sum(1 for s in lock.steps if s.files is not None)
    if as_json:
        echo_json({"lock": str(path), "steps": len(lock.steps), "cached": pinned, "packages": lock.packages})
    else:
        click.echo(f"lock: {path} ({len(lock.steps)} steps, {pinned} with cached files pinned; "
                   f"{len(lock.packages)} packages)")
