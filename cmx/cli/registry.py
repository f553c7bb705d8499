"""`cmx registry ls|update`: recipe sources and their pinned commits."""

from __future__ import annotations

import click

from cmx.cli.common import app, echo_json, registry_option


@click.group("registry", help="""List recipe sources and pin git sources to a commit.

registry.yaml lists sources: local folders ({name, path}) and git repositories pinned
to a full commit sha ({name, git, rev, subdir}). A branch or tag is refused: it moves,
so the same registry would resolve to different recipes later.

\b
    cmx registry ls
    cmx registry update extra        # fetch it at its pinned commit
    cmx registry update extra 0123456789abcdef0123456789abcdef01234567
""")
def command() -> None:
    pass


@command.command("ls", help="List sources with their recipe counts.")
@click.option("--json", "as_json", is_flag=True, help="Print sources as JSON.")
@registry_option
@click.pass_context
def ls(ctx: click.Context, as_json: bool) -> None:
    from cmx import api
    from cmx.cli.render import table

    settings = app(ctx).settings()
    infos = api.registry_sources(settings)
    if as_json:
        echo_json([{"name": i.source.name, "kind": i.source.kind, "path": str(i.source.path) if i.source.path else None,
                    "git": i.source.git, "rev": i.source.rev, "subdir": i.source.subdir if i.source.git else None,
                    "recipes": i.recipes} for i in infos])
        return
    click.echo(f"registry: {settings.registry}")
    for line in table(("NAME", "KIND", "RECIPES", "WHERE"),
                      ((i.source.name, i.source.kind, "not fetched" if i.recipes is None else i.recipes,
                        i.source.describe()) for i in infos)):
        click.echo(line)


@command.command("update", help="""Fetch git source NAME, at commit REV (then pinned to it) or at the commit it
is pinned to. `cmx find`, `show` and `plan` never fetch; `cmx run` fetches a missing source and says so.""")
@click.argument("name")
@click.argument("rev", required=False)
@registry_option
@click.pass_context
def update(ctx: click.Context, name: str, rev: str) -> None:
    from cmx import api

    source = api.registry_update(name, rev, settings=app(ctx).settings())
    click.echo(f"{source.name} now pinned to {source.rev}" if rev else f"{source.name} fetched at {source.rev}")
