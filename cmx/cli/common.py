"""What the verbs share: settings from the global options, --input/--context parsing, JSON output."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from cmx.api import Settings, load_settings
from cmx.cli.run_output import json_text


@dataclass
class AppState:
    registry: str | None
    debug: bool

    def settings(self) -> Settings:
        return load_settings(self.registry)


def app(ctx: click.Context) -> AppState:
    return ctx.find_object(AppState) or AppState(registry=None, debug=False)


def registry_option(fn: Callable) -> Callable:
    """`--registry` on each verb too, so it may come before or after the verb."""

    def remember(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
        if value:
            app(ctx).registry = value

    return click.option("--registry", metavar="FILE", expose_value=False, callback=remember,
                        help="Registry file listing recipe sources.")(fn)


def parse_pairs(values: tuple[str, ...], flag: str) -> dict[str, str]:
    """`k=v` pairs from repeated options; the value may contain '='."""
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint=flag)
        out[key.strip()] = value
    return out


def parse_context(values: tuple[str, ...]) -> dict[str, Any]:
    """`--context KEY=VALUE` pairs typed as YAML scalars: 2 is an int, true a bool, rocm a string,
    so that they compare equal to what a variation's `context:` sets."""
    return {k: parse_scalar(v) for k, v in parse_pairs(values, "--context").items()}


def parse_scalar(text: str) -> Any:
    """The value YAML would give `key: TEXT` in a recipe (2, true, yes, null...), else the text."""
    import yaml

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return value if value is None or isinstance(value, (str, int, float, bool)) else text


def echo_json(data: Any) -> None:
    sys.stdout.write(json_text(data))


def query_arg(fn: Callable) -> Callable:
    return click.argument("query", nargs=-1, required=True)(fn)


def join_query(words: tuple[str, ...]) -> str:
    return " ".join(words)


INPUT_HELP = "An input of the root recipe; RECIPE.NAME=VALUE sets it on every step of RECIPE."
CONTEXT_HELP = "A run-wide context value, as a variation would set it (device=rocm)."
INPUTS_FILE_HELP = ("YAML of NAME: VALUE inputs, each as if given with --input (an explicit --input wins); "
                    "`cmx tune` writes one.")
INPUT_ENV_HELP = ("An input whose value is the environment variable's, for a value no command line should show (a URL "
                  "with a password); cmx hands such values to its containers and Slurm jobs this way.")


def query_options(*, input_help: str = INPUT_HELP, context_help: str = CONTEXT_HELP) -> Callable[[Callable], Callable]:
    """`--input`, `--input-env`, `--inputs-file` and `--context`, in that order in --help (every verb that takes a
    query takes all four); the command takes them as `inputs`, `input_envs`, `inputs_file` and `contexts`, which
    `parse_query` reads."""

    def apply(fn: Callable) -> Callable:
        # click lists a command's options in the reverse order of the decorators' calls: the last applied is first
        fn = click.option("--context", "-c", "contexts", multiple=True, metavar="KEY=VALUE", help=context_help)(fn)
        fn = click.option("--inputs-file", "inputs_file", type=click.Path(dir_okay=False), metavar="FILE",
                          help=INPUTS_FILE_HELP)(fn)
        fn = click.option("--input-env", "input_envs", multiple=True, metavar="NAME=VARIABLE",
                          help=INPUT_ENV_HELP)(fn)
        return click.option("--input", "-i", "inputs", multiple=True, metavar="NAME=VALUE", help=input_help)(fn)

    return apply


@dataclass(frozen=True)
class QueryArgs:
    """What a verb's QUERY words, --input pairs (over its --inputs-file's) and --context pairs say."""

    query: str
    inputs: dict[str, str]
    context: dict[str, Any]


def parse_query(words: tuple[str, ...], inputs: tuple[str, ...], contexts: tuple[str, ...],
                inputs_file: str | None = None, input_envs: tuple[str, ...] = ()) -> QueryArgs:
    """The values of `query_arg` and `query_options`, parsed; a bad --input is reported before a bad --context.
    The --inputs-file's pairs go under the explicit --input and --input-env ones, which win; an input given by
    both of those is an error."""
    given = parse_pairs(inputs, "--input")
    if input_envs:
        import os

        from cmx import api

        by_env = parse_pairs(input_envs, "--input-env")
        both = sorted(set(by_env) & set(given))
        if both:
            raise click.BadParameter(f"{', '.join(both)} is given with --input too; give each input once",
                                     param_hint="--input-env")
        given.update(api.read_input_envs(by_env, os.environ))
    if inputs_file:
        from cmx import api

        given = {**api.read_inputs_file(inputs_file), **given}
    return QueryArgs(join_query(words), given, parse_context(contexts))
