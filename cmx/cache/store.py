"""The content-addressed store of step outputs: cache/<recipe>/<key>/ with meta.json.

An entry is built in a temporary folder beside its final place and published with one
atomic rename, under a per-key file lock that is re-checked after it is taken: a crash never
leaves a half entry that looks complete, and two processes that need one entry build it once.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cmx.errors import CacheError

META = "meta.json"
TMP_PREFIX = ".tmp-"
SCRATCH_PREFIX = ".scratch-"
LOCK_SUFFIX = ".lock"
_README = """\
# cmx cache

Owned by cmx: one folder per step output, `<recipe>/<key>/`, keyed by a sha256 of what
made it (recipe files, variations, inputs, context, deps). Each entry has a meta.json
listing its inputs, outputs and the sha256 of every file.

Manage it with `cmx cache ls | show | rm | gc | verify`; deleting folders by hand is safe
too. Folders starting with '.' hold the recipe index, fetched recipe sources and builds in
progress.
"""


@dataclass(frozen=True)
class EntryMeta:
    """An entry's meta.json: what made it (recipe, variations, public inputs, context, deps' keys) and what it
    holds (outputs, and the sha256 and total size of its files, which the store fills in when it publishes)."""

    recipe: str
    key: str
    variations: tuple[str, ...] = ()
    inputs: dict[str, Any] = field(default_factory=dict)    # as JSON, secrets left out
    context: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)   # as JSON; stored with paths relative to the entry
    deps: dict[str, str] = field(default_factory=dict)      # the name a dep is read by -> its key
    created: str = ""                                       # ISO 8601, UTC
    duration: float = 0.0                                   # seconds the build took
    recipe_digest: str = ""
    files: dict[str, str] | None = None                     # relative path -> sha256; None in an unfinished meta
    size: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"variations": list(self.variations), "inputs": self.inputs, "context": self.context,
                "outputs": self.outputs, "deps": self.deps, "created": self.created, "duration": self.duration,
                "recipe_digest": self.recipe_digest, "recipe": self.recipe, "key": self.key, "files": self.files,
                "size": self.size}

    @classmethod
    def from_json(cls, data: dict[str, Any], recipe: str, key: str) -> EntryMeta:
        """The meta of a meta.json (an older one may lack fields: they read as empty)."""
        return cls(recipe=str(data.get("recipe", recipe)), key=str(data.get("key", key)),
                   variations=tuple(data.get("variations", ())), inputs=dict(data.get("inputs", {})),
                   context=dict(data.get("context", {})), outputs=dict(data.get("outputs", {})),
                   deps=dict(data.get("deps", {})), created=str(data.get("created", "")),
                   duration=float(data.get("duration", 0.0)), recipe_digest=str(data.get("recipe_digest", "")),
                   files=dict(data["files"]) if "files" in data else None, size=int(data.get("size", 0)))


@dataclass(frozen=True)
class Entry:
    recipe: str
    key: str
    path: Path
    meta: EntryMeta | None  # None when its meta.json cannot be read (`cmx cache verify` reports it)

    @property
    def outputs(self) -> dict[str, Any]:
        """Outputs with paths inside the entry made absolute again."""
        stored = self.meta.outputs if self.meta else {}
        return {name: _load_output(value, self.path) for name, value in stored.items()}

    @property
    def variations(self) -> tuple[str, ...]:
        return self.meta.variations if self.meta else ()

    @property
    def created(self) -> str:
        return self.meta.created if self.meta else ""

    @property
    def size(self) -> int:
        return self.meta.size if self.meta else 0


@dataclass(frozen=True)
class VerifyProblem:
    entry: Entry
    path: str
    problem: str  # "missing", "changed", "unexpected", "meta"


class Store:
    """The cache folder. Cheap to construct: touches the disk only when asked."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def entry_dir(self, recipe: str, key: str) -> Path:
        return self.root / recipe / key

    def has(self, recipe: str, key: str) -> bool:
        """Whether a published entry exists (meta.json is written before the publishing rename)."""
        return os.path.exists(f"{self.root}/{recipe}/{key}/{META}")

    def lookup(self, recipe: str, key: str) -> Entry | None:
        """The published entry, or None. Needs no lock: publishing is one atomic rename."""
        path = self.entry_dir(recipe, key)
        try:
            with open(path / META, encoding="utf-8") as f:
                meta = EntryMeta.from_json(json.load(f), recipe, key)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise CacheError(f"cache entry {path} has an unreadable meta.json ({exc})",
                             hint=f"remove it with `cmx cache rm {key[:12]}`; it will be rebuilt") from None
        return Entry(recipe, key, path, meta)

    @contextmanager
    def lock(self, recipe: str, key: str, timeout: float = -1) -> Iterator[None]:
        """Hold the build lock of one key (waits for another process that builds it)."""
        from filelock import (
            FileLock,  # costs ~40 ms to import: only when a build happens
        )

        folder = self._recipe_dir(recipe)
        self._write_readme()
        with FileLock(str(folder / f".{key}{LOCK_SUFFIX}"), timeout=timeout):
            yield

    def new_build_dir(self, recipe: str, key: str) -> Path:
        """A fresh temporary folder beside the entry; it becomes the entry on publish."""
        import tempfile

        folder = self._recipe_dir(recipe)
        return Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{key}-{os.getpid()}-", dir=folder))

    def scratch_dir(self, recipe: str, key: str) -> Path:
        """Where one key keeps files across a failed build (a partial download resumes from
        them): created by whoever uses it, removed when the entry is published, or by gc."""
        return self.root / recipe / f"{SCRATCH_PREFIX}{key}"

    def publish(self, build_dir: Path, meta: EntryMeta) -> Entry:
        """Hash the files, write meta.json (with the files' checksums and the outputs' paths made relative), and
        rename the build folder into place."""
        recipe, key = meta.recipe, meta.key
        files, size = hash_tree(build_dir)
        meta = replace(meta, files=files, size=size,
                       outputs={n: _store_output(v, build_dir) for n, v in meta.outputs.items()})
        with open(build_dir / META, "w", encoding="utf-8") as f:
            json.dump(meta.to_json(), f, indent=2)  # insertion order: outputs keep their declared order
        final = self.entry_dir(recipe, key)
        try:
            os.rename(build_dir, final)
        except OSError as exc:
            if final.is_dir():  # published by someone not holding our lock (a hand copy): keep theirs
                shutil.rmtree(build_dir, ignore_errors=True)
            else:
                raise CacheError(f"cannot publish cache entry {final}: {exc}") from None
        shutil.rmtree(final.parent / f"{SCRATCH_PREFIX}{key}", ignore_errors=True)
        return Entry(recipe, key, final, meta)

    def discard(self, build_dir: Path) -> None:
        shutil.rmtree(build_dir, ignore_errors=True)

    def entries(self) -> Iterator[Entry]:
        """Every published entry (skips the index, sources and builds in progress)."""
        if not self.root.is_dir():
            return
        for recipe_dir in sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            for entry_dir in sorted(p for p in recipe_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
                try:
                    entry = self.lookup(recipe_dir.name, entry_dir.name)
                except CacheError:
                    entry = Entry(recipe_dir.name, entry_dir.name, entry_dir, None)
                if entry is not None:
                    yield entry

    def find(self, key_prefix: str) -> list[Entry]:
        """Entries whose key starts with `key_prefix` (at least 4 characters)."""
        if len(key_prefix) < 4:
            raise CacheError(f"key prefix {key_prefix!r} is too short", hint="give at least 4 characters of the key")
        return [e for e in self.entries() if e.key.startswith(key_prefix)]

    def remove(self, entry: Entry) -> None:
        """Remove an entry: first rename it out of sight, then delete, so it never looks half there."""
        doomed = entry.path.with_name(f"{TMP_PREFIX}rm-{entry.key}-{os.getpid()}")
        os.rename(entry.path, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        lock = entry.path.parent / f".{entry.key}{LOCK_SUFFIX}"
        if not _lock_held(lock):
            lock.unlink(missing_ok=True)

    def gc(self, older_than_s: float | None = None, dry_run: bool = False) -> list[Path]:
        """Remove leftovers of killed builds and unused locks; with `older_than_s`, also
        entries created longer ago than that. Returns what was (or would be) removed."""
        import time

        removed: list[Path] = []
        if not self.root.is_dir():
            return removed
        now = time.time()
        for recipe_dir in sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            gone: set[Path] = set()
            for path in sorted(recipe_dir.iterdir()):
                name = path.name
                if name.startswith((TMP_PREFIX, SCRATCH_PREFIX)) and path.is_dir():
                    key = name.split("-", 2)[1] if name.startswith(TMP_PREFIX) else name[len(SCRATCH_PREFIX):]
                    if not _lock_held(recipe_dir / f".{key}{LOCK_SUFFIX}"):  # nobody builds it: a leftover
                        gone.add(path)
                elif older_than_s is not None and not name.startswith(".") and path.is_dir():
                    entry = self.lookup(recipe_dir.name, name)
                    if entry is not None and now - _created_ts(entry) > older_than_s:
                        gone.add(path)
                        if not dry_run:
                            self.remove(entry)
            for path in sorted(recipe_dir.glob(f".*{LOCK_SUFFIX}")):
                key = path.name[1:-len(LOCK_SUFFIX)]
                still_used = ((recipe_dir / key).exists() and (recipe_dir / key) not in gone) or any(
                    p not in gone for p in recipe_dir.glob(f"{TMP_PREFIX}{key}-*"))
                if not still_used and not _lock_held(path):
                    gone.add(path)
            for path in sorted(gone):
                removed.append(path)
                if not dry_run and path.exists():
                    shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
            if not dry_run and not any(recipe_dir.iterdir()):
                recipe_dir.rmdir()
        return removed

    def verify(self, entry: Entry) -> list[VerifyProblem]:
        """Re-hash the entry's files against meta.json."""
        if entry.meta is None or entry.meta.files is None:
            return [VerifyProblem(entry, META, "meta")]
        expected = entry.meta.files
        actual, _ = hash_tree(entry.path, skip=(META,))
        problems = [VerifyProblem(entry, p, "missing") for p in expected if p not in actual]
        problems += [VerifyProblem(entry, p, "changed") for p in expected if p in actual and actual[p] != expected[p]]
        problems += [VerifyProblem(entry, p, "unexpected") for p in actual if p not in expected]
        return problems

    def _recipe_dir(self, recipe: str) -> Path:
        folder = self.root / recipe
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(f"cannot create cache folder {folder}: {exc.strerror or exc}",
                             hint="point CMX_CACHE (or CMX_HOME) at a writable folder") from None
        return folder

    def _write_readme(self) -> None:
        readme = self.root / "README.md"
        if not readme.exists():
            with contextlib.suppress(OSError):
                readme.write_text(_README, encoding="utf-8")


def _lock_held(path: Path) -> bool:
    """Whether another process holds this build lock (a missing lock file is not held; checking
    never creates one)."""
    if not path.exists():
        return False
    from filelock import FileLock, Timeout

    try:
        with FileLock(str(path), timeout=0):
            return False
    except Timeout:
        return True


def hash_tree(root: Path, skip: tuple[str, ...] = (META,)) -> tuple[dict[str, str], int]:
    """sha256 of every file under `root` (relative posix paths), and their total size.

    A symbolic link is recorded by its target, never followed.
    """
    import hashlib

    files: dict[str, str] = {}
    size = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames) + sorted(d for d in dirnames if os.path.islink(os.path.join(dirpath, d))):
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if rel in skip:
                continue
            if os.path.islink(full):
                files[rel] = "symlink:" + os.readlink(full)
                continue
            h = hashlib.sha256()
            with open(full, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
                    size += len(chunk)
            files[rel] = h.hexdigest()
    return files, size


def _store_output(value: Any, build_dir: Path) -> Any:
    """Paths inside the build folder are stored relative to the entry (it is renamed), also
    inside list and dict outputs."""
    if isinstance(value, list):
        return [_store_output(v, build_dir) for v in value]
    if isinstance(value, dict):
        return {k: _store_output(v, build_dir) for k, v in value.items()}
    if isinstance(value, str) and value.startswith(str(build_dir)):
        rel = os.path.relpath(value, build_dir)
        if not rel.startswith(".."):
            return {"entry_path": rel.replace(os.sep, "/")}
    return value


def _load_output(value: Any, entry_dir: Path) -> Any:
    if isinstance(value, dict) and set(value) == {"entry_path"}:
        rel = value["entry_path"]
        return str(entry_dir if rel == "." else entry_dir / rel)
    if isinstance(value, list):
        return [_load_output(v, entry_dir) for v in value]
    if isinstance(value, dict):
        return {k: _load_output(v, entry_dir) for k, v in value.items()}
    return value


def _created_ts(entry: Entry) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(entry.created).timestamp()
    except ValueError:
        return (entry.path / META).stat().st_mtime


def now_iso() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="seconds")
