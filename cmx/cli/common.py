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


def inputs_file_option(fn: Callable) -> Callable:
    return click.option("--inputs-file", "inputs_file", type=click.Path(dir_okay=False), metavar="FILE",
                        help="YAML of NAME: VALUE inputs, each as if given with --input (an explicit --input "
                             "wins); `cmx tune` writes one.")(fn)


def with_inputs_file(given: dict[str, str], inputs_file: str | None) -> dict[str, str]:
    """The --inputs-file's pairs under the explicit --input ones (which win)."""
    if not inputs_file:
        return given
    from cmx import api

    return {**api.read_inputs_file(inputs_file), **given}
