"""Editing registry.yaml in place: a git source's rev, a source added, a source removed. Every other line and
comment is kept, and the file is replaced only once the new text reads as a valid registry."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from cmx.errors import RegistryError
from cmx.registry.sources import Source, read_registry

_PLAIN = re.compile(r"[A-Za-z0-9_./:@~+-]+")  # written bare; anything else as a double-quoted (JSON) string


def update_rev(path: Path, name: str, rev: str) -> Source:
    """Point git source `name` at commit `rev`, editing only that line of registry.yaml."""
    from cmx.recipe.yamlload import load_yaml
    from cmx.tools.git import is_commit_sha

    sources = read_registry(path, repairing=name)
    source = next((s for s in sources if s.name == name), None)
    if source is None:
        raise RegistryError(f"no source named {name!r} in {path}",
                            hint=f"sources: {', '.join(s.name for s in sources)}")
    if source.git is None:
        raise RegistryError(f"source {name!r} is a {source.kind} folder; only git sources have a rev")
    if not is_commit_sha(rev):
        raise RegistryError(f"{rev!r} is not a full commit sha",
                            hint="a branch or tag moves; pin the 40-hex commit for reproducibility")
    data = load_yaml(path)
    item = next(i for i in data["sources"] if i.get("name") == name)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    index = item.line_of("rev") - 1
    new_line, count = re.subn(r"(rev\s*:\s*)['\"]?[0-9A-Za-z._/-]+['\"]?", lambda m: m.group(1) + rev,
                              lines[index], count=1)
    if count != 1:
        raise RegistryError(f"cannot find the rev of {name!r} on its line", where=f"{path}:{index + 1}")
    lines[index] = new_line
    _replace(path, "".join(lines))
    return source._replace(rev=rev)


def append_source(path: Path, entry: Mapping[str, str | bool], *, start: str) -> None:
    """Add source `entry` (its keys, in order) at the end of registry file `path`; a missing file is first made
    of the text `start`. A registry whose list is written in flow style (`sources: [...]`) is rewritten in block
    style, its comments before `sources:` kept."""
    text = path.read_text(encoding="utf-8") if path.is_file() else start
    head, items, indent = _blocks(path, text)
    lines = _entry_lines(entry, indent)
    if items is None:  # flow style: every source rewritten
        text = head + "sources:\n" + "".join(line for item in _items(path, text) for line in _entry_lines(item, "  "))
    text = (text if text.endswith("\n") else text + "\n") + "".join(lines)
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace(path, text)


def remove_source(path: Path, name: str) -> Source:
    """Remove source `name` from registry file `path`: its lines (block style) or its item (flow style)."""
    sources = read_registry(path)
    source = next((s for s in sources if s.name == name), None)
    if source is None:
        raise RegistryError(f"no source named {name!r} in {path}",
                            hint=f"sources: {', '.join(s.name for s in sources) or 'none'}")
    text = path.read_text(encoding="utf-8")
    head, items, indent = _blocks(path, text)
    if items is None:
        kept = [item for item in _items(path, text) if item.get("name") != name]
        text = head + ("sources:\n" + "".join(line for item in kept for line in _entry_lines(item, "  "))
                       if kept else "sources: []\n")
    else:
        lines = text.splitlines(keepends=True)
        first = source.line - 1
        last = first + 1
        while last < len(lines) and lines[last].strip() and _indent(lines[last]) > len(indent):
            last += 1  # the item's own lines: deeper than its `-`
        del lines[first:last]
        text = "".join(lines)
        if len(sources) == 1:  # `sources:` with nothing under it would read as null
            text = re.sub(r"(?m)^sources\s*:[ \t]*(#.*)?$", "sources: []", text, count=1)
    _replace(path, text)
    return source


def _blocks(path: Path, text: str) -> tuple[str, list[int] | None, str]:
    """(the text before `sources:`, the item lines of a block-style list or None for flow style, the indent of an
    item's `-`)."""
    from cmx.recipe.yamlload import LocList, load_yaml

    data = load_yaml(path, text)
    line = data.line_of("sources")
    lines = text.splitlines(keepends=True)
    head = "".join(lines[:line - 1])
    items = data.get("sources")
    after = lines[line - 1].split(":", 1)[1].strip()
    if not isinstance(items, LocList) or after.startswith("[") or not items:
        return head, None, "  "
    return head, items.item_lines, " " * _indent(lines[items.item_lines[0] - 1])


def _items(path: Path, text: str) -> list[Mapping[str, object]]:
    from cmx.recipe.yamlload import load_yaml

    return list(load_yaml(path, text).get("sources") or [])


def _entry_lines(entry: Mapping[str, object], indent: str) -> list[str]:
    import yaml

    out = []
    for i, (key, value) in enumerate(entry.items()):
        if isinstance(value, bool):
            shown = "true" if value else "false"
        else:  # a string YAML would read as something else (a number, a bool, null, a comment) is quoted
            shown = str(value)
            if not _PLAIN.fullmatch(shown) or yaml.safe_load(shown) != shown:
                shown = json.dumps(shown)
        out.append(f"{indent}{'- ' if i == 0 else '  '}{key}: {shown}\n")
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _replace(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file beside it, once it reads as a valid registry."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    try:
        read_registry(tmp)  # paths are relative to the file: beside it, they mean what they will
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
