"""The Python API the CLI calls: a facade that dispatches each verb to the module in the layer that does it.

Everything a `cmx` verb does goes through here, so a Python user can do the same:

    import cmx.api
    result = cmx.api.run("detect system", inputs={"verbose": True}, jobs=2)
    print(result.outputs)

Each verb takes its request's fields as keywords (or the request itself: `run(RunRequest(...))`) beside
`settings`, and returns a dataclass. The request and result classes are loaded when first named
(`cmx.api.RunRequest`), so `cmx find` imports none of the modules behind the other verbs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.recipe.query import Query, having_variations, query_of
from cmx.recipe.types import to_json
from cmx.registry.index import Fetcher, RecipeIndex, RecipeInfo, open_index
from cmx.secrets import Secret, public_value
from cmx.settings import Settings, load_settings

if TYPE_CHECKING:  # imported where used, so `cmx find` loads neither the runner nor the cache
    from cmx.cache.store import Entry, VerifyProblem
    from cmx.docker.render import Rendered
    from cmx.docker.request import DockerOptions
    from cmx.docker.spec import ContainerSpec
    from cmx.execute.lockfile import Lock
    from cmx.execute.progress import Reporter
    from cmx.execute.request import PlanResult, RunRequest, Runtime
    from cmx.execute.result import RunResult
    from cmx.k8s.deploy import K8sDeployment
    from cmx.mlperf.pareto.record import ParetoRecord as ParetoRecord  # re-exported: `cmx pareto` types with it
    from cmx.mlperf.pareto.verb import ParetoResult
    from cmx.mlperf.published.answer import CostAsk, ResultsAnswer
    from cmx.mlperf.published.answer import Source as PublishedSource
    from cmx.mlperf.submission.check.model import CheckReport
    from cmx.mlperf.tune.verb import TuneResult
    from cmx.recipe.model import DepSpec as DepSpec  # re-exported, as DockerSpec and Variation: `cmx show` names them
    from cmx.recipe.model import DockerSpec as DockerSpec
    from cmx.recipe.model import Recipe
    from cmx.recipe.model import Variation as Variation
    from cmx.registry.sources import Source
    from cmx.registry.verbs import Pinned, SourceInfo
    from cmx.resolve.plan import Plan
    from cmx.slurm.jobs import JobRecord, JobStatus
    from cmx.sweep.run import SweepResult

# loaded on first use (PEP 562), so `cmx find` imports none of the modules behind the other verbs: the request
# and result types, and the verbs that are a library function as it is (name here: (module, name there))
_LAZY: dict[str, tuple[str, str]] = {
    **{n: ("cmx.execute.request", n) for n in ("PlanResult", "RunRequest", "Runtime", "default_jobs",
                                               "lock_runs_in_docker")},
    **{n: ("cmx.docker.request", n) for n in ("DockerOptions", "DockerQuery")}, "Replay": ("cmx.docker.lock", "Replay"),
    **{n: ("cmx.k8s.deploy", n) for n in ("K8sOptions", "DeployRequest", "K8sDeployment")},
    **{n: ("cmx.k8s.stack_options", n) for n in ("StackOptions", "SCORERS", "ROUTERS", "EPP_IMAGE", "GATEWAY_CLASS")},
    "STACK_NAMES": ("cmx.mlperf.serving_stack", "STACK_NAMES"), "LLMD_FORMS": ("cmx.mlperf.serving_stack", "FORMS"),
    "refuse_foreign": ("cmx.k8s.stacks", "refuse_foreign"),
    "Waits": ("cmx.k8s.cluster", "Waits"), "KUBERNETES_VERSION": ("cmx.k8s.validate", "KUBERNETES_VERSION"),
    "SlurmOptions": ("cmx.slurm.script", "SlurmOptions"), "JobRequest": ("cmx.slurm.request", "JobRequest"),
    **{n: ("cmx.sweep.run", n) for n in ("SweepRequest", "SweepResult")},
    "TuneRequest": ("cmx.mlperf.tune.target", "TuneRequest"),
    **{n: ("cmx.mlperf.tune.verb", n) for n in ("TuneResult", "TuneAnswer", "Confirm")},
    **{n: ("cmx.mlperf.pareto.verb", n) for n in ("ParetoResult",)},
    "ParetoRequest": ("cmx.mlperf.pareto.step", "ParetoRequest"),
    "ParetoRecord": ("cmx.mlperf.pareto.record", "ParetoRecord"),
    **{n: ("cmx.registry.verbs", n) for n in ("SourceInfo", "Pinned")},
    "reporter": ("cmx.execute.progress", "make_reporter"),  # "live", "plain", "none"; "auto" picks
    "redacted_command": ("cmx.execute.record", "redact_argv"),
    "read_inputs_file": ("cmx.recipe.inputs_file", "read_inputs_file"),
    "read_input_envs": ("cmx.execute.input_env", "read"),
    "check_text": ("cmx.mlperf.submission.check.report", "format_report"),
    "check_expectation": ("cmx.mlperf.submission.check.report", "expectation"),
    "write_check_csv": ("cmx.mlperf.submission.check.report", "write_csv"),
    "results_text": ("cmx.mlperf.published.text", "format_answer"),
    "results_json": ("cmx.mlperf.published.answer", "to_json"),
}

__all__ = [*_LAZY, "Secret", "public_value", "Settings", "load_settings", "to_json", "index", "find", "show", "plan",
           "run", "tune", "pareto", "lock", "lock_plan", "replay_docker", "docker_file", "docker_container",
           "docker_print_run", "run_docker", "tune_docker", "deploy_k8s", "apply_k8s", "submit_slurm", "slurm_jobs",
           "sweep",
           "sweep_gather", "cache_entries", "cache_entry", "cache_select", "cache_remove", "cache_gc", "cache_verify",
           "registry_sources", "registry_is_default", "registry_add", "registry_update", "registry_fetch",
           "registry_remove", "report", "check", "results"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'cmx.api' has no attribute {name!r}")
    import importlib

    module, attr = _LAZY[name]
    if module.startswith("cmx.mlperf.tune"):  # the tune's modules read LoadGen's logs with numpy
        from cmx.extras import require_extra

        require_extra("mlperf", f"cmx.api.{name}", "numpy")
    return getattr(importlib.import_module(module), attr)


def _announce_fetch(source: Source) -> None:
    import sys

    sys.stderr.write(f"fetching recipe source {source.name!r} ({source.git} at {source.rev})\n")


def _settings(settings: Settings | None) -> Settings:
    return settings or load_settings()


def _runtime(settings: Settings | None, reporter: Reporter | None = None, environ: Mapping[str, str] | None = None,
             fetch: Fetcher | None = None) -> Runtime:
    from cmx.execute.request import Runtime

    return Runtime(_settings(settings), reporter, environ, fetch)


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def index(settings: Settings | None = None, *, fetch: Fetcher | None = None) -> RecipeIndex:
    """The recipe index. Resolution never touches the network: a git source not checked out yet is an error
    naming the command that fetches it, unless `fetch` is given (it is called, to say so, before each fetch)."""
    return open_index(_settings(settings), fetch=fetch)


def find(query: str | Query | None = None, *, settings: Settings | None = None) -> list[RecipeInfo]:
    """Recipes matching the query's tags (all recipes when no query); `_variation` words
    keep only recipes that have that variation."""
    idx = index(settings)
    if not query:
        return idx.infos()
    q = query_of(query)
    return having_variations(idx.find(q), q.variations, idx.get)


def show(name: str, *, settings: Settings | None = None) -> Recipe:
    """One recipe by name (or by a query that matches exactly one recipe)."""
    from cmx.registry.verbs import recipe_named

    return recipe_named(index(settings), name)


def plan(query: str | Query, *, inputs: Mapping[str, Any] | None = None, context: Mapping[str, Any] | None = None,
         settings: Settings | None = None, environ: Mapping[str, str] | None = None) -> PlanResult:
    """Resolve a query into a Plan and say which steps are already in the cache."""
    from cmx.execute.request import plan as plan_of

    return plan_of(query, inputs or {}, context or {}, _runtime(settings, environ=environ))


def run(query: str | Query | RunRequest, *, settings: Settings | None = None, reporter: Reporter | None = None,
        environ: Mapping[str, str] | None = None, fetch: Fetcher | None = _announce_fetch,
        **options: Any) -> RunResult:
    """Resolve and run a query; `options` are RunRequest's fields (inputs, context, jobs, check, argv, rerun_prefix,
    install_missing, locked, memo: cmx.execute.request says what each does). A pinned git source of recipes not
    fetched yet is fetched first, and `fetch` says so (on stderr by default)."""
    from cmx.execute.request import RunRequest
    from cmx.execute.request import run as run_request

    request = query if isinstance(query, RunRequest) else RunRequest(query, **_given(options))
    return run_request(request, _runtime(settings, reporter, environ, fetch))


def _given(options: dict[str, Any]) -> dict[str, Any]:
    """Keyword options as a request takes them: None for the inputs, the context or the options is the default."""
    return {k: v for k, v in options.items() if v is not None or k not in ("inputs", "context", "options")}


def _split(options: dict[str, Any], request: type, path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the options a verb's own request dataclass takes, with its file option `path` made absolute; RunRequest's)."""
    from dataclasses import fields

    own = {f.name for f in fields(request)}
    asked = {k: v for k, v in options.items() if k in own}
    if asked.get(path):
        asked[path] = Path(asked[path]).absolute()
    return asked, _given({k: v for k, v in options.items() if k not in own})


def tune(query: str, *, scenario: str, settings: Settings | None = None, reporter: Reporter | None = None,
         environ: Mapping[str, str] | None = None, fetch: Fetcher | None = _announce_fetch, invocation: str = "cmx",
         **options: Any) -> TuneResult:
    """`cmx tune`: for an MLPerf app query, the highest target QPS of `scenario` that stays VALID (Server,
    Interactive), or (Offline) the measured throughput, confirmed and written into an inputs file
    (cmx.mlperf.tune.verb). `options`: TuneRequest's (start_qps, out, tolerance, max_probes, confirm,
    confirm_tries, probe_seconds) and RunRequest's (inputs, context, jobs, argv, install_missing)."""
    from cmx.extras import require_extra

    require_extra("mlperf", "cmx tune", "numpy")
    from cmx.execute.request import RunRequest
    from cmx.mlperf.tune.target import TuneRequest
    from cmx.mlperf.tune.verb import tune as tune_verb

    asked, run_options = _split(options, TuneRequest, "out")
    return tune_verb(RunRequest(query, **run_options), TuneRequest(scenario, **asked),
                     _runtime(settings, reporter, environ, fetch), invocation)


def pareto(query: str, *, settings: Settings | None = None, reporter: Reporter | None = None,
           environ: Mapping[str, str] | None = None, fetch: Fetcher | None = _announce_fetch, invocation: str = "cmx",
           **options: Any) -> ParetoResult:
    """`cmx pareto`: an MLPerf Endpoints v1.0 curve of an app query's served model (cmx.mlperf.pareto.verb).
    `options`: ParetoRequest's (max_concurrency, system_power, cooling) and RunRequest's (inputs, context, jobs,
    argv, install_missing)."""
    from cmx.extras import require_extra

    require_extra("mlperf", "cmx pareto", "numpy")
    from cmx.execute.request import RunRequest
    from cmx.mlperf.pareto.step import ParetoRequest
    from cmx.mlperf.pareto.verb import pareto as pareto_verb

    asked, run_options = _split(options, ParetoRequest, "system_power")
    return pareto_verb(RunRequest(query, **run_options), ParetoRequest(**asked),
                       _runtime(settings, reporter, environ, fetch), invocation)


# --- locks ------------------------------------------------------------------------------------

def lock_plan(p: Plan, *, settings: Settings | None = None) -> Lock:
    """The lockfile of a plan: every step pinned, the checksums of the entries cached now, the packages here."""
    from cmx.execute.request import lock_plan as lock_of

    return lock_of(p, _settings(settings))


def lock(query: str, *, inputs: Mapping[str, Any] | None = None, context: Mapping[str, Any] | None = None,
         settings: Settings | None = None, environ: Mapping[str, str] | None = None,
         docker: DockerOptions | None = None, emit: Callable[[str], None] = print,
         save_image: str | os.PathLike | None = None) -> Lock:
    """`cmx lock`: resolve the query (no step runs, nothing is fetched) and pin its plan (`lock_plan`). With
    `docker` (DockerOptions), the image `run --docker` would use is pinned too (built first when no image has its
    tag: `emit` gets the build's output), and the packages are those inside it (cmx.docker.lock); with
    `save_image`, that image is saved there as an archive."""
    runtime = _runtime(settings, environ=environ)
    if docker is None:
        from cmx.execute.lockfile import installed_packages, refuse_other_device
        from cmx.execute.request import resolved

        plan = resolved(query, inputs or {}, context or {}, runtime)
        refuse_other_device(plan, installed_packages())
        return lock_plan(plan, settings=runtime.settings)
    from cmx.docker.lock import lock_query
    from cmx.docker.request import DockerQuery

    return lock_query(DockerQuery(query, inputs or {}, context or {}, docker), runtime, emit,
                      Path(save_image) if save_image else None)


def replay_docker(path: str | os.PathLike, *, settings: Settings | None = None, emit: Callable[[str], None] = print,
                  **options: Any) -> int:
    """Replay a lock made with --docker in its image; the container's exit status. `options`: Replay's (inputs,
    which may only move outputs, container, load_image, gpus, keep, jobs, install_missing, argv)."""
    from cmx.docker.lock import Replay, replay

    return replay(Replay(Path(path), **_given(options)), _settings(settings), emit)


# --- Docker -----------------------------------------------------------------------------------

def _docker_query(query: str, options: dict[str, Any]) -> Any:
    from cmx.docker.request import DockerQuery

    return DockerQuery(query, **_given(options))


def docker_file(query: str, *, settings: Settings | None = None, **options: Any) -> Rendered:
    """The Dockerfile and build context `run --docker` would use; `options`: DockerQuery's."""
    from cmx.docker.request import dockerfile

    return dockerfile(_docker_query(query, options), _settings(settings))


def docker_container(query: str, *, settings: Settings | None = None, **options: Any) -> ContainerSpec:
    """The container `run --docker` would start: image, command, user, environment, mounts, devices."""
    from cmx.docker.request import container

    return container(_docker_query(query, options), _settings(settings))


def docker_print_run(query: str, *, settings: Settings | None = None, **options: Any) -> dict[str, Any]:
    """`cmx docker --print-run`: the engine, its exact run command and the container's settings (JSON-ready)."""
    from cmx.docker.request import print_run

    return print_run(_docker_query(query, options), _settings(settings))


def run_docker(query: str, *, settings: Settings | None = None, emit: Callable[[str], None] = print,
               **options: Any) -> int:
    """Build (or reuse) the plan's image and run the same query in it; the container's exit status. `argv` is
    the host command, recorded with its secrets hidden."""
    from cmx.docker.request import run as run_in_docker

    return run_in_docker(_docker_query(query, options), _settings(settings), emit)


def tune_docker(query: str, *, scenario: str, settings: Settings | None = None,
                emit: Callable[[str], None] = print, **options: Any) -> int:
    """`cmx tune --docker`: build (or reuse) the plan's image and tune the query in it, as `tune` does here; the
    container's exit status. What the tune would refuse is refused before the build. `options`: TuneRequest's
    (start_qps, out, tolerance, max_probes, confirm, confirm_tries, probe_seconds) and DockerQuery's (inputs,
    context, options, jobs, argv)."""
    from cmx.docker.request import run as run_in_docker
    from cmx.mlperf.tune.target import TuneRequest

    asked, docker = _split(options, TuneRequest, "out")
    return run_in_docker(_docker_query(query, {**docker, "tune": TuneRequest(scenario, **asked)}),
                         _settings(settings), emit)


# --- Kubernetes -------------------------------------------------------------------------------

def deploy_k8s(query: str, *, settings: Settings | None = None, **options: Any) -> K8sDeployment:
    """`cmx deploy --k8s`: the validated manifests serving the plan's model with vLLM and benchmarking it from a
    Job, written to `out_dir`, applied with `apply`; `options`: DeployRequest's (cmx.k8s.deploy)."""
    from cmx.extras import require_extra

    require_extra("scale", "cmx deploy", "kubernetes_validate", *(("kubernetes",) if options.get("apply") else ()))
    from cmx.k8s.deploy import DeployRequest, deploy

    return deploy(DeployRequest(query, **_given(options)), _settings(settings))


def apply_k8s(deployment: K8sDeployment, *, kubeconfig: Path | None = None) -> K8sDeployment:
    """Server-side apply rendered objects to the kubeconfig's cluster; the deployment with what was applied."""
    from cmx.extras import require_extra

    require_extra("scale", "cmx deploy --apply", "kubernetes")
    from cmx.k8s.deploy import apply_to_cluster

    return apply_to_cluster(deployment, kubeconfig)


# --- Slurm and sweeps -------------------------------------------------------------------------

def submit_slurm(query: str, *, settings: Settings | None = None, environ: Mapping[str, str] | None = None,
                 **options: Any) -> JobRecord:
    """Submit the query as a Slurm batch job; its record. `options`: JobRequest's (options, inputs, context,
    cmx_args, host_command: cmx.slurm.request)."""
    from cmx.slurm.request import JobRequest, submit_query

    return submit_query(JobRequest(query, **_given(options)), _settings(settings), _env(environ))


def slurm_jobs(*, all_jobs: bool = False, limit: int = 20, job_ids: list[str] | None = None,
               settings: Settings | None = None, environ: Mapping[str, str] | None = None) -> list[JobStatus]:
    """The jobs cmx submitted (the `limit` most recent, or all), with their state, run record, results and validity."""
    from cmx.slurm.request import job_statuses

    return job_statuses(_settings(settings), _env(environ), all_jobs=all_jobs, limit=limit, job_ids=job_ids)


def sweep(query: str, *, settings: Settings | None = None, environ: Mapping[str, str] | None = None,
          announce: Callable[[str], None] = lambda _: None, **options: Any) -> SweepResult:
    """Run the query once per value of one input, here or as Slurm jobs; `options`: SweepRequest's (cmx.sweep.run)."""
    from cmx.sweep.run import SweepRequest
    from cmx.sweep.run import sweep as run_sweep

    return run_sweep(SweepRequest(query, **_given(options)), _settings(settings), _env(environ), announce)


def sweep_gather(sweep_dir: Path, *, wait: bool = False, poll_s: float = 5.0, timeout_s: float | None = None,
                 settings: Settings | None = None, environ: Mapping[str, str] | None = None) -> SweepResult:
    """The table of a sweep from its folder (rows None while its Slurm jobs have not ended and not `wait`)."""
    from cmx.sweep.run import gather

    return gather(Path(sweep_dir), _settings(settings), _env(environ), wait=wait, poll_s=poll_s, timeout_s=timeout_s)


# --- cache and registry -------------------------------------------------------------------------

def _store(settings: Settings | None) -> Any:
    from cmx.cache.store import Store

    return Store(_settings(settings).cache)


def cache_entries(query: str | None = None, *, settings: Settings | None = None) -> list[Entry]:
    """Entries in the cache, all or those of recipes matching `query` (`_x`: only those built with variation x)."""
    from cmx.cache.verbs import entries

    s = _settings(settings)
    if not query:
        return entries(_store(s))
    q = query_of(query)
    return entries(_store(s), {i.name for i in index(s).find(q)}, q.variations)


def cache_entry(key: str, *, settings: Settings | None = None) -> Entry:
    """The one entry whose key starts with `key`; an error when none, or several, do."""
    from cmx.cache.verbs import entry

    return entry(_store(settings), key)


def cache_select(key_or_query: str, *, settings: Settings | None = None) -> list[Entry]:
    """Entries whose key starts with the argument; failing that, entries of matching recipes."""
    from cmx.cache.verbs import select

    s = _settings(settings)
    return select(_store(s), key_or_query, lambda query: cache_entries(query, settings=s))


def cache_remove(entries: list[Entry], *, settings: Settings | None = None) -> None:
    from cmx.cache.verbs import remove

    remove(_store(settings), entries)


def cache_gc(older_than_days: float | None = None, *, dry_run: bool = False,
             settings: Settings | None = None) -> list[Path]:
    from cmx.cache.verbs import gc

    return gc(_store(settings), older_than_days, dry_run=dry_run)


def cache_verify(key: str | None = None, *, remove: bool = False,
                 settings: Settings | None = None) -> tuple[list[Entry], list[VerifyProblem]]:
    """Re-hash entries (one or all); with `remove`, delete the corrupted ones."""
    from cmx.cache.verbs import verify

    return verify(_store(settings), key, remove=remove)


def registry_sources(settings: Settings | None = None) -> list[SourceInfo]:
    """Each source with its number of recipes (None for a git source not fetched yet: nothing is fetched here)."""
    from cmx.registry.verbs import sources

    return sources(_settings(settings))


def registry_is_default(settings: Settings | None = None) -> bool:
    """Whether the registry in force is the one cmx ships (the home has no registry.yaml yet)."""
    from cmx.registry.verbs import is_default

    return is_default(_settings(settings))


def registry_add(name: str, url: str, *, rev: str | None = None, branch: str | None = None, subdir: str = "recipes",
                 settings: Settings | None = None) -> Pinned:
    """Add git source `name` at `url`, pinned to `rev` or to the head of `branch` (default: the remote's HEAD) now;
    fetched and checked before the registry is written (the home's, when the one in force is cmx's own)."""
    from cmx.registry.verbs import add

    return add(_settings(settings), name, url, rev=rev, branch=branch, subdir=subdir)


def registry_update(name: str, rev: str | None = None, *, settings: Settings | None = None) -> Pinned:
    """Fetch git source `name` at commit `rev` (default: the head it follows now) and pin it there."""
    from cmx.registry.verbs import update

    return update(_settings(settings), name, rev)


def registry_fetch(names: tuple[str, ...] = (), *, settings: Settings | None = None) -> list[Source]:
    """Check out git sources `names` (default: every one) at the commits they are pinned to."""
    from cmx.registry.verbs import fetch

    return fetch(_settings(settings), names)


def registry_remove(name: str, *, settings: Settings | None = None) -> Source:
    """Take source `name` out of the registry file in force."""
    from cmx.registry.verbs import remove

    return remove(_settings(settings), name)


# --- reports and submissions ----------------------------------------------------------------------

def report(results: str | os.PathLike, out: str | os.PathLike | None = None, *,
           other: str | os.PathLike | None = None, published: bool | None = None, round_name: str = "v6.1",
           summary: str | os.PathLike | None = None, mirror: str | None = None, price: float | None = None,
           users: int | None = None, tokens_per_user: float | None = None, settings: Settings | None = None,
           environ: Mapping[str, str] | None = None, emit: Callable[[str], None] | None = None) -> Path:
    """Write one self-contained HTML page for a benchmark's results folder (and, with `other`, B compared with
    A): cmx.mlperf.report. Default `out`: RESULTS/report.html. Each performance test is placed among the round's
    published results (the table `results` reads): by default when that table is in the cache already (looked up,
    never fetched; the page says which table, or how to add it); with `published` (implied by `summary` or
    `price`) fetched first when it is not; never with `published=False`. A price prices it. `emit` is told the
    page's line about the table."""
    from cmx.extras import require_extra

    require_extra("report", "cmx report")
    from cmx.mlperf.published.compare import has_runs
    from cmx.mlperf.published.table import PublishedResultsError
    from cmx.mlperf.report.page import write_report

    asked = summary is not None or price is not None
    if published is False and asked:
        raise PublishedResultsError("--summary and --price-per-accelerator-hour place the run among the published "
                                    "results, which --no-published leaves out",
                                    hint="drop --no-published, or the --summary and the price")
    cost = _cost_ask(price, users, tokens_per_user)
    folders = [Path(results), *([Path(other)] if other is not None else [])]
    yardstick, note = None, None
    if (published or asked) or (published is None and any(has_runs(f) for f in folders)):
        from cmx.mlperf.published.answer import Yardstick
        from cmx.mlperf.published.text import table_missing, table_read

        source = _published_source(round_name, summary=summary, mirror=mirror, settings=settings, environ=environ) \
            if published or asked else _cached_published_source(round_name, settings=settings, environ=environ)
        if source is not None:
            yardstick = Yardstick.read(source, cost)
        note = table_read(source) if source is not None else table_missing(round_name, str(results))
    target = Path(out) if out is not None else Path(results) / "report.html"
    page = write_report(Path(results), target, other=Path(other) if other is not None else None,
                        published=yardstick, published_note=note)
    if note is not None and emit is not None:
        emit(note)
    return page


def check(path: str | os.PathLike, *, round_name: str | None = None) -> CheckReport:
    """Check a submission tree against a round's rules (cmx.mlperf.submission.check); when none is named, the round
    whose seeds the tree's logs carry, else the newest. The report lists every problem."""
    from cmx.mlperf.rounds import latest_round
    from cmx.mlperf.submission.check import check_tree, round_of_tree

    return check_tree(Path(path), round_name or round_of_tree(Path(path)) or latest_round())


def results(*, round_name: str = "v6.1", summary: str | os.PathLike | None = None, commit: str | None = None,
            sha256: str | None = None, mirror: str | None = None, benchmark: str | None = None,
            scenario: str | None = None, accelerator: str | None = None, division: str | None = None,
            framework: str | None = None, compare: str | os.PathLike | None = None, price: float | None = None,
            users: int | None = None, tokens_per_user: float | None = None, settings: Settings | None = None,
            reporter: Reporter | None = None, environ: Mapping[str, str] | None = None) -> ResultsAnswer:
    """A round's published MLPerf Inference results (cmx.mlperf.published): the table the recipe
    `get-mlperf-results _<round>` fetches and caches (pinned commit, sha256; `summary`: a local copy; `mirror`: a
    base URL serving GitHub's raw layout), the rows the filters keep with per-accelerator figures, or with
    `compare` a results folder's runs ranked among the rows of their benchmark, scenario and accelerator model;
    with `price` (per accelerator-hour, the user's), what a million tokens (a thousand samples) and `users` at
    `tokens_per_user` cost."""
    from cmx.mlperf.published.answer import answer
    from cmx.mlperf.published.table import RowFilter

    cost = _cost_ask(price, users, tokens_per_user)  # refuses a bad ask before a fetch
    source = _published_source(round_name, summary=summary, commit=commit, sha256=sha256, mirror=mirror,
                               settings=settings, reporter=reporter, environ=environ)
    return answer(source, RowFilter(benchmark, scenario, accelerator, division, framework),
                  compare=Path(compare) if compare is not None else None, cost=cost)


def _cost_ask(price: float | None, users: int | None, tokens_per_user: float | None) -> CostAsk | None:
    """The user's price (and load) as a CostAsk, None without a price; a load without a price is refused."""
    from cmx.mlperf.published.answer import CostAsk
    from cmx.mlperf.published.table import PublishedResultsError

    if price is None and (users is not None or tokens_per_user is not None):
        raise PublishedResultsError("--users and --tokens-per-user are priced at --price-per-accelerator-hour, "
                                    "which was not given", hint="add --price-per-accelerator-hour P, your price")
    return CostAsk(price, users, tokens_per_user) if price is not None else None


def _cached_published_source(round_name: str, *, settings: Settings | None = None,
                             environ: Mapping[str, str] | None = None) -> PublishedSource | None:
    """The round's table if get-mlperf-results cached it before (`cmx results --round R`, `cmx report --published`),
    else None. Its step is resolved and looked up in the cache, never run: nothing is fetched. A step that does not
    resolve (a recipe source not fetched yet) counts as not cached: the report does not need it."""
    from cmx.cache.store import Store
    from cmx.errors import CmxError
    from cmx.mlperf.published.answer import Source as PublishedSource

    s = _settings(settings)
    try:
        planned = plan(f"get mlperf-results _{round_name}", settings=s, environ=environ)
    except CmxError:
        return None
    step = planned.plan.root_step
    entry = Store(s.cache).lookup(step.name, step.key) if planned.cached.get(step.id) else None
    if entry is None:
        return None
    got = entry.outputs
    return PublishedSource(path=Path(got["path"]), round=got["round"], commit=got["commit"], url=got["url"],
                           sha256=got["sha256"], verified=got["verified"])


def _published_source(round_name: str, *, summary: str | os.PathLike | None = None, commit: str | None = None,
                      sha256: str | None = None, mirror: str | None = None, settings: Settings | None = None,
                      reporter: Reporter | None = None, environ: Mapping[str, str] | None = None) -> PublishedSource:
    """The round's published table, as the recipe get-mlperf-results fetched and cached it: a Source."""
    from cmx.mlperf.published.answer import Source as PublishedSource

    given = {"commit": commit, "sha256": sha256, "base_url": mirror,
             "summary": None if summary is None else str(summary)}
    got = run(f"get mlperf-results _{round_name}", inputs={k: v for k, v in given.items() if v is not None},
              settings=settings, reporter=reporter, environ=environ).outputs
    return PublishedSource(path=Path(got["path"]), round=got["round"], commit=got["commit"], url=got["url"],
                  sha256=got["sha256"], verified=got["verified"])
