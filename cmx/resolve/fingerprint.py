"""Facts of the machine that enter cache keys (fingerprints, path inputs): stat calls and environment
reads only, no subprocess.

Imports nothing but os and sys: a cached `cmx run` answered from its memo (cmx.execute.memo)
takes every one of these facts again before it trusts the memo.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing itself costs ~8 ms to import; type checkers read this name as typing's
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from cmx.recipe.model import Fingerprint


def take(fp: Fingerprint, environ: Mapping[str, str]) -> dict[str, Any]:
    """The facts `fp` names, as JSON-friendly data for a key. Cheap: a few stat calls."""
    return facts(fp.files, fp.programs, fp.env, fp.machine, environ)


def facts(files: tuple[str, ...], programs: tuple[str, ...], env: tuple[str, ...], machine: bool,
          environ: Mapping[str, str]) -> dict[str, Any]:
    """`take` on a fingerprint's fields."""
    out: dict[str, Any] = {}
    if files:
        out["files"] = {path: _stat(path) for path in files}
    if programs:
        search = environ.get("PATH", os.defpath)
        out["programs"] = {}
        for name in programs:
            found = which(name, search)
            stat = _stat(found) if found else None  # None too when it vanished since `which` saw it
            out["programs"][name] = [found, *stat] if found and stat is not None else None
    if env:
        out["env"] = {name: environ.get(name) for name in env}
    if machine:
        uname = os.uname()
        out["machine"] = {"system": uname.sysname, "release": uname.release, "version": uname.version,
                          "arch": uname.machine, "host": uname.nodename, "cpus": os.cpu_count(),
                          "memory": _memory_bytes(),
                          # the interpreter running cmx: a detection that reports it must re-run in another venv
                          "python": [sys.executable, sys.version]}
    return out


def path_facts(path: str) -> list[Any]:
    """What a path input is keyed by: its path, size and mtime; a folder also by the sorted (name, size,
    mtime) of its entries, one level down. [path, None, None] when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return [str(path), None, None]
    facts: list[Any] = [str(path), st.st_size, st.st_mtime_ns]
    if os.path.isdir(path):
        entries: list[tuple[str, int | None, int | None]] = []
        with os.scandir(path) as it:
            for entry in it:
                try:
                    est = entry.stat()
                    entries.append((entry.name, est.st_size, est.st_mtime_ns))
                except OSError:
                    entries.append((entry.name, None, None))
        facts.append(sorted(entries))
    return facts


def which(name: str, search: str) -> str | None:
    """shutil.which(name, path=search) on POSIX, without shutil's imports (fnmatch, re)."""
    if os.path.dirname(name):
        return name if _runnable(name) else None
    if not search:  # PATH='' finds nothing; PATH=':' looks in the current folder
        return None
    seen: set[str] = set()
    for folder in search.split(os.pathsep):
        if folder in seen:
            continue
        seen.add(folder)
        path = os.path.join(folder, name)
        if _runnable(path):
            return path
    return None


def _runnable(path: str) -> bool:
    return os.path.exists(path) and os.access(path, os.F_OK | os.X_OK) and not os.path.isdir(path)


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
