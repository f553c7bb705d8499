"""Inputs files: a YAML mapping of NAME: VALUE pairs read as if each were given with --input (`cmx tune` writes them).

    # written by cmx tune ...
    target_qps_server: 37.5
    target_qps_offline: 151.0

Each value must be a scalar (text, number, true/false) and becomes the text `--input NAME=VALUE` would
carry, so the recipe's declared type converts it exactly as it converts a command-line value. A NAME may
be RECIPE.NAME, as with --input. `write_inputs_file` merges into an existing file (its other names stay),
so tuning Offline and then Server into one file gives one file for the whole run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from cmx.errors import InputError


class InputsFileError(InputError):
    """An inputs file is missing, not YAML, not a mapping, or holds a value that is not a scalar."""


def read_inputs_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """The file's NAME -> VALUE pairs, each value as the text --input would give."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise InputsFileError(f"cannot read the inputs file: {err.strerror or err}", where=str(p),
                              hint="give a YAML file of NAME: VALUE lines (cmx tune writes one)") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark is not None else str(p)
        raise InputsFileError(f"not YAML: {getattr(err, 'problem', None) or err}", where=where) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputsFileError(f"an inputs file is a mapping of NAME: VALUE, not a {type(data).__name__}", where=str(p))
    out: dict[str, str] = {}
    for name, value in data.items():
        if not isinstance(name, str) or not name.strip():
            raise InputsFileError(f"{name!r} is not an input name", where=str(p))
        out[name.strip()] = _text(name, value, p)
    return out


def _text(name: str, value: Any, path: Path) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    raise InputsFileError(f"{name}: a {type(value).__name__ if value is not None else 'null'} value; an input is "
                          "one scalar (text, a number, true or false)", where=str(path),
                          hint="leave out an input to keep its default")


def write_inputs_file(path: str | os.PathLike[str], values: Mapping[str, float | int | str | bool],
                      header: list[str]) -> Path:
    """Write `values` into the inputs file at `path`, keeping the names it already has that `values` does not
    set; `header` becomes its comment lines (the file's own comments are replaced)."""
    p = Path(path)
    kept: dict[str, Any] = {}
    if p.is_file():
        kept = {k: yaml.safe_load(v) if v else v for k, v in read_inputs_file(p).items()}
    merged = {**kept, **values}
    lines = [f"# {line}" if line else "#" for line in header]
    lines += [yaml.safe_dump({k: v}, default_flow_style=False, sort_keys=False).rstrip("\n") for k, v in merged.items()]
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, p)
    return p
