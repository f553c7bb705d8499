"""`cmx run` as a request: resolve, replay a lock when asked, run, and leave the run's lockfile and memo.

`RunRequest` is what is asked (the query and the options of `cmx run`); `Runtime` is where and how it runs
(the settings, the progress display, the environment, who announces a fetch). Both are frozen, so the same
pair can be handed to `cmx tune`, a sweep's points and the Python API alike.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.recipe.query import Query
from cmx.registry.index import Fetcher, open_index
from cmx.settings import Settings

if TYPE_CHECKING:
    from cmx.execute.lockfile import Lock
    from cmx.execute.progress import Reporter
    from cmx.execute.result import RunResult
    from cmx.execute.runner import Runner
    from cmx.recipe.model import Recipe
    from cmx.resolve.plan import Plan


@dataclass(frozen=True)
class RunRequest:
    """What `cmx run` is asked. With `check` a failed step raises StepFailed; otherwise the result carries it.
    `install_missing` None: CMX_INSTALL_MISSING=1 decides. `locked`: a lockfile to replay (the query is the
    lock's; `inputs` may only move outputs). `memo`: a cached root leaves a memo for the next same command."""

    query: str | Query
    inputs: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    jobs: int = 1
    check: bool = True
    argv: Sequence[str] | None = None
    rerun_prefix: str = "cmx run"
    install_missing: bool | None = None
    locked: str | os.PathLike[str] | None = None
    memo: bool = False


@dataclass(frozen=True)
class Runtime:
    """Where and how a request runs: the settings, the progress display (None: none), the environment inputs
    with `env:` read (None: os.environ), and what is called before a pinned git source is fetched (None: it
    is not fetched, and resolving names the command that fetches it)."""

    settings: Settings
    reporter: Reporter | None = None
    environ: Mapping[str, str] | None = None
    fetch: Fetcher | None = None

    @property
    def env(self) -> Mapping[str, str]:
        return os.environ if self.environ is None else self.environ

    def install_missing(self, asked: bool | None) -> bool:
        """What was asked, else CMX_INSTALL_MISSING=1."""
        if asked is not None:
            return asked
        return self.env.get("CMX_INSTALL_MISSING", "").lower() in ("1", "true", "yes")


def run(request: RunRequest, runtime: Runtime) -> RunResult:
    """Resolve and run the request; the run's result (see RunRequest for `check`, `locked` and `memo`). When the
    root step runs, the run's record gets its lockfile (cmx.lock beside run.json). A replay is refused
    (LockMismatch) at the first difference in packages, recipes, inputs, context, cache keys or cached files,
    and fails afterwards if a step built other files than the lock records."""
    from cmx.cache.store import Store
    from cmx.resolve.resolver import resolve

    s = runtime.settings
    store = Store(s.cache)
    lock, moved = None, frozenset[str]()
    if request.locked is not None:
        from cmx.container import container_facts
        from cmx.execute.lockfile import check_container

        lock, moved = replay_lock(request.locked, request.inputs, s)
        check_container(lock, container_facts())  # a --docker lock runs only in its image
        request = replace(request, query=lock.query, inputs={**lock.inputs, **request.inputs},
                          context=dict(lock.context))
    read = None
    if request.memo and lock is None and isinstance(request.query, str) and not request.context:
        from cmx.resolve.read_environ import ReadEnviron

        read = ReadEnviron(runtime.env)
    idx = open_index(s, fetch=runtime.fetch)
    p = resolve(idx, request.query, inputs=request.inputs, context=request.context,
                environ=runtime.environ if read is None else read)
    from cmx.execute.plan_check import check_plan

    notes = check_plan(p)  # what no step needs to run to know fails now, not after the downloads
    if lock is not None:
        from cmx.execute.lockfile import check_lock

        check_lock(lock, p, store, moved=moved)
    runner = _runner(request, runtime, store,
                     before_root=lambda record: lock_plan(p, s, notes).write(record / "cmx.lock"))
    result = runner.run(p, argv=list(request.argv) if request.argv is not None else None)
    if lock is not None and result.error is None:
        from cmx.execute.lockfile import check_artefacts

        check_artefacts(lock, store)
    if read is not None and result.error is None:
        from cmx.execute.memo import remember

        remember(str(request.query), request.inputs, result, idx, store, read)
    if request.check and result.error is not None:
        raise result.error
    return result


def _runner(request: RunRequest, runtime: Runtime, store: Any, **hooks: Any) -> Runner:
    from cmx.execute.runner import Runner

    return Runner(store, runtime.settings.runs, jobs=request.jobs, reporter=runtime.reporter,
                  rerun_prefix=request.rerun_prefix, install_missing=runtime.install_missing(request.install_missing),
                  **hooks)


def run_with_root(request: RunRequest, runtime: Runtime, plan: Plan, **hooks: Any) -> RunResult:
    """Run an already resolved plan with the Runner's `root_run`/`root_rerun` hooks (how `cmx tune` puts its
    search in place of the app's step); the result, failed or not."""
    from cmx.cache.store import Store

    runner = _runner(request, runtime, Store(runtime.settings.cache), **hooks)
    return runner.run(plan, argv=list(request.argv) if request.argv is not None else None)


def root_recipe(query: str | Query, settings: Settings) -> Recipe:
    """The recipe the query's plan starts from, picked by the resolver's own selection."""
    from cmx.resolve.resolver import select_root

    return select_root(open_index(settings), query)


def replay_lock(path: str | os.PathLike[str], given: Mapping[str, Any],
                settings: Settings) -> tuple[Lock, frozenset[str]]:
    """The lock at `path`, and the root inputs `given` moves (only where outputs go; besides those, a replay gives
    only the credentials of a locked URL again: LockError otherwise)."""
    from cmx.execute.lockfile import Lock, check_moves

    lock = Lock.read(Path(path))
    return lock, check_moves(lock, root_recipe(lock.query, settings).inputs, given)


def lock_plan(plan: Plan, settings: Settings, notes: Mapping[str, tuple[str, ...]] | None = None) -> Lock:
    """The lockfile of a plan: every step pinned, the checksums of the entries cached now, the packages here, and
    what the plan check says the steps will do (`notes`; None: the check runs here)."""
    from cmx import __version__
    from cmx.cache.store import Store
    from cmx.execute.lockfile import locked_source, make_lock, source_commit
    from cmx.registry.sources import read_registry

    used = {step.recipe.source for step in plan}
    folders = {src: src.recipes_dir(settings.sources_dir) for src in read_registry(settings.registry)
               if src.name in used}
    commits = {src.name: source_commit(src, folder) for src, folder in folders.items()}
    sources = tuple(locked_source(src, folder, commits[src.name]) for src, folder in folders.items())
    from cmx.execute.plan_check import check_plan

    said = check_plan(plan) if notes is None else notes
    return replace(make_lock(plan, Store(settings.cache), commits, cmx_version=__version__, sources=sources),
                   notes={k: list(v) for k, v in said.items()})


def lock_runs_in_docker(path: str | os.PathLike[str]) -> bool:
    """Whether `cmx run --locked PATH` starts a container here: the lock was made with --docker, and this process
    is not in a container cmx started (where the lock replays natively, checked against its image)."""
    from cmx.container import container_facts
    from cmx.execute.lockfile import Lock

    return Lock.read(Path(path)).docker is not None and container_facts() is None


def resolved(query: str | Query, inputs: Mapping[str, Any], context: Mapping[str, Any], runtime: Runtime) -> Plan:
    """The plan of a query (nothing fetched unless the runtime fetches)."""
    from cmx.resolve.resolver import resolve

    return resolve(open_index(runtime.settings, fetch=runtime.fetch), query, inputs=inputs, context=context,
                   environ=runtime.environ)



def default_jobs() -> int:
    """Steps run at once when not asked: min(4, CPUs)."""
    return max(1, min(4, os.cpu_count() or 1))


@dataclass(frozen=True)
class PlanResult:
    """A plan, and which of its steps are in the cache already (step id -> an entry for its key exists)."""

    plan: Plan
    cached: dict[str, bool]
    notes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # step id -> what its check said it will do

    def to_json(self) -> dict[str, Any]:
        data = self.plan.to_json(self.cached)
        for step in data["steps"]:
            step["notes"] = list(self.notes.get(step["id"], ()))
        return data


def plan(query: str | Query, inputs: Mapping[str, Any], context: Mapping[str, Any], runtime: Runtime) -> PlanResult:
    """Resolve a query into a Plan and say which steps are already in the cache."""
    from cmx.cache.store import Store
    from cmx.execute.plan_check import check_plan

    p = resolved(query, inputs, context, runtime)
    notes = check_plan(p)
    store = Store(runtime.settings.cache)
    return PlanResult(p, {step.id: step.cacheable and store.has(step.name, step.key) for step in p}, notes)
