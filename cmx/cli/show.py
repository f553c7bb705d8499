"""`cmx show NAME`: one recipe's summary, tags, inputs, variations, deps and outputs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from cmx.cli.common import app, echo_json, registry_option

if TYPE_CHECKING:
    from cmx.api import DepSpec, DockerSpec, Variation


@click.command("show", help="""Describe recipe NAME (or the one recipe a query matches; its words
may come quoted or not, as for `cmx find`).

\b
    cmx show detect-system
    cmx show get python-package --json
""")
@click.argument("words", nargs=-1, required=True, metavar="NAME | QUERY")
@click.option("--json", "as_json", is_flag=True, help="Print the description as JSON.")
@registry_option
@click.pass_context
def command(ctx: click.Context, words: tuple[str, ...], as_json: bool) -> None:
    from cmx import api
    from cmx.cli.render import recipe_description

    recipe = api.show(" ".join(words), settings=app(ctx).settings())
    if as_json:
        echo_json({
            "name": recipe.name, "summary": recipe.summary, "tags": list(recipe.tags), "path": str(recipe.path),
            "source": recipe.source, "extends": recipe.extends, "bases": [str(b) for b in recipe.bases],
            "abstract": recipe.abstract, "params": dict(recipe.params), "context": list(recipe.context),
            "cache": {"enabled": recipe.cache.enabled, "key": list(recipe.cache.key or []),
                      "fingerprint": recipe.cache.fingerprint.__dict__ if recipe.cache.fingerprint else None},
            "inputs": {n: {"type": s.type, "default": api.to_json(s.default), "required": s.required, "help": s.help,
                           "env": s.env, "choices": list(s.choices)} for n, s in recipe.inputs.items()},
            "variations": {g: [_variation(v) for v in opts] for g, opts in recipe.groups.items()},
            "flags": [_variation(v) for v in recipe.flags.values()],
            "deps": [_dep(d) for d in recipe.deps],
            "outputs": {n: {"type": o.type, "help": o.help} for n, o in recipe.outputs.items()},
            "docker": _docker(recipe.docker),
            "files": list(recipe.files),
        })
        return
    for line in recipe_description(recipe):
        click.echo(line)


def _dep(d: DepSpec) -> dict[str, Any]:
    return {"query": str(d.query), "as": d.as_, "when": d.when.source if d.when else None,
            "with": {k: (w.value if w.kind != "ref" else f"{{{{ {w.namespace}.{w.value} }}}}") for k, w in d.with_}}


def _docker(spec: DockerSpec) -> dict[str, Any]:
    return {"apt": list(spec.apt), "pip": list(spec.pip), "env": dict(spec.env)}


def _variation(v: Variation) -> dict[str, Any]:
    from cmx import api

    return {"name": v.name, "default": v.default, "summary": v.summary, "inputs": api.to_json(dict(v.inputs)),
            "context": dict(v.context), "deps": [_dep(d) for d in v.deps], "docker": _docker(v.docker)}
