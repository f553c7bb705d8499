"""The Python API the CLI calls: find(), show(), plan(), run(), check(), and the cache and registry verbs.

    import cmx.api
    result = cmx.api.run("detect system", inputs={"verbose": True}, jobs=2)
    print(result.outputs)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple

from cmx.errors import CacheError, QueryError
from cmx.recipe.query import Query, having_variations, query_of
from cmx.registry.index import RecipeIndex, RecipeInfo, open_index
from cmx.settings import Settings, load_settings

if TYPE_CHECKING:  # imported where used, so `cmx find` loads neither the runner nor the cache
    from cmx.cache.store import Entry, VerifyProblem
    from cmx.execute.progress import Reporter
    from cmx.execute.result import RunResult
    from cmx.mlperf.check import CheckReport
    from cmx.recipe.model import Recipe
    from cmx.registry.sources import Source
    from cmx.resolve.plan import Plan


class PlanResult(NamedTuple):
    plan: "Plan"
    cached: dict[str, bool]  # step id -> an entry for its key exists in the cache

    def to_json(self) -> dict[str, Any]:
        return self.plan.to_json(self.cached)


class SourceInfo(NamedTuple):
    source: "Source"
    recipes: int


def _settings(settings: Settings | None) -> Settings:
    return settings or load_settings()


def index(settings: Settings | None = None) -> RecipeIndex:
    return open_index(_settings(settings))


def find(query: str | Query | None = None, *, settings: Settings | None = None) -> list[RecipeInfo]:
    """Recipes matching the query's tags (all recipes when no query); `_variation` words
    keep only recipes that have that variation."""
    idx = index(settings)
    if not query:
        return idx.infos()
    q = query_of(query)
    return having_variations(idx.find(q), q.variations, idx.get)


def show(name: str, *, settings: Settings | None = None) -> "Recipe":
    """One recipe by name (or by a query that matches exactly one recipe)."""
    idx = index(settings)
    if name in idx.names():
        return idx.get(name)
    found = idx.find(query_of(name))
    if len(found) == 1:
        return idx.get(found[0].name)
    if not found:
        import difflib

        close = difflib.get_close_matches(name, idx.names(), n=3)
        raise QueryError(f"no recipe named {name!r}", hint=f"did you mean {', '.join(close)}?" if close
                         else "`cmx find` lists recipes")
    raise QueryError(f"{name!r} matches {len(found)} recipes: {', '.join(i.name for i in found)}",
                     hint="give the recipe's name")


def plan(query: str | Query, *, inputs: Mapping[str, Any] | None = None, context: Mapping[str, Any] | None = None,
         settings: Settings | None = None, environ: Mapping[str, str] | None = None) -> PlanResult:
    """Resolve a query into a Plan and say which steps are already in the cache."""
    from cmx.cache.store import Store
    from cmx.resolve.resolver import resolve

    s = _settings(settings)
    p = resolve(index(s), query, inputs=inputs, context=context, environ=environ)
    store = Store(s.cache)
    cached = {step.id: step.cacheable and store.has(step.name, step.key) for step in p}
    return PlanResult(p, cached)


def run(query: str | Query, *, inputs: Mapping[str, Any] | None = None, context: Mapping[str, Any] | None = None,
        jobs: int = 1, settings: Settings | None = None, reporter: "Reporter | None" = None,
        environ: Mapping[str, str] | None = None, check: bool = True, argv: list[str] | None = None,
        rerun_prefix: str = "cmx run", install_missing: bool | None = None) -> "RunResult":
    """Resolve and run a query. With `check` (the default) a failed step raises StepFailed;
    otherwise the RunResult carries it in `.error`. `install_missing` lets steps install what
    they lack (Python packages); by default it follows CMX_INSTALL_MISSING=1."""
    from cmx.cache.store import Store
    from cmx.execute.runner import Runner
    from cmx.resolve.resolver import resolve

    s = _settings(settings)
    p = resolve(index(s), query, inputs=inputs, context=context, environ=environ)
    env = os.environ if environ is None else environ
    if install_missing is None:
        install_missing = env.get("CMX_INSTALL_MISSING", "").lower() in ("1", "true", "yes")
    runner = Runner(Store(s.cache), s.runs, jobs=jobs, reporter=reporter, rerun_prefix=rerun_prefix,
                    install_missing=install_missing)
    result = runner.run(p, argv=argv)
    if check and result.error is not None:
        raise result.error
    return result


# --- cache -----------------------------------------------------------------------------------

def cache_entries(query: str | None = None, *, settings: Settings | None = None) -> list["Entry"]:
    """Entries in the cache, all or those of recipes matching `query`; `_x` words keep only
    entries built with variation x."""
    from cmx.cache.store import Store

    s = _settings(settings)
    entries = list(Store(s.cache).entries())
    if query:
        q = query_of(query)
        names = {i.name for i in index(s).find(q)}
        entries = [e for e in entries if e.recipe in names
                   and all(v in e.meta.get("variations", ()) for v in q.variations)]
    return entries


def cache_select(key_or_query: str, *, settings: Settings | None = None) -> list["Entry"]:
    """Entries whose key starts with the argument; failing that, entries of matching recipes."""
    from cmx.cache.store import Store

    s = _settings(settings)
    store = Store(s.cache)
    if len(key_or_query) >= 4 and all(c in "0123456789abcdef" for c in key_or_query):
        found = store.find(key_or_query)
        if found:
            return found
    try:
        found = cache_entries(key_or_query, settings=s)
    except QueryError:
        found = []
    if not found:
        raise CacheError(f"no cache entry matches {key_or_query!r} (as a key prefix or a query)",
                         hint="`cmx cache ls` lists entries and keys")
    return found


def cache_remove(entries: list["Entry"], *, settings: Settings | None = None) -> None:
    from cmx.cache.store import Store

    store = Store(_settings(settings).cache)
    for entry in entries:
        store.remove(entry)


def cache_gc(older_than_days: float | None = None, *, dry_run: bool = False,
             settings: Settings | None = None) -> list[Path]:
    from cmx.cache.store import Store

    seconds = older_than_days * 86400 if older_than_days is not None else None
    return Store(_settings(settings).cache).gc(seconds, dry_run=dry_run)


def cache_verify(key: str | None = None, *, remove: bool = False,
                 settings: Settings | None = None) -> tuple[list["Entry"], list["VerifyProblem"]]:
    """Re-hash entries (one or all); with `remove`, delete the corrupted ones."""
    from cmx.cache.store import Store

    s = _settings(settings)
    store = Store(s.cache)
    entries = store.find(key) if key else list(store.entries())
    if key and not entries:
        raise CacheError(f"no cache entry has a key starting with {key!r}", hint="`cmx cache ls` lists keys")
    problems = [p for e in entries for p in store.verify(e)]
    if remove:
        for entry in {id(p.entry): p.entry for p in problems}.values():
            store.remove(entry)
    return entries, problems


# --- registry --------------------------------------------------------------------------------

def registry_sources(settings: Settings | None = None) -> list[SourceInfo]:
    idx = index(settings)
    counts: dict[str, int] = {}
    for info in idx.infos():
        counts[info.source] = counts.get(info.source, 0) + 1
    return [SourceInfo(src, counts.get(src.name, 0)) for src in idx.sources]


def registry_update(name: str, rev: str, *, settings: Settings | None = None) -> Source:
    """Pin git source `name` to commit `rev`: fetch it first, then edit registry.yaml."""
    from cmx.errors import RegistryError
    from cmx.registry.sources import read_registry, update_rev
    from cmx.tools.git import checkout_commit

    s = _settings(settings)
    current = next((x for x in read_registry(s.registry, repairing=name) if x.name == name), None)
    if current is not None and current.git is not None:
        candidate = current._replace(rev=rev)
        try:
            checkout_commit(current.git, rev, candidate.checkout_dir(s.sources_dir))
        except Exception as exc:
            raise RegistryError(f"source {name!r}: {getattr(exc, 'message', exc)}", hint=getattr(exc, "hint", None)) \
                from None
    return update_rev(s.registry, name, rev)


def default_jobs() -> int:
    return max(1, min(4, os.cpu_count() or 1))


# --- MLPerf submissions ------------------------------------------------------------------------

def check(path: str | os.PathLike, *, round_name: str = "v6.0") -> "CheckReport":
    """Check a submission tree against a round's rules (cmx.mlperf.check); the report lists every problem."""
    from cmx.mlperf.check import check_tree

    return check_tree(Path(path), round_name)
