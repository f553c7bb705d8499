"""`cmx cache ls|show|rm|gc|verify`: inspect and clean the content-addressed cache."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import click

from cmx.cli.common import app, echo_json, registry_option

if TYPE_CHECKING:
    from cmx.api import Entry


@click.group("cache", help="""Inspect and clean the content-addressed cache.

Entries live in cache/<recipe>/<key>/ (or $CMX_CACHE) with a meta.json that records
the inputs, outputs and the sha256 of every file. KEY may be any unique prefix of at
least 4 characters.

\b
    cmx cache ls
    cmx cache show 3f2a9c
    cmx cache rm "get python-package"
    cmx cache gc --older-than 30
    cmx cache verify --remove
""")
def command() -> None:
    pass


def _entry_json(entry: Entry) -> dict[str, Any]:
    return {"recipe": entry.recipe, "key": entry.key, "path": str(entry.path), "created": entry.created,
            "size": entry.size, "variations": list(entry.variations),
            "inputs": entry.meta.inputs if entry.meta else {}, "outputs": entry.outputs}


def _echo_removed(as_json: bool, data: list[Any], lines: Iterable[str], total: str) -> None:
    """What `rm` and `gc` removed: `data` as JSON, or a line per item and the total."""
    if as_json:
        echo_json(data)
        return
    for line in lines:
        click.echo(line)
    click.echo(total)


@command.command("ls", help="List entries, all or those of recipes matching QUERY.")
@click.argument("query", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print entries as JSON.")
@registry_option
@click.pass_context
def ls(ctx: click.Context, query: tuple[str, ...], as_json: bool) -> None:
    from cmx import api
    from cmx.cli.render import human_size, table

    entries = api.cache_entries(" ".join(query) or None, settings=app(ctx).settings())
    if as_json:
        echo_json([_entry_json(e) for e in entries])
        return
    if not entries:
        click.echo("the cache is empty" if not query else "no entry matches")
        return
    rows = [(e.recipe, e.key[:12], " ".join(f"_{v}" for v in e.variations), e.created,
             human_size(e.size)) for e in entries]
    for line in table(("RECIPE", "KEY", "VARIATIONS", "CREATED", "SIZE"), rows):
        click.echo(line)
    click.echo(f"{len(entries)} entries, {human_size(sum(e.size for e in entries))}")


@command.command("show", help="Print the meta.json of the entry whose key starts with KEY.")
@click.argument("key")
@registry_option
@click.pass_context
def show(ctx: click.Context, key: str) -> None:
    from cmx import api

    entry = api.cache_entry(key, settings=app(ctx).settings())
    assert entry.meta is not None  # api.cache_entry refuses an entry whose meta.json is unreadable
    echo_json({**entry.meta.to_json(), "path": str(entry.path), "outputs": entry.outputs})


@command.command("rm", help="""Remove entries: by key prefixes (`rm 3f2a9c 77b1e0`), or every entry of
recipes matching a QUERY (`rm "get python-package _x"`: `_x` keeps entries built with x).""")
@click.argument("target", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print what was removed as JSON.")
@registry_option
@click.pass_context
def rm(ctx: click.Context, target: tuple[str, ...], as_json: bool) -> None:
    from cmx import api

    settings = app(ctx).settings()
    if len(target) > 1 and all(len(t) >= 4 and all(c in "0123456789abcdef" for c in t) for t in target):
        entries = [e for key in target for e in api.cache_select(key, settings=settings)]  # several keys
    else:
        entries = api.cache_select(" ".join(target), settings=settings)
    api.cache_remove(entries, settings=settings)
    _echo_removed(as_json, [_entry_json(e) for e in entries], (f"removed {e.recipe}/{e.key[:12]}" for e in entries),
                  f"{len(entries)} entries removed")


@command.command("gc", help="""Remove leftovers of interrupted builds and unused locks.

With --older-than DAYS, also remove entries created more than DAYS ago.""")
@click.option("--older-than", type=click.FloatRange(min=0), metavar="DAYS", default=None,
              help="Also remove entries older than this many days.")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@click.option("--json", "as_json", is_flag=True, help="Print removed paths as JSON.")
@registry_option
@click.pass_context
def gc(ctx: click.Context, older_than: float | None, dry_run: bool, as_json: bool) -> None:
    from cmx import api

    removed = api.cache_gc(older_than, dry_run=dry_run, settings=app(ctx).settings())
    _echo_removed(as_json, [str(p) for p in removed],
                  (f"{'would remove' if dry_run else 'removed'} {path}" for path in removed),
                  f"{len(removed)} item(s) {'to remove' if dry_run else 'removed'}")


@command.command("verify", help="Re-hash entries (one, or all) against their meta.json; exit 1 if any is corrupted.")
@click.argument("key", required=False)
@click.option("--remove", is_flag=True, help="Remove corrupted entries (they are rebuilt when next needed).")
@click.option("--json", "as_json", is_flag=True, help="Print problems as JSON.")
@registry_option
@click.pass_context
def verify(ctx: click.Context, key: str | None, remove: bool, as_json: bool) -> None:
    from cmx import api

    entries, problems = api.cache_verify(key, remove=remove, settings=app(ctx).settings())
    if as_json:
        echo_json({"checked": len(entries), "problems": [
            {"recipe": p.entry.recipe, "key": p.entry.key, "file": p.path, "problem": p.problem} for p in problems],
            "removed": remove})
    else:
        for p in problems:
            click.echo(f"{p.entry.recipe}/{p.entry.key[:12]}: {p.path}: {p.problem}")
        bad = len({p.entry.key for p in problems})
        click.echo(f"{len(entries)} entries checked, {bad} corrupted" + (", removed" if remove and bad else ""))
        if bad and not remove:
            click.echo("  remove them with `cmx cache verify --remove`; they are rebuilt when next needed")
    if problems:
        ctx.exit(1)
