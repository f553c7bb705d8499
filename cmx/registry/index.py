"""The persistent recipe index: tags -> recipes, parsed recipes kept as pickles, checked by stat only.

A warm lookup stats each recipe's files and re-parses only those that changed. The index
is two files: a small one (names, tags, summaries, file stamps, the tag map) that every
command reads, and one of pickled Recipes that is read only when a recipe itself is needed,
so `cmx find` over 1,000 recipes reads ~100 KB and does no YAML work.
"""

from __future__ import annotations

import os
import pickle
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from cmx import __version__
from cmx.errors import CmxError, RegistryError
from cmx.recipe.load import FileStamp, stamp_files
from cmx.recipe.query import Query
from cmx.registry.compat import SOURCE_FILE, check_compatible
from cmx.registry.sources import Source
from cmx.settings import Settings

if TYPE_CHECKING:  # unpickling a recipe imports the model; `cmx find` needs none
    from cmx.recipe.model import Recipe

Fetcher = Callable[[Source], None]  # called before a git source is fetched, to say so

INDEX_FORMAT = 5  # 5: Source gained `branch` and `builtin`; the index keeps the compat files that passed
_RECIPE_CODE = Path(__file__).resolve().parent.parent / "recipe"


class RecipeInfo(NamedTuple):
    """What the index knows without unpickling a recipe: enough for `cmx find`."""

    name: str
    tags: tuple[str, ...]
    summary: str
    source: str
    folder: Path


# what one recipe costs in the small file: (name, tags, summary, source, stamps of its files)
_Entry = tuple[str, tuple[str, ...], str, str, tuple[FileStamp, ...]]


class RecipeIndex:
    """All recipes of a registry, searchable by tags; implements resolve's RecipeProvider."""

    def __init__(self, sources: tuple[Source, ...], entries: dict[str, _Entry], blobs_file: Path | None,
                 generation: str = "", blobs: dict[str, bytes] | None = None,
                 by_tag: dict[str, list[str]] | None = None, registry: Path | None = None,
                 roots: tuple[Path, ...] = ()) -> None:
        self.sources = sources
        self.registry = registry  # the registry file, and the recipe folders of its sources, for `stamps`
        self.roots = roots
        self._by_folder = entries
        self._blobs_file = blobs_file
        self._generation = generation
        self._blobs = blobs  # folder -> pickled Recipe; read from _blobs_file on first get()
        self.by_tag = by_tag if by_tag is not None else _tag_map(entries)
        self._by_name: dict[str, str] = {}
        for folder, entry in entries.items():
            other = self._by_name.get(entry[0])
            if other is not None:
                raise RegistryError(f"two recipes are named {entry[0]!r}: {other} and {folder}",
                                    hint="rename one of them; names are unique across all sources")
            self._by_name[entry[0]] = folder
        self._loaded: dict[str, Recipe] = {}

    def __len__(self) -> int:
        return len(self._by_name)

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def info(self, name: str) -> RecipeInfo | None:
        folder = self._by_name.get(name)
        if folder is None:
            return None
        entry = self._by_folder[folder]
        return RecipeInfo(entry[0], entry[1], entry[2], entry[3], Path(folder))

    def infos(self) -> list[RecipeInfo]:
        return [info for n in self.names() if (info := self.info(n)) is not None]  # every name has its info

    def all_tags(self) -> set[str]:
        return set(self.by_tag)

    def find(self, query: Query) -> list[RecipeInfo]:
        """Recipes that carry all of the query's tags (a name counts as a tag) and none excluded."""
        folders: set[str] | None = None
        for tag in sorted(query.tags, key=lambda t: len(self.by_tag.get(t, ()))):  # rarest tag first
            carrying = self.by_tag.get(tag)
            if not carrying:
                return []
            folders = set(carrying) if folders is None else folders.intersection(carrying)
        for tag in query.exclude:
            # a parsed query has at least one tag (parse_query refuses none): the loop above set `folders`
            folders.difference_update(self.by_tag.get(tag, ()))  # type: ignore[union-attr]  # (above)
        found = [RecipeInfo(e[0], e[1], e[2], e[3], Path(f)) for f in folders or () for e in (self._by_folder[f],)]
        return sorted(found, key=lambda i: i.name)

    def get(self, name: str) -> Recipe:
        recipe = self._loaded.get(name)
        if recipe is None:
            folder = self._by_name.get(name)
            if folder is None:
                raise KeyError(name)
            blob = self.blobs().get(folder)
            if blob is not None:
                recipe = pickle.loads(blob)
            else:  # the recipes file is from another generation (a concurrent refresh): parse it
                from cmx.recipe.load import load_recipe

                recipe = load_recipe(Path(folder), self._by_folder[folder][3])[0]
            self._loaded[name] = recipe
        return recipe

    def stamps(self, whole: set[str]) -> list[FileStamp]:
        """(path, st_mtime_ns, st_size) of what a resolution read: the registry file; each source's folder and
        each of its subfolders that holds no recipe (adding a recipe changes one of them); every recipe.yaml
        (tags and names decide what a query finds); and every file of the recipes named in `whole` (their
        digests enter cache keys), their bases' files included (../BASE/run.py). A missing file is (path, 0, -1),
        as stamp_files has it."""
        out: list[FileStamp] = []
        if self.registry is not None:
            out.append(_stamp(self.registry))
        for root in self.roots:
            out += [_stamp(root), _stamp_or_missing(root / SOURCE_FILE)]
            out += [_stamp(Path(folder)) for folder in _recipe_folders(root) if folder not in self._by_folder]
        for folder, entry in self._by_folder.items():
            files = entry[4] if entry[0] in whole else entry[4][:1]  # stamp_files puts recipe.yaml first
            out += [(f"{folder}/{name}", mtime, size) for name, mtime, size in files]
        return out

    def blobs(self) -> dict[str, bytes]:
        if self._blobs is None:
            data = _read_pickle(self._blobs_file) if self._blobs_file else None
            self._blobs = data["blobs"] if data is not None and data.get("generation") == self._generation else {}
        return self._blobs


def open_index(settings: Settings, *, fetch: Fetcher | None = None) -> RecipeIndex:
    """Load the index for `settings.registry`, refreshing whatever changed on disk.

    A git source missing from the cache is fetched (at its pinned commit) only when `fetch` is given: it is
    called with the source first, so the fetch is said aloud. Without it (`cmx find`, `show`, `plan`: resolution
    never touches the network) a missing source is an error naming the command that fetches it.
    """
    # one index per registry file; crc32 keeps hashlib (and OpenSSL) out of start-up
    stem = f"{settings.registry.stem}-{zlib.crc32(str(settings.registry).encode()):08x}"
    index_file = settings.index_dir / f"{stem}.pickle"
    blobs_file = settings.index_dir / f"{stem}.recipes.pickle"
    try:
        reg_stamp = _stamp(settings.registry)
    except FileNotFoundError:
        from cmx.registry.sources import read_registry

        read_registry(settings.registry)  # raises the helpful "does not exist" error
        raise
    code_stamp = _code_stamp()
    old = _read_pickle(index_file)
    if old is None or \
            (old.get("format"), old.get("cmx"), old.get("code")) != (INDEX_FORMAT, __version__, code_stamp):
        old = None
    if old is not None and old.get("registry") == reg_stamp:
        sources = old["sources"]
    else:
        from cmx.registry.sources import read_registry

        sources = read_registry(settings.registry)
    old_entries: dict[str, _Entry] = old["entries"] if old else {}

    entries: dict[str, _Entry] = {}
    stale: list[tuple[str, str]] = []  # (folder, source) to parse
    roots: list[Path] = []
    passed: dict[str, FileStamp] = {}  # each source's cmx-source.yaml that said this cmx suits it
    for source in sources:
        root = _source_root(source, settings, fetch)
        roots.append(root)
        passed[str(root)] = _compatible(source, root, old.get("compat", {}) if old else {})
        for folder in _recipe_folders(root):
            prev = old_entries.get(folder)
            if prev is not None and stamp_files(folder, tuple(s[0] for s in prev[4])) == prev[4]:
                entries[folder] = prev
            else:
                stale.append((folder, source.name))
    parsed = _parse_all(stale)
    changed = old is None or old.get("registry") != reg_stamp or bool(parsed) or set(entries) != set(old_entries) \
        or old.get("compat") != passed
    if not changed and old is not None:  # (not changed implies an old index)
        return RecipeIndex(sources, entries, blobs_file, old["generation"], by_tag=old.get("by_tag"),
                           registry=settings.registry, roots=tuple(roots))

    blobs: dict[str, bytes] = {}
    if old is not None and entries:  # carry the unchanged recipes over from the previous generation
        blobs = RecipeIndex(sources, {}, blobs_file, old["generation"]).blobs()
    for folder, (entry, blob) in parsed.items():
        entries[folder] = entry
        blobs[folder] = blob
    blobs = {folder: blobs[folder] for folder in entries if folder in blobs}
    generation = os.urandom(8).hex()
    index = RecipeIndex(sources, entries, blobs_file, generation, blobs, registry=settings.registry,
                        roots=tuple(roots))
    # the recipes file first: a reader that sees the new small file finds its generation
    _write_pickle(blobs_file, {"generation": generation, "blobs": blobs})
    _write_pickle(index_file, {"format": INDEX_FORMAT, "cmx": __version__, "code": code_stamp,
                               "registry": reg_stamp, "sources": sources, "entries": entries,
                               "by_tag": index.by_tag, "generation": generation, "compat": passed})
    return index


def _tag_map(entries: dict[str, _Entry]) -> dict[str, list[str]]:
    """tag -> folders of the recipes carrying it; a recipe's name counts as one of its tags. An abstract recipe
    (a base others extend: the only kind with no tags) is left out, name and all: no query selects it."""
    by_tag: dict[str, list[str]] = {}
    for folder, entry in entries.items():
        for tag in {*entry[1], entry[0]} if entry[1] else ():
            by_tag.setdefault(tag, []).append(folder)
    return by_tag


PARALLEL_FROM = 64  # below this many recipes to parse, worker processes cost more than they save


def _parse_all(stale: list[tuple[str, str]]) -> dict[str, tuple[_Entry, bytes]]:
    """Parse new or changed recipes; many at once (a cold index) in worker processes.

    Workers are forked only from a single-threaded process (forking a threaded one can
    deadlock); the first error, in folder order, is raised as it would be sequentially.
    """
    import threading

    workers = min(os.cpu_count() or 1, 8)
    if len(stale) < PARALLEL_FROM or workers < 2 or threading.active_count() > 1 or os.name != "posix":
        chunk = _parse_chunk(stale)
        errors = [err for _, err in chunk if isinstance(err, BaseException)]
        if errors:
            raise errors[0]
        return {folder: entry for folder, entry in chunk if isinstance(entry, tuple)}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import cmx.recipe.load  # noqa: F401 - imported before forking, so that workers inherit YAML and all

    chunks = [stale[i::workers] for i in range(workers)]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        results = list(pool.map(_parse_chunk, chunks))
    failures = sorted((folder, err) for chunk in results for folder, err in chunk if isinstance(err, BaseException))
    if failures:
        raise failures[0][1]
    return {folder: entry for chunk in results for folder, entry in chunk if isinstance(entry, tuple)}


def _parse_chunk(chunk: list[tuple[str, str]]) -> list[tuple[str, tuple[_Entry, bytes] | BaseException | None]]:
    out: list[tuple[str, tuple[_Entry, bytes] | BaseException | None]] = []
    for folder, source in chunk:
        try:
            out.append((folder, _parse(folder, source)))
        except CmxError as exc:
            out.append((folder, exc))
    return out


def _parse(folder: str, source: str) -> tuple[_Entry, bytes] | None:
    from cmx.recipe.load import (
        load_recipe,  # YAML and validation only for new or changed recipes
        refuse_links_out,
    )

    refuse_links_out(Path(folder))  # before "is it a recipe": a dangling link to one is refused, not skipped
    if not os.path.isfile(f"{folder}/recipe.yaml"):
        return None

    recipe, stamps = load_recipe(Path(folder), source)
    return ((recipe.name, recipe.tags, recipe.summary, source, stamps),
            pickle.dumps(recipe, protocol=pickle.HIGHEST_PROTOCOL))


def _source_root(source: Source, settings: Settings, fetch: Fetcher | None) -> Path:
    if source.git is not None:
        checkout = source.checkout_dir(settings.sources_dir)
        if not (checkout / ".git").is_dir():
            if fetch is None:
                raise RegistryError(f"git source {source.name!r} is not fetched yet",
                                    where=f"{settings.registry}:{source.line}",
                                    hint=f"fetch it with `cmx registry fetch {source.name}` (the first `cmx run` "
                                         "fetches it too, and says so)")
            fetch(source)
            from cmx.tools.git import checkout_commit

            try:
                checkout_commit(source.git, source.rev or "", checkout)
            except CmxError as exc:
                raise RegistryError(f"source {source.name!r}: {exc.message}",
                                    where=f"{settings.registry}:{source.line}", hint=exc.hint) from None
        if (checkout / source.subdir).is_dir():  # a missing one is said below; one that leaves the checkout, here
            from cmx.tools.git import inside

            try:
                inside(checkout, source.subdir, what=f"{source.git} at {source.rev}")
            except CmxError as exc:
                raise RegistryError(f"source {source.name!r}: {exc.message}",
                                    where=f"{settings.registry}:{source.line}", hint=exc.hint) from None
    root = source.recipes_dir(settings.sources_dir)
    if not root.is_dir():
        raise RegistryError(f"recipe folder {root} of source {source.name!r} does not exist",
                            hint="fix `path` (or `subdir`) in the registry file")
    return root


def _compatible(source: Source, root: Path, seen: dict[str, FileStamp]) -> FileStamp:
    """The stamp of `root`'s cmx-source.yaml, once it says this cmx suits the source (RegistryError otherwise). A file
    whose stamp passed before is not read again; a missing one is nothing to read."""
    stamp = _stamp_or_missing(root / SOURCE_FILE)
    if stamp[2] != -1 and seen.get(str(root)) != stamp:
        check_compatible(source.name, root, git=source.git is not None)
    return stamp


def _recipe_folders(root: Path) -> Iterable[str]:
    with os.scandir(root) as it:
        # a link is listed whatever it points at: parsing refuses one that leaves the source or dangles
        return sorted(e.path for e in it if (e.is_dir() or e.is_symlink()) and not e.name.startswith((".", "_")))


def _stamp(path: Path) -> FileStamp:
    st = os.stat(path)
    return (str(path), st.st_mtime_ns, st.st_size)


def _stamp_or_missing(path: Path) -> FileStamp:
    try:
        return _stamp(path)
    except FileNotFoundError:
        return (str(path), 0, -1)  # as stamp_files has a missing file


def _code_stamp() -> tuple[tuple[str, int, int], ...]:
    """The index holds pickled Recipe objects: rebuild it when the code that makes them changes."""
    with os.scandir(_RECIPE_CODE) as it:
        return tuple(sorted((e.name, e.stat().st_mtime_ns, e.stat().st_size) for e in it if e.name.endswith(".py")))


def _read_pickle(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as f:
            data = pickle.load(f)
        return data if isinstance(data, dict) else None
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - unpickling an index from another version or a torn write raises
        # anything (ImportError, AttributeError, EOFError, UnpicklingError...): rebuild it
        return None


def _write_pickle(path: Path, data: dict[str, object]) -> None:
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".index-", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            pickle.dump(data, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; a cache may be shared by a team
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache still works, only slower

