"""Strict YAML loading that remembers line numbers and refuses duplicate keys."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from cmx.errors import RecipeError

try:  # the C parser is several times faster; fall back when PyYAML was built without it
    from yaml import CSafeLoader as _Base
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Base  # type: ignore[assignment]  # the same loader, in Python

_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"


class _Loader(_Base):
    """The safe loader with tag resolution made cheap: the C composer calls these three
    Python methods for every node, and recipes repeat the same plain scalars (type,
    default, str, true...). Recipes use no path resolvers, so descending is a no-op."""

    def resolve(self, kind: type, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode:
            return _resolve_plain(value) if implicit[0] else _STR
        return _SEQ if kind is yaml.SequenceNode else _MAP

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        pass

    def ascend_resolver(self) -> None:
        pass


@lru_cache(maxsize=4096)
def _resolve_plain(value: str) -> str:
    """The YAML 1.1 tag of a plain scalar, as SafeLoader resolves it (a pure function)."""
    tag: str = yaml.SafeLoader.resolve(_RESOLVER, yaml.ScalarNode, value, (True, False))  # untyped in the stubs
    return tag


_RESOLVER = yaml.SafeLoader("")  # only its resolve() is used: a pure function of the scalar text


class LocDict(dict[str, Any]):
    """A mapping from YAML that knows the line of itself and of each of its keys (1-based)."""

    __slots__ = ("key_lines", "line")

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.key_lines: dict[str, int] = {}

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


class LocList(list[Any]):
    """A sequence from YAML that knows the line of itself and of each item (1-based)."""

    __slots__ = ("item_lines", "line")

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.item_lines: list[int] = []


def line_of(value: Any, default: int = 1) -> int:
    """The line a loaded value started on, when it is a mapping or a sequence."""
    return getattr(value, "line", default)


def load_yaml(path: Path, text: str | None = None) -> Any:
    """Parse one YAML document into LocDict / LocList / scalars.

    Raises RecipeError with file:line for syntax errors, duplicate keys, non-string keys
    and merge keys (`<<`), which hide where a value came from.
    """
    if text is None:
        text = path.read_text(encoding="utf-8")
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        return _build(node, loader, path)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        problem = exc.problem or exc.context or "invalid YAML"
        raise RecipeError(f"malformed YAML: {problem}", where=f"{path}:{line}",
                          hint="fix the YAML syntax at that line") from None
    except yaml.YAMLError as exc:
        raise RecipeError(f"malformed YAML: {exc}", where=str(path)) from None
    finally:
        loader.dispose()


def _build(node: yaml.Node, loader: Any, path: Path) -> Any:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out = LocDict(line)
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise RecipeError("merge keys (<<) are not allowed in recipes",
                                  where=f"{path}:{key_line}", hint="write the keys out")
            key = _scalar(key_node, loader) if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, str):
                raise RecipeError(f"mapping key must be a string, got {key!r}",
                                  where=f"{path}:{key_line}", hint="quote the key")
            if key in out:
                raise RecipeError(f"duplicate key {key!r} (first at line {out.key_lines[key]})",
                                  where=f"{path}:{key_line}", hint="remove one of the two")
            out[key] = _build(value_node, loader, path)
            out.key_lines[key] = key_line
        return out
    if isinstance(node, yaml.SequenceNode):
        seq = LocList(line)
        for item in node.value:
            seq.append(_build(item, loader, path))
            seq.item_lines.append(item.start_mark.line + 1)
        return seq
    return _scalar(node, loader) if isinstance(node, yaml.ScalarNode) else loader.construct_object(node, deep=True)


def _scalar(node: yaml.ScalarNode, loader: Any) -> Any:
    """Construct the common scalar types directly (the generic path costs several calls each)."""
    tag = node.tag
    if tag == _STR:
        return node.value
    if tag == "tag:yaml.org,2002:int":
        return loader.construct_yaml_int(node)
    if tag == "tag:yaml.org,2002:bool":
        return loader.construct_yaml_bool(node)
    if tag == "tag:yaml.org,2002:null":
        return None
    if tag == "tag:yaml.org,2002:float":
        return loader.construct_yaml_float(node)
    return loader.construct_object(node, deep=True)
