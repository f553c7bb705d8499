"""Typed values of recipe inputs and outputs: checking and coercion from text."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cmx.secrets import Secret

INPUT_TYPES = ("str", "int", "float", "bool", "path", "url", "secret", "choice")
OUTPUT_TYPES = ("str", "int", "float", "bool", "path", "url", "list", "dict")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_URL_SCHEMES = ("http://", "https://", "file://", "s3://", "gs://", "hf://")


class TypeMismatch(ValueError):
    """A value does not fit a declared type; the message says what was expected."""


def coerce(value: Any, type_name: str, choices: tuple[str, ...] = ()) -> Any:
    """Check `value` against `type_name`, converting text (from a command line or a template).

    Returns the typed value: int, float, bool, str, Path (absolute), Secret. Raises
    TypeMismatch with a message that names the expected type.
    """
    if type_name == "str":
        if isinstance(value, (str, int, float, Path)) and not isinstance(value, bool):
            return str(value)
        raise TypeMismatch(f"expected a string, got {_describe(value)}")
    if type_name == "int":
        if isinstance(value, bool):
            raise TypeMismatch(f"expected an integer, got {_describe(value)}")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value.strip().replace("_", ""), 10)
            except ValueError:
                pass
        raise TypeMismatch(f"expected an integer, got {_describe(value)}")
    if type_name == "float":
        if isinstance(value, bool):
            raise TypeMismatch(f"expected a number, got {_describe(value)}")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise TypeMismatch(f"expected a number, got {_describe(value)}")
    if type_name == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise TypeMismatch(f"expected true or false, got {_describe(value)}")
    if type_name == "path":
        if isinstance(value, (str, Path)) and str(value):
            return Path(os.path.abspath(os.path.expanduser(value)))  # absolute, without `..`
        raise TypeMismatch(f"expected a path, got {_describe(value)}")
    if type_name == "url":
        if isinstance(value, str) and value.startswith(_URL_SCHEMES) and len(value) > 8:
            return value
        raise TypeMismatch(f"expected a URL ({', '.join(s[:-3] for s in _URL_SCHEMES)}), got {_describe(value)}")
    if type_name == "secret":
        if isinstance(value, Secret):
            return value
        if isinstance(value, str):
            return Secret(value)
        raise TypeMismatch("expected a secret string")
    if type_name == "choice":
        text = value if isinstance(value, str) else None
        if text is None and isinstance(value, (int, float)) and not isinstance(value, bool):
            text = str(value)
        if text in choices:
            return text
        raise TypeMismatch(f"expected one of {', '.join(choices)}, got {_describe(value)}")
    if type_name == "list":
        if isinstance(value, (list, tuple)):
            return list(value)
        raise TypeMismatch(f"expected a list, got {_describe(value)}")
    if type_name == "dict":
        if isinstance(value, dict):
            return dict(value)
        raise TypeMismatch(f"expected a mapping, got {_describe(value)}")
    raise TypeMismatch(f"unknown type {type_name!r}")


def to_json(value: Any) -> Any:
    """A JSON-friendly form of a typed value; secrets must be filtered out before this."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Secret):
        raise TypeError("refusing to serialise a Secret")
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    return value


def _describe(value: Any) -> str:
    if isinstance(value, Secret):
        return "a secret"
    if isinstance(value, str):
        return repr(value) if len(value) < 60 else repr(value[:57] + "...")
    return f"{type(value).__name__} {value!r}"
