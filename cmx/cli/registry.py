"""`cmx registry ls|add|update|fetch|rm`: recipe sources and their pinned commits."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from cmx.cli.common import app, echo_json, registry_option

if TYPE_CHECKING:
    from cmx.api import Pinned


@click.group("registry", help="""List, add and pin recipe sources.

A registry file lists where recipes come from, in order: the recipes this cmx ships
({name, builtin: true}), local folders ({name, path}) and git repositories pinned to a
full commit sha ({name, git, rev, branch, subdir}). A branch or tag is refused as a pin:
it moves, so the same registry would resolve to different recipes later.

The registry in force: --registry or CMX_REGISTRY; else the home's registry.yaml
(CMX_HOME, else the checkout cmx runs from, else ~/.cmx) when it exists; else the one
cmx ships, whose only source is its built-in recipes. `cmx registry ls` names it.

\b
    cmx registry ls
    cmx registry add acme https://github.com/acme/cmx-recipes.git   # pins its HEAD
    cmx registry update acme          # move the pin to the head it follows
    cmx registry update acme 0123456789abcdef0123456789abcdef01234567
    cmx registry fetch                # check out every git source at its pin
""")
def command() -> None:
    pass


@command.command("ls", help="""List the sources of the registry in force, with their recipe counts.

Nothing is fetched: a git source whose checkout is missing shows `not fetched`.""")
@click.option("--json", "as_json", is_flag=True, help="Print sources as JSON.")
@registry_option
@click.pass_context
def ls(ctx: click.Context, as_json: bool) -> None:
    from cmx import api
    from cmx.cli.render import table

    settings = app(ctx).settings()
    infos = api.registry_sources(settings)
    if as_json:
        echo_json([{"name": i.source.name, "kind": i.source.kind,
                    "path": str(i.source.recipes_dir(settings.sources_dir)) if i.source.git is None else None,
                    "git": i.source.git, "rev": i.source.rev, "branch": i.source.branch,
                    "subdir": i.source.subdir if i.source.git else None, "recipes": i.recipes} for i in infos])
        return
    shipped = api.registry_is_default(settings)
    click.echo(f"registry: {settings.registry}" + (" (the one cmx ships: the home has no registry.yaml)"
                                                     if shipped else ""))
    for line in table(("NAME", "KIND", "RECIPES", "WHERE"),
                      ((i.source.name, i.source.kind, "not fetched" if i.recipes is None else i.recipes,
                        i.source.describe()) for i in infos)):
        click.echo(line)


@command.command("add", help="""Add git repository URL as recipe source NAME, pinned to a commit.

The pin is --rev (a full 40-hex sha), else the commit the head of --branch, or the
remote's HEAD, names now: the registry records that sha, never a branch. --branch is
recorded as what `cmx registry update NAME` follows. The commit is fetched, and its
recipes folder (--subdir) and cmx-source.yaml checked, before the registry is edited.
While the registry in force is the one cmx ships, this writes the home's registry.yaml:
the built-in recipes, then NAME. A URL with a password in it is refused (the registry
file is not a secret store: let git's credential helper or an SSH key supply it).

\b
    cmx registry add acme https://github.com/acme/cmx-recipes.git
    cmx registry add mine /srv/git/recipes.git --branch stable --subdir cmx""")
@click.argument("name")
@click.argument("url")
@click.option("--rev", metavar="SHA", help="Pin this commit (a full 40-hex sha) instead of the head.")
@click.option("--branch", metavar="BRANCH", help="Follow this branch (default: the remote's HEAD).")
@click.option("--subdir", metavar="DIR", default="recipes", show_default=True,
              help="The folder of the repository that holds the recipe folders.")
@click.option("--json", "as_json", is_flag=True, help="Print the new source as JSON.")
@registry_option
@click.pass_context
def add(ctx: click.Context, name: str, url: str, rev: str | None, branch: str | None, subdir: str,
        as_json: bool) -> None:
    from cmx import api

    pinned = api.registry_add(name, url, rev=rev, branch=branch, subdir=subdir, settings=app(ctx).settings())
    _print_pinned(pinned, as_json, f"added {name}: {pinned.source.git} at {pinned.source.rev} "
                                   f"(recipes in {pinned.source.subdir}/) to {pinned.registry}")


@command.command("update", help="""Move git source NAME's pin: to commit REV, or to the head it follows.

Without REV: the head of its `branch:` now, or of the remote's HEAD when it has none. The
commit is fetched and its cmx-source.yaml checked first; only then is the `rev:` line
rewritten (the other lines and comments are kept). Prints `NAME: OLD -> NEW`. It also
repairs a `rev:` that names a branch or tag, which every other command refuses.""")
@click.argument("name")
@click.argument("rev", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the source, its old and new rev as JSON.")
@registry_option
@click.pass_context
def update(ctx: click.Context, name: str, rev: str | None, as_json: bool) -> None:
    from cmx import api

    pinned = api.registry_update(name, rev, settings=app(ctx).settings())
    same = pinned.old == pinned.source.rev
    _print_pinned(pinned, as_json, f"{name}: {pinned.source.rev} (already there)" if same
                  else f"{name}: {pinned.old} -> {pinned.source.rev}")


@command.command("fetch", help="""Check out git sources at the commits they are pinned to (default: every one).

`cmx find`, `show` and `plan` never fetch; `cmx run` fetches a missing source and says so.
This fetches ahead of time (before going offline, before `cmx plan`). Nothing is edited.""")
@click.argument("names", nargs=-1, metavar="[NAME]...")
@registry_option
@click.pass_context
def fetch(ctx: click.Context, names: tuple[str, ...]) -> None:
    from cmx import api

    fetched = api.registry_fetch(names, settings=app(ctx).settings())
    for source in fetched:
        click.echo(f"{source.name} fetched at {source.rev}")
    if not fetched:
        click.echo("no git sources")


@command.command("rm", help="""Take source NAME out of the registry file (a git source's checkout stays in the
cache). The registry cmx ships is not edited.""")
@click.argument("name")
@registry_option
@click.pass_context
def rm(ctx: click.Context, name: str) -> None:
    from cmx import api

    settings = app(ctx).settings()
    source = api.registry_remove(name, settings=settings)
    click.echo(f"removed {source.name} ({source.kind}) from {settings.registry}")


def _print_pinned(pinned: Pinned, as_json: bool, text: str) -> None:
    if as_json:
        s = pinned.source
        echo_json({"name": s.name, "git": s.git, "rev": s.rev, "old": pinned.old, "branch": s.branch,
                   "subdir": s.subdir, "registry": str(pinned.registry)})
    else:
        click.echo(text)
