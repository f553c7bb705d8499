"""Reading a tree that may be hostile: walks that follow no link and stop at a depth, links as findings, bounded reads.

A checked tree is data from someone else. `tar` would carry its symbolic links into the upload, so every
link is a finding: an error when it leaves the tree, points at nothing, or stands where the checker must
read a file (it reads none through a link), a warning otherwise. Walks are iterative and never enter a
linked folder (`loop -> .` is one finding, not a loop); below MAX_DEPTH folders they stop with a finding.
A file over the official checker's 50 MB limit is never read: the hygiene rule says so, once.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from cmx.errors import clip
from cmx.mlperf.submission.check.model import WARNING, Problem
from cmx.mlperf.submission.tree import relative
from cmx.tools.fs import link_on_the_way, read_plain, resolves_inside

FILE_SIZE_LIMIT = 50 * 1024 * 1024  # the official checker's limit on any file of a tree
MAX_DEPTH = 32  # folders below a submitter folder; a real tree's deepest (compliance/.../TEST01/performance/run_1) is 8
LINK_RULE = "layout.link"


class Folder(NamedTuple):
    """One folder of a walk: its sub-folders and its files (neither includes a link: those are in `links`)."""

    path: Path
    dirs: list[str]
    files: list[str]
    links: list[str]


def walk(top: Path, root: Path, problems: list[Problem]) -> Iterator[Folder]:
    """Every folder under `top` (itself included), top-down in name order, entering no link; a folder deeper than
    MAX_DEPTH below `top`, or one that cannot be listed, is a finding and is not entered."""
    todo: list[tuple[Path, int]] = [(top, 0)]
    while todo:
        folder, depth = todo.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            problems.append(Problem(relative(folder, root), "layout.hygiene",
                                    f"cannot be listed ({clip(exc.strerror or exc)})", "fix its permissions or "
                                    "remove it"))
            continue
        dirs = [e.name for e in entries if not e.is_symlink() and e.is_dir(follow_symlinks=False)]
        links = [e.name for e in entries if e.is_symlink()]
        files = [e.name for e in entries if e.name not in dirs and e.name not in links]
        yield Folder(folder, dirs, files, links)
        if dirs and depth >= MAX_DEPTH:
            problems.append(Problem(relative(folder, root), "layout.hygiene",
                                    f"folders nested more than {MAX_DEPTH} deep; cmx looked no further",
                                    "flatten it: nothing in a submission is that deep"))
            continue
        todo += [(folder / name, depth + 1) for name in reversed(dirs)]  # popped in name order


def link_problem(link: Path, root: Path, *, required: bool = False) -> Problem:
    """The finding for symbolic link `link` of the tree at `root`."""
    where, target = relative(link, root), clip(os.readlink(link))
    if not resolves_inside(link, root):
        return Problem(where, LINK_RULE, f"a symbolic link to {target!r}, outside the tree; cmx did not follow it",
                       "copy what it points at into the tree (tar would carry the link, not the file), or remove it")
    if not link.exists():
        return Problem(where, LINK_RULE, f"a broken symbolic link (to {target!r})", "remove it or copy the file in")
    if required:
        return Problem(where, LINK_RULE, f"a symbolic link (to {target!r}) where the checker reads a file; cmx "
                                         "reads none through a link", "copy the file in, in place of the link")
    return Problem(where, LINK_RULE, f"a symbolic link (to {target!r})",
                   "put what it points at in its place, or remove it: tar carries the link, not its target", WARNING)


def refused_link(path: Path, root: Path, problems: list[Problem]) -> bool:
    """Whether `path`, which a rule must read, is reached through a symbolic link; if so, that link is reported as
    required (an error) and the caller reads nothing there."""
    link = link_on_the_way(path, root)
    if link is None:
        return False
    problems.append(link_problem(link, root, required=True))
    return True


def one_finding_per_link(problems: list[Problem]) -> list[Problem]:
    """The walk reports every link and a rule that needed one reports it again, as required: keep the first error
    for each link (else its warning), in its place."""
    keep: dict[str, Problem] = {}
    for p in problems:
        if p.rule == LINK_RULE and (p.path not in keep or (keep[p.path].severity == WARNING != p.severity)):
            keep[p.path] = p
    seen: set[str] = set()
    out = []
    for p in problems:
        if p.rule != LINK_RULE:
            out.append(p)
        elif p.path not in seen:
            seen.add(p.path)
            out.append(keep[p.path])
    return out


def regular_file(path: Path) -> bool:
    """A plain file (not a link, not a folder) at `path`."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def read_text(path: Path, limit: int = FILE_SIZE_LIMIT) -> str | None:
    """The text of plain file `path`, or None when it is a link, not a plain file, or over `limit` bytes (the
    hygiene walk reports each of those): a read never follows a link nor holds more than `limit` bytes."""
    data = read_plain(path, limit)
    return None if data is None else data.decode("utf-8", errors="replace")
