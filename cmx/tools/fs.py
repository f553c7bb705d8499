"""File-system helpers the tools share."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import NamedTuple


def sha256_file(path: Path | str) -> str:
    """The sha256 of the file at `path`, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def temp_dir_beside(dest: Path) -> Path:
    """A new empty folder beside `dest` (same file system, so renaming it into place is atomic).

    os.mkdir rather than mkdtemp: what is renamed into place keeps the default mode, not 0700.
    """
    import secrets  # imported here: cmx.tools.git is on every command's import path

    dest.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = dest.parent / f".tmp-{dest.name}-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            tmp.mkdir()
            return tmp
        except FileExistsError:
            continue


def resolves_inside(path: Path, root: Path) -> bool:
    """Whether `path`, every symbolic link on its way followed, lands inside `root` (whose own links are followed
    too). realpath rather than Path.resolve: a link loop gives a path here, not a RuntimeError."""
    real_root = Path(os.path.realpath(root))
    return Path(os.path.realpath(path)).is_relative_to(real_root)


def link_on_the_way(path: Path, root: Path) -> Path | None:
    """The first symbolic link from `root` down to `path` (itself included), or None. `path` is inside `root`."""
    here = root
    for part in path.relative_to(root).parts:
        here = here / part
        if here.is_symlink():
            return here
        if not os.path.lexists(here):
            return None
    return None


def read_plain(path: Path, limit: int) -> bytes | None:
    """The bytes of plain file `path`, or None when it is a symbolic link, not a plain file, or over `limit` bytes:
    a read of a file someone else made never follows a link (O_NOFOLLOW, so not one put in its place after a check
    either) nor holds more than `limit` bytes."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        data = f.read(limit + 1)
    return None if len(data) > limit else data


class LinkOut(NamedTuple):
    """A symbolic link on the way to a file that leaves the folder it must stay in, or points at nothing."""

    link: Path      # the link itself, as reached from the root
    target: str     # where it points, as written in the link
    dangling: bool  # its target (inside the root) does not exist


def link_out(root: Path, rel: str | Path) -> LinkOut | None:
    """The first symbolic link on the way from `root` down to `root/rel` (the last part included) that leaves `root`
    or points at nothing; None when every part is a plain entry or a link that stays inside. A missing plain part
    ends the walk: what is not there cannot lead anywhere."""
    path = root
    for part in Path(rel).parts:
        path = path / part
        if not path.is_symlink():
            if not os.path.lexists(path):
                return None
            continue
        target = os.readlink(path)
        if not resolves_inside(path, root):
            return LinkOut(path, target, dangling=False)
        if not path.exists():
            return LinkOut(path, target, dangling=True)
    return None
