"""Inputs that travel by environment variable, for values no command line may show (a URL with a password:
another user's `ps` shows a command line, and a Slurm batch script is a file): `--input-env NAME=VARIABLE` reads
one, and the launchers (a container, a Slurm job) split a command's inputs into those on its command line and
those its environment carries."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cmx.errors import InputError
from cmx.secrets import mask_urls

PREFIX = "CMX_INPUT_"


@dataclass(frozen=True)
class InputsByEnvironment:
    """A command's --input pairs split for a process cmx starts elsewhere: `pairs` go on its command line; each value
    holding a URL's credentials goes by a variable instead (`by_variable`: which input reads which), whose value
    `environment` holds for the starting process's own environment."""

    pairs: tuple[tuple[str, str], ...]
    by_variable: tuple[tuple[str, str], ...]
    environment: Mapping[str, str]

    def arguments(self) -> list[str]:
        """`--input NAME=VALUE` for the pairs, then `--input-env NAME=VARIABLE` for the others."""
        return ([a for name, value in self.pairs for a in ("--input", f"{name}={value}")]
                + [a for name, variable in self.by_variable for a in ("--input-env", f"{name}={variable}")])


def by_environment(pairs: Iterable[tuple[str, str]]) -> InputsByEnvironment:
    """`pairs` split (see InputsByEnvironment): each value whose URL credentials `mask_urls` would mask goes by a
    variable named for its input, CMX_INPUT_ENDPOINT_URL for endpoint_url (a RECIPE.NAME's dots and dashes as
    underscores; a name taken already gets _2, _3 ...)."""
    listed = list(pairs)
    named = list(zip(listed, _variables(listed), strict=True))
    return InputsByEnvironment(pairs=tuple(pair for pair, variable in named if variable is None),
                               by_variable=tuple((pair[0], variable) for pair, variable in named if variable),
                               environment={variable: pair[1] for pair, variable in named if variable})


def _variables(pairs: list[tuple[str, str]]) -> list[str | None]:
    """For each pair, the variable its value goes by, or None for a value without URL credentials."""
    out: list[str | None] = []
    for name, value in pairs:
        if mask_urls(value) == value:
            out.append(None)
            continue
        base = PREFIX + re.sub(r"[^A-Za-z0-9]", "_", name).upper()
        variable, n = base, 1
        while variable in out:
            n += 1
            variable = f"{base}_{n}"
        out.append(variable)
    return out


def hide_in_argv(argv: Sequence[str]) -> tuple[list[str], InputsByEnvironment]:
    """`argv` (a cmx command's arguments) with each `--input NAME=VALUE` (`-i`, `--input=`) whose value holds a URL's
    credentials given as `--input-env NAME=VARIABLE` instead; and the split, whose `environment` the process that
    runs the new argv must be given."""
    found: list[tuple[int, str, str]] = []  # (the index of the NAME=VALUE token, name, value)
    at = 0
    while at < len(argv):
        token = argv[at]
        if token in ("--input", "-i") and at + 1 < len(argv):
            at += 1
            pair = argv[at]
        else:
            pair = token.removeprefix("--input=") if token.startswith("--input=") else ""
        name, sep, value = pair.partition("=")
        if sep and name:
            found.append((at, name, value))
        at += 1
    out = list(argv)
    for (index, name, _), variable in zip(found, _variables([(name, value) for _, name, value in found]), strict=True):
        if variable is None:
            continue
        if out[index].startswith("--input="):
            out[index] = f"--input-env={name}={variable}"
        else:
            out[index - 1], out[index] = "--input-env", f"{name}={variable}"
    return out, by_environment((name, value) for _, name, value in found)


def read(pairs: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """`--input-env NAME=VARIABLE` pairs (`pairs`: NAME to VARIABLE) with each variable's value from `environ`; an
    unset variable is an error naming it."""
    missing = [f"{name}={variable}" for name, variable in pairs.items() if variable not in environ]
    if missing:
        raise InputError(f"--input-env {', '.join(missing)}: the environment variable is not set",
                         hint="export it first (the value stays off the command line), or give the value with "
                              "--input NAME=VALUE")
    return {name: environ[variable] for name, variable in pairs.items()}
