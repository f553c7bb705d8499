"""The Python API the CLI calls: find(), show(), plan(), run(), the Docker, Kubernetes, Slurm, sweep, cache and
registry verbs, check().

Everything a `cmx` verb does goes through here, so a Python user can do the same:

    import cmx.api
    result = cmx.api.run("detect system", inputs={"verbose": True}, jobs=2)
    print(result.outputs)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple

from cmx.errors import CacheError, QueryError
from cmx.recipe.query import Query, having_variations, query_of
from cmx.recipe.types import to_json
from cmx.registry.index import Fetcher, RecipeIndex, RecipeInfo, open_index
from cmx.secrets import Secret
from cmx.settings import Settings, load_settings

if TYPE_CHECKING:  # imported where used, so `cmx find` loads neither the runner nor the cache
    from cmx.cache.store import Entry, VerifyProblem
    from cmx.docker.launch import ContainerSpec, DockerRun
    from cmx.docker.render import Rendered
    from cmx.execute.progress import Reporter
    from cmx.execute.lockfile import Lock
    from cmx.execute.result import RunResult
    from cmx.k8s.apply import Applied
    from cmx.k8s.output import Rendered as K8sRendered
    from cmx.mlperf.submission.check import CheckReport
    from cmx.recipe.model import Recipe
    from cmx.registry.sources import Source
    from cmx.resolve.plan import Plan
    from cmx.slurm.jobs import JobRecord, JobStatus
    from cmx.slurm.script import SlurmOptions
    from cmx.sweep import Outcome, Point, Row, Sweep

__all__ = ["PlanResult", "SourceInfo", "DockerOptions", "Secret", "Settings", "load_settings", "to_json", "index",
           "find", "show", "plan", "run", "reporter", "redacted_command", "docker_file", "docker_container",
           "run_docker", "K8sOptions", "K8sDeployment", "deploy_k8s", "apply_k8s", "cache_entries", "cache_entry",
           "cache_select", "cache_remove", "cache_gc", "cache_verify",
           "registry_sources", "registry_update", "default_jobs", "lock", "lock_plan", "lock_runs_in_docker",
           "replay_docker", "check", "check_text",
           "check_expectation",
           "write_check_csv", "report", "slurm_options", "submit_slurm", "slurm_jobs", "SweepResult", "sweep", "sweep_gather",
           "TuneResult", "tune", "read_inputs_file"]


class PlanResult(NamedTuple):
    plan: "Plan"
    cached: dict[str, bool]  # step id -> an entry for its key exists in the cache

    def to_json(self) -> dict[str, Any]:
        return self.plan.to_json(self.cached)


class SourceInfo(NamedTuple):
    source: "Source"
    recipes: int | None  # None: a git source not fetched yet


class SweepResult(NamedTuple):
    """A sweep's folder (sweep.json, a folder per point), its points, and the table once every point ended
    (None while Slurm jobs are still queued or running and the sweep was not asked to wait)."""

    sweep_dir: Path
    sweep: "Sweep"
    points: list["Point"]
    outcomes: list["Outcome"]
    rows: list["Row"] | None
    table: str | None

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"sweep_dir": str(self.sweep_dir), "query": self.sweep.query, "input": self.sweep.name,
                "type": self.sweep.type, "values": list(self.sweep.values), "fixed": self.sweep.fixed,
                "points": [{**asdict(p), "status": o.status, "detail": o.detail}
                           for p, o in zip(self.points, self.outcomes)],
                "done": self.rows is not None,
                "rows": [asdict(r) for r in self.rows] if self.rows is not None else None}


class TuneResult(NamedTuple):
    """A tune's run record folder, the tune's outputs (probes, confirm runs, the answer, the inputs file; {} when
    the tune failed) and its error."""

    run_dir: Path
    outputs: dict[str, Any]
    error: Any  # a StepFailed, or None
    seconds: float

    @property
    def ok(self) -> bool:
        """A target was found (and confirmed, unless the tune was asked not to confirm)."""
        return self.error is None and self.outputs.get("qps") is not None

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "run_dir": str(self.run_dir), "seconds": round(self.seconds, 3),
                **to_json(self.outputs), "error": self.error.render() if self.error is not None else None}


class DockerOptions(NamedTuple):
    """How `run --docker` and `docker` build and start the container (a NamedTuple: `cmx find` stays light)."""

    base_image: str | None = None      # instead of the device profile's pinned base
    gpus: tuple[str, ...] | None = None  # the GPU ids the container gets (None: all)
    ca_bundle: Path | None = None      # an extra CA bundle for the build (default: pip's or requests', if set)
    wheelhouse: Path | None = None     # wheels pip may install from in the image
    rebuild: bool = False              # build without Docker's layer cache
    keep: bool = False                 # keep the build context


def _announce_fetch(source: "Source") -> None:
    import sys

    sys.stderr.write(f"fetching recipe source {source.name!r} ({source.git} at {source.rev})\n")


def _settings(settings: Settings | None) -> Settings:
    return settings or load_settings()


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
        rerun_prefix: str = "cmx run", install_missing: bool | None = None,
        fetch: Fetcher | None = _announce_fetch, locked: str | os.PathLike | None = None,
        memo: bool = False) -> "RunResult":
    """Resolve and run a query. With `check` (the default) a failed step raises StepFailed;
    otherwise the RunResult carries it in `.error`. `install_missing` lets steps install what
    they lack (Python packages); by default it follows CMX_INSTALL_MISSING=1. A pinned git
    source of recipes not fetched yet is fetched first, and `fetch` says so (on stderr by default).
    When the root step runs, the run's record gets its lockfile (cmx.lock beside run.json).

    `locked`: a lockfile to replay (`query` is ignored: the lock's is used; `inputs` may only move outputs).
    The run is refused (LockMismatch) at the first difference in packages, recipes, inputs, context, cache
    keys or cached files, and fails afterwards if a step built other files than the lock records.

    `memo`: when the root comes from the cache, leave a memo from which the command line `cmx run QUERY
    [--input NAME=VALUE]...` (with the settings of the environment) is answered next time without resolving,
    while nothing the answer depended on changes (cmx.execute.memo)."""
    from cmx.cache.store import Store
    from cmx.execute.runner import Runner
    from cmx.resolve.resolver import resolve

    s = _settings(settings)
    store = Store(s.cache)
    lock, moved = None, frozenset[str]()
    if locked is not None:
        from cmx.container import container_facts
        from cmx.execute.lockfile import check_container

        lock, moved = _replay(locked, inputs or {}, s)
        check_container(lock, container_facts())  # a --docker lock runs only in its image
        query, inputs, context = lock.query, {**lock.inputs, **(inputs or {})}, dict(lock.context)
    read = None
    if memo and lock is None and isinstance(query, str) and not context:
        from cmx.resolve.read_environ import ReadEnviron

        read = ReadEnviron(os.environ if environ is None else environ)
    idx = index(s, fetch=fetch)
    p = resolve(idx, query, inputs=inputs, context=context, environ=environ if read is None else read)
    if lock is not None:
        from cmx.execute.lockfile import check_lock

        check_lock(lock, p, store, moved=moved)
    env = os.environ if environ is None else environ
    if install_missing is None:
        install_missing = env.get("CMX_INSTALL_MISSING", "").lower() in ("1", "true", "yes")
    runner = Runner(store, s.runs, jobs=jobs, reporter=reporter, rerun_prefix=rerun_prefix,
                    install_missing=install_missing,
                    before_root=lambda record: lock_plan(p, settings=s).write(record / "cmx.lock"))
    result = runner.run(p, argv=argv)
    if lock is not None and result.error is None:
        from cmx.execute.lockfile import check_artefacts

        check_artefacts(lock, store)
    if read is not None and result.error is None:
        from cmx.execute.memo import remember

        remember(str(query), inputs or {}, result, idx, store, read)
    if check and result.error is not None:
        raise result.error
    return result


def read_inputs_file(path: str | os.PathLike) -> dict[str, str]:
    """The NAME -> VALUE pairs of an inputs file (YAML), as text, as if each were given with --input."""
    from cmx.recipe.inputs_file import read_inputs_file as read

    return read(path)


def tune(query: str, *, scenario: str, inputs: Mapping[str, Any] | None = None,
         context: Mapping[str, Any] | None = None, start_qps: float | None = None,
         out: str | os.PathLike | None = None, tolerance: float = 0.04, max_probes: int = 10, confirm: bool = True,
         confirm_tries: int = 2, probe_seconds: float = 30.0, jobs: int = 1, settings: Settings | None = None,
         reporter: "Reporter | None" = None, environ: Mapping[str, str] | None = None,
         argv: list[str] | None = None, install_missing: bool | None = None,
         fetch: Fetcher | None = _announce_fetch, invocation: str = "cmx") -> TuneResult:
    """`cmx tune`: for an MLPerf app query, the highest target QPS of `scenario` (Server, Interactive) that stays
    VALID under the round's latency limits, or (Offline) the measured throughput, confirmed by one run of the
    query's length and written into the inputs file `out` (merged into it when it exists).

    The plan is the one `run` would run; what cannot be tuned (not an app, no device in the query, a scenario
    the benchmark lacks, no QPS to start from) is refused before any step runs. The deps run as in `run`; the
    app's step is replaced by the tune (cmx.mlperf.tune), which keeps one engine for every probe.

    `invocation` is how the user invoked cmx before the verb (`cmx --registry R`): a failed dep's
    're-run just this step' line is `<invocation> run ...`, the tune step's `<invocation> tune ... --scenario S`."""
    from cmx.cache.store import Store
    from cmx.execute.runner import Runner
    from cmx.mlperf.tune.step import TuneRequest, tune_step, tune_target
    from cmx.resolve.resolver import resolve

    s = _settings(settings)
    p = resolve(index(s, fetch=fetch), query, inputs=inputs, context=context, environ=environ)
    request = TuneRequest(scenario=scenario, start_qps=start_qps, out=Path(out).absolute() if out else None,
                          tolerance=tolerance, max_probes=max_probes, confirm=confirm, confirm_tries=confirm_tries,
                          probe_seconds=probe_seconds)
    target = tune_target(p.root_step, query_of(query).variations, dict(context or {}), request)
    env = os.environ if environ is None else environ
    if install_missing is None:
        install_missing = env.get("CMX_INSTALL_MISSING", "").lower() in ("1", "true", "yes")
    runner = Runner(Store(s.cache), s.runs, jobs=jobs, reporter=reporter, install_missing=install_missing,
                    root_run=lambda ctx: tune_step(ctx, target, request), rerun_prefix=f"{invocation} run",
                    root_rerun=lambda words: " ".join([f"{invocation} tune", words, *request.options()]))
    result = runner.run(p, argv=argv)
    return TuneResult(result.run_dir, dict(result.outputs), result.error, result.seconds)


def _replay(path: str | os.PathLike, given: Mapping[str, Any], s: Settings) -> tuple["Lock", frozenset[str]]:
    """The lock at `path`, and the root inputs `given` moves (only where outputs go: LockError otherwise)."""
    from cmx.execute.lockfile import Lock, check_moves

    lock = Lock.read(Path(path))
    check_moves(lock, _root_recipe(lock.query, s).inputs, given)
    return lock, frozenset(given)


def lock_plan(p: "Plan", *, settings: Settings | None = None) -> "Lock":
    """The lockfile of a plan: every step pinned, the checksums of the entries cached now, the packages here."""
    from cmx import __version__
    from cmx.cache.store import Store
    from cmx.execute.lockfile import make_lock, source_commit
    from cmx.registry.sources import read_registry

    s = _settings(settings)
    used = {step.recipe.source for step in p}
    commits = {src.name: source_commit(src, src.recipes_dir(s.sources_dir)) for src in read_registry(s.registry)
               if src.name in used}
    return make_lock(p, Store(s.cache), commits, cmx_version=__version__)


def lock(query: str, *, inputs: Mapping[str, Any] | None = None, context: Mapping[str, Any] | None = None,
         settings: Settings | None = None, environ: Mapping[str, str] | None = None,
         docker: DockerOptions | None = None, emit: Callable[[str], None] = print) -> "Lock":
    """`cmx lock`: resolve the query (no step runs, nothing is fetched) and pin its plan (`lock_plan`).

    With `docker`, the image `run --docker` would use is pinned too (built first when no image has its tag:
    `emit` gets the build's output), and the packages are those inside it (cmx.docker.lock)."""
    s = _settings(settings)
    p = plan(query, inputs=inputs, context=context, settings=s, environ=environ).plan
    pinned = lock_plan(p, settings=s)
    if docker is None:
        return pinned
    from cmx.docker.lock import lock_image

    return lock_image(pinned, p, _docker_request(p, query, inputs or {}, context or {}, docker), s, emit)


def lock_runs_in_docker(path: str | os.PathLike) -> bool:
    """Whether `cmx run --locked PATH` starts a container here: the lock was made with --docker, and this process
    is not in a container cmx started (where the lock replays natively, checked against its image)."""
    from cmx.container import container_facts
    from cmx.execute.lockfile import Lock

    return Lock.read(Path(path)).docker is not None and container_facts() is None


def replay_docker(path: str | os.PathLike, *, inputs: Mapping[str, Any] | None = None,
                  gpus: tuple[str, ...] | None = None, keep: bool = False, jobs: int | None = None,
                  install_missing: bool = False, argv: list[str] | None = None, settings: Settings | None = None,
                  emit: Callable[[str], None] = print) -> int:
    """Replay a lock made with --docker: check its steps' recipes here, then its image (the Dockerfile and build
    context rendered now, the image ID on this machine), and run `cmx run --locked` in that image, which checks
    the inputs, context, cache keys, cached files and packages there, where the lock was made; the container's
    exit status. `inputs` may only move outputs, as for `run(locked=...)`."""
    from cmx.docker.launch import DockerRun
    from cmx.docker.lock import locked_build, moved_paths, replay_in_image
    from cmx.execute.lockfile import check_recipes
    from cmx.resolve.resolver import resolve

    s = _settings(settings)
    lock, _ = _replay(path, inputs or {}, s)
    assert lock.docker is not None, "a lock without an image replays with run(locked=...)"
    given = moved_paths(lock, _root_recipe(lock.query, s).inputs, {k: str(v) for k, v in (inputs or {}).items()})
    p = resolve(index(s), lock.query, inputs={**lock.inputs, **given}, context=dict(lock.context))
    check_recipes(lock, p)
    host_command = tuple(redacted_command(argv, p)) if argv else ()
    request = DockerRun(query=lock.query, inputs=given, context={}, build=locked_build(lock.docker), gpus=gpus,
                        keep=keep, jobs=jobs, install_missing=install_missing, host_command=host_command)
    return replay_in_image(lock, Path(path), p, request, s, emit)


def reporter(mode: str) -> "Reporter":
    """The progress display for `run`: "live" (a terminal), "plain" (a line per event), "none"; "auto" picks."""
    from cmx.execute.progress import make_reporter

    return make_reporter(mode)


def redacted_command(argv: list[str], plan: "Plan") -> list[str]:
    """`argv` with the values of the plan's secret inputs hidden, as run records write it."""
    from cmx.execute.record import redact_argv

    return redact_argv(argv, plan)


# --- Docker ----------------------------------------------------------------------------------

def _docker_request(plan: "Plan", query: str, inputs: Mapping[str, Any], context: Mapping[str, Any],
                    options: DockerOptions, *, jobs: int | None = None, install_missing: bool = False,
                    host_command: tuple[str, ...] = ()) -> "DockerRun":
    """What the container is asked to do. Only a CPU image installs torch, so only it takes pip's configured
    wheel folder by default."""
    from cmx.docker.launch import DockerRun, default_ca_bundle, default_wheelhouse
    from cmx.docker.render import BuildOptions, host_user, plan_device

    device = plan_device(plan)
    build = BuildOptions(base_image=options.base_image, ca_bundle=options.ca_bundle or default_ca_bundle(),
                         wheelhouse=options.wheelhouse or (default_wheelhouse() if device in (None, "cpu") else None),
                         user=host_user())
    return DockerRun(query=query, inputs=dict(inputs), context=dict(context), build=build, gpus=options.gpus,
                     rebuild=options.rebuild, keep=options.keep, jobs=jobs, install_missing=install_missing,
                     host_command=host_command)


def docker_file(query: str, *, inputs: Mapping[str, Any] | None = None, context: Mapping[str, Any] | None = None,
                options: DockerOptions = DockerOptions(), settings: Settings | None = None) -> "Rendered":
    """The Dockerfile and build context `run --docker` would use (`.dockerfile`, `.listing()`, `.tag`)."""
    from cmx.docker.render import render

    s = _settings(settings)
    p = plan(query, inputs=inputs, context=context, settings=s).plan
    return render(p, _docker_request(p, query, inputs or {}, context or {}, options).build, s)


def docker_container(query: str, *, inputs: Mapping[str, Any] | None = None,
                     context: Mapping[str, Any] | None = None, options: DockerOptions = DockerOptions(),
                     settings: Settings | None = None) -> "ContainerSpec":
    """The container `run --docker` would start: image, command, user, environment, mounts, devices."""
    from cmx.docker.launch import container_spec
    from cmx.docker.render import render

    s = _settings(settings)
    p = plan(query, inputs=inputs, context=context, settings=s).plan
    request = _docker_request(p, query, inputs or {}, context or {}, options)
    rendered = render(p, request.build, s)
    labels = {"image": rendered.tag, "base_image": rendered.base_image}
    return container_spec(p, request, s, image=rendered.tag, labels=labels)


def run_docker(query: str, *, inputs: Mapping[str, Any] | None = None, context: Mapping[str, Any] | None = None,
               options: DockerOptions = DockerOptions(), jobs: int | None = None, install_missing: bool = False,
               argv: list[str] | None = None, settings: Settings | None = None,
               emit: Callable[[str], None] = print) -> int:
    """Build (or reuse) the plan's image and run the same query in it; the container's exit status. `argv` is
    the host command, recorded with its secrets hidden."""
    from cmx.docker.launch import run_in_docker

    s = _settings(settings)
    p = plan(query, inputs=inputs, context=context, settings=s).plan
    host_command = tuple(redacted_command(argv, p)) if argv else ()
    request = _docker_request(p, query, inputs or {}, context or {}, options, jobs=jobs,
                              install_missing=install_missing, host_command=host_command)
    return run_in_docker(p, request, s, emit=emit)


# --- Kubernetes ------------------------------------------------------------------------------

class K8sOptions(NamedTuple):
    """How `deploy --k8s` renders the manifests (a NamedTuple: `cmx find` stays light). None: the default
    that the plan or the device profile gives."""

    image: str | None = None            # the benchmark Job's cmx image (default: the tag `run --docker` builds)
    serving_image: str | None = None    # the vLLM image (default: the device's pinned vLLM base image)
    namespace: str | None = None
    name: str | None = None             # the objects' base name (default: vllm-<model>)
    gpus: int | None = None             # GPUs per serving pod (default: tensor_parallel_size)
    nodes: int = 1                      # above 1: a LeaderWorkerSet, pipeline parallel over the nodes
    gpu_name: str = ""                  # the target GPU ("AMD Instinct MI300X"), for the profile's choices
    hf_token_secret: str = "hf-token"
    cache_size: str | None = None       # default: by model (200Gi for llama2-70b)
    results_size: str = "10Gi"
    storage_class: str | None = None
    shm_size: str = "16Gi"
    runtime_class: str | None = None    # cuda only; None: the profile's ("nvidia"), "": none
    supplemental_groups: tuple[int, ...] | None = None  # rocm only; None: the profile's (44, 109)


class K8sDeployment(NamedTuple):
    """Rendered (and written) manifests; `applied` lists what --apply sent to the cluster."""

    rendered: "K8sRendered"
    out_dir: Path
    files: tuple[Path, ...]
    image_is_default: bool
    applied: tuple["Applied", ...] = ()

    def to_json(self) -> dict[str, Any]:
        spec = self.rendered.spec
        return {
            "out_dir": str(self.out_dir), "files": [str(f) for f in self.files],
            "objects": [{"kind": m.kind, "name": m.name, "file": m.filename} for m in self.rendered.manifests],
            "device": spec.device, "gpu_resource": spec.profile.resource, "gpus_per_pod": spec.gpus,
            "nodes": spec.nodes, "model": spec.model.repo, "revision": spec.model.revision,
            "serving_image": spec.serving_image, "image": spec.benchmark_image,
            "image_is_default": self.image_is_default, "namespace": spec.namespace,
            "service_url": spec.service_url, "benchmark_query": spec.benchmark_query,
            "applied": [{"kind": a.kind, "name": a.name, "namespace": a.namespace} for a in self.applied],
        }


# the inputs the benchmark Job sets itself: a user's value would point it somewhere else
_JOB_INPUTS = ("endpoint_url", "endpoint_model", "results_dir", "model_path")


def _job_query(query: str) -> str:
    words = query.split()
    return query if "_endpoint" in words else f"{query} _endpoint"


def deploy_k8s(query: str, *, inputs: Mapping[str, Any] | None = None, context: Mapping[str, Any] | None = None,
               out_dir: str | os.PathLike, options: K8sOptions = K8sOptions(), apply: bool = False,
               kubeconfig: Path | None = None, settings: Settings | None = None) -> K8sDeployment:
    """Render the Kubernetes manifests that serve the plan's model with vLLM and run the benchmark against it
    as a Job, validate them against the Kubernetes schemas, write them to `out_dir`, and with `apply` send
    them to the kubeconfig's cluster (after writing, so the files are there to read when applying fails)."""
    from dataclasses import replace

    from cmx.k8s import K8sError
    from cmx.k8s.devices import pod_profile
    from cmx.k8s.manifests import ServingSpec
    from cmx.k8s.output import render, write
    from cmx.k8s.served import engine_inputs, plan_precision, served_model

    s = _settings(settings)
    given = dict(inputs or {})
    clash = [k for k in _JOB_INPUTS if k in given]
    if clash:
        raise K8sError(f"--input {', '.join(clash)} cannot be given to deploy --k8s: the benchmark Job sets "
                       f"{'it' if len(clash) == 1 else 'them'} (the Service's URL, the served model, its results "
                       "volume, the model cache)",
                       hint="to benchmark a server you already run, use `cmx run 'QUERY _endpoint' --input "
                            "endpoint_url=...` instead")
    job_query = _job_query(query)
    p = plan(job_query, inputs=given, context=context, settings=s).plan
    from cmx.docker.render import plan_device

    profile = pod_profile(plan_device(p))
    if options.runtime_class is not None:
        if profile.name != "cuda":
            raise K8sError(f"--runtime-class is for NVIDIA GPUs; a {profile.name} pod takes no runtime class")
        profile = replace(profile, runtime_class=options.runtime_class or None)
    if options.supplemental_groups is not None:
        if profile.name != "rocm":
            raise K8sError(f"--supplemental-groups is for AMD GPUs (the /dev/kfd and render groups), not "
                           f"{profile.name}")
        profile = replace(profile, supplemental_groups=tuple(options.supplemental_groups))
    model = served_model(p)
    engine = engine_inputs(p)
    tp = int(engine["tensor_parallel_size"] or 1)
    image_is_default = options.image is None
    image = options.image or docker_file(job_query, inputs=given, context=context, settings=s).tag
    from cmx.docker import profile_for
    from cmx.mlperf.loadgen.harness_config import EngineSettings

    spec = ServingSpec(
        name=options.name or _default_name(model.repo), profile=profile, model=model,
        serving_image=options.serving_image or profile_for(profile.name).default_base_image,
        benchmark_image=image, benchmark_query=job_query,
        benchmark_inputs=tuple((k, str(v)) for k, v in given.items()),
        benchmark_context=tuple((k, str(v)) for k, v in (context or {}).items()),
        namespace=options.namespace, gpus=options.gpus or tp, nodes=options.nodes,
        engine=EngineSettings(precision=plan_precision(p), tensor_parallel_size=tp, max_num_seqs=engine["max_num_seqs"],
                              max_num_batched_tokens=engine["max_num_batched_tokens"],
                              gpu_memory_utilization=engine["gpu_memory_utilization"],
                              max_model_len=engine["max_model_len"]),
        gpu_name=options.gpu_name, hf_token_secret=options.hf_token_secret,
        cache_size=options.cache_size or model.cache_size, results_size=options.results_size,
        storage_class=options.storage_class, shm_size=options.shm_size)
    rendered = render(spec, image_is_default=image_is_default)
    out = Path(out_dir)
    files = write(rendered, out)
    result = K8sDeployment(rendered, out, files, image_is_default)
    return apply_k8s(result, kubeconfig=kubeconfig) if apply else result


def apply_k8s(deployment: K8sDeployment, *, kubeconfig: Path | None = None) -> K8sDeployment:
    """Server-side apply the rendered objects to the cluster of the kubeconfig ($KUBECONFIG or ~/.kube/config
    unless given); the deployment with what was applied."""
    from cmx.k8s.apply import apply

    applied = apply([m.body for m in deployment.rendered.manifests], kubeconfig=kubeconfig,
                    namespace=deployment.rendered.spec.namespace)
    return deployment._replace(applied=tuple(applied))


def _default_name(repo: str) -> str:
    """vllm-<the repository's name>, as a DNS label of at most 40 characters."""
    import re

    slug = re.sub(r"[^a-z0-9]+", "-", repo.rsplit("/", 1)[-1].lower()).strip("-")
    return f"vllm-{slug}"[:40].rstrip("-")


# --- Slurm ----------------------------------------------------------------------------------

def slurm_options(*, partition: str | None = None, account: str | None = None, time: str | None = None,
                  gpus_per_node: str | None = None, nodes: int | None = None, cpus_per_task: int | None = None,
                  mem: str | None = None, job_name: str | None = None) -> "SlurmOptions":
    """The sbatch options of a job cmx submits (None: Slurm's default, or cmx's where it has one)."""
    from cmx.slurm.script import SlurmOptions

    return SlurmOptions(partition=partition, account=account, time=time, gpus_per_node=gpus_per_node,
                        nodes=nodes, cpus_per_task=cpus_per_task, mem=mem, job_name=job_name)


def _run_args(query: str, inputs: Mapping[str, Any], context: Mapping[str, Any]) -> list[str]:
    """`run QUERY --input k=v ... --context k=v ...`: the arguments of the same run, for a job's command line."""
    args = ["run", query]
    for name, value in inputs.items():
        args += ["--input", f"{name}={to_json(value)}"]
    for name, value in context.items():
        args += ["--context", f"{name}={'true' if value is True else 'false' if value is False else value}"]
    return args


def submit_slurm(query: str, *, options: "SlurmOptions | None" = None, inputs: Mapping[str, Any] | None = None,
                 context: Mapping[str, Any] | None = None, cmx_args: list[str] | None = None,
                 host_command: list[str] | None = None, settings: Settings | None = None,
                 environ: Mapping[str, str] | None = None) -> "JobRecord":
    """Submit the query as a Slurm batch job that runs `cmx CMX_ARGS` (default: `run QUERY` with the inputs and
    context) on a node with the submitter's interpreter and CMX_* settings; the job's record. The plan is
    resolved here first, so a query that cannot run fails before anything is submitted. A secret input given on
    the command line is refused (the script would hold it): the job reads secrets from its environment."""
    from cmx.slurm import SlurmError
    from cmx.slurm.launch import submit
    from cmx.slurm.script import SlurmOptions
    from cmx.slurm.submit import tool

    env = os.environ if environ is None else environ
    tool("sbatch", env)  # before anything is resolved or written
    s = _settings(settings)
    p = plan(query, inputs=inputs, context=context, settings=s, environ=env).plan
    args = list(cmx_args) if cmx_args is not None else _run_args(query, inputs or {}, context or {})
    secrets = []
    for step in p:
        for name, value in step.inputs.items():
            if not isinstance(value, Secret) or not value.reveal():
                continue
            spec = step.recipe.inputs[name]
            if any(value.reveal() in arg for arg in args):
                raise SlurmError(f"secret input {name} of {step.name} is given on the command line: the batch "
                                 "script would hold it", hint=f"export {spec.env} in the submitting shell instead "
                                 "(sbatch passes the environment to the job)" if spec.env else
                                 "a secret without an `env:` variable cannot reach a Slurm job")
            secrets.append(f"{name} of {step.name}: ${spec.env}" if spec.env else f"{name} of {step.name}")
    results_dir = p.root_step.inputs.get("results_dir")
    return submit(query=query, recipe=p.root_step.name, cmx_args=args, options=options or SlurmOptions(),
                  settings=s, environ=env, results_dir=str(results_dir) if results_dir else None, secrets=secrets,
                  host_command=redacted_command(host_command, p) if host_command else ())


def slurm_jobs(*, all_jobs: bool = False, limit: int = 20, job_ids: list[str] | None = None,
               settings: Settings | None = None, environ: Mapping[str, str] | None = None) -> list["JobStatus"]:
    """The jobs cmx submitted (the `limit` most recent, or all), with their state from Slurm, run record, results
    folder and validity; a job that ended in any state but COMPLETED gets its results folder marked."""
    from cmx.slurm.jobs import read_record, read_records, statuses

    s = _settings(settings)
    if job_ids:
        records = [read_record(s.runs, j) for j in job_ids]
    else:
        records = read_records(s.runs)
        records = records if all_jobs else records[:limit]
    return statuses(s.runs, records, os.environ if environ is None else environ)


# --- sweeps ----------------------------------------------------------------------------------

def _root_recipe(query: str, s: Settings) -> "Recipe":
    """The recipe the query's plan starts from, picked as the resolver picks it."""
    from cmx.resolve.resolver import resolve

    idx = index(s)
    q = query_of(query)
    found = idx.find(q)
    if len(found) > 1 and q.variations:
        found = having_variations(found, q.variations, idx.get) or found
    if len(found) != 1:
        resolve(idx, q)  # raises the resolver's own error: no recipe, or several
    return idx.get(found[0].name)


def sweep(query: str, *, inputs: Mapping[str, str], context: Mapping[str, Any] | None = None,
          over: str | None = None, sweep_dir: Path | None = None, slurm: "SlurmOptions | None" = None,
          wait: bool = True, poll_s: float = 5.0, jobs: int | None = None, settings: Settings | None = None,
          progress: str = "none", environ: Mapping[str, str] | None = None,
          announce: Callable[[str], None] = lambda _: None) -> SweepResult:
    """Run the query once per value of one input (the --input with comma-separated values, or `over`), here one
    after the other, or as one Slurm job each (`slurm`), every point with its own results folder
    <sweep_dir>/<input>=<value> when the recipe has a results_dir input. Every value is typed and every point's
    plan resolved before anything runs. With Slurm and not `wait`, the result has no table yet:
    sweep_gather(sweep_dir) makes it later. `progress` is each local run's display (as reporter() takes it)."""
    from datetime import datetime

    from cmx.sweep import Point, point_dir, point_inputs, typed_sweep, write_sweep

    s = _settings(settings)
    env = os.environ if environ is None else environ
    if slurm is not None:
        from cmx.slurm.submit import tool

        tool("sbatch", env)
    recipe = _root_recipe(query, s)
    sw = typed_sweep(query, recipe, inputs, context or {}, over)
    if "results_dir" in sw.fixed:
        from cmx.sweep import SweepError

        raise SweepError("a sweep gives each point its own results_dir (<sweep dir>/<input>=<value>)",
                         hint="drop --input results_dir; --out picks the sweep's folder")
    if sweep_dir is None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        sweep_dir = s.runs / "sweeps" / f"{stamp}-{recipe.name}-{sw.name}"
    sweep_dir = sweep_dir.absolute()
    has_results = "results_dir" in recipe.inputs
    points = []
    for value in sw.values:
        folder = point_dir(sweep_dir, sw, value)
        given = point_inputs(sw, value, folder if has_results else None)
        plan(query, inputs=given, context=sw.context, settings=s, environ=env)  # every point resolves, first
        points.append(Point(value=value, name=sw.point_name(value), results_dir=str(folder) if has_results else None))
    mode = "slurm" if slurm is not None else "local"
    write_sweep(sweep_dir, sw, points, mode)
    for i, point in enumerate(points):
        given = point_inputs(sw, point.value, Path(point.results_dir) if point.results_dir else None)
        if slurm is not None:
            from dataclasses import replace

            job_name = slurm.job_name or f"cmx-sweep-{point.name}"
            record = submit_slurm(query, options=replace(slurm, job_name=job_name), inputs=given,
                                  context=sw.context, settings=s, environ=env)
            points[i] = replace(point, job_id=record.job_id)
            announce(f"{point.name}: Slurm job {record.job_id}")
        else:
            from dataclasses import replace

            announce(f"{point.name}: running")
            result = run(query, inputs=given, context=sw.context, jobs=jobs or default_jobs(), settings=s,
                         reporter=reporter(progress), environ=env, check=False, argv=["cmx", *_run_args(query, given, sw.context)])
            points[i] = replace(point, run_record=str(result.run_dir / "run.json"))
        write_sweep(sweep_dir, sw, points, mode)
    return sweep_gather(sweep_dir, wait=wait, poll_s=poll_s, settings=s, environ=env)


def sweep_gather(sweep_dir: Path, *, wait: bool = False, poll_s: float = 5.0, timeout_s: float | None = None,
                 settings: Settings | None = None, environ: Mapping[str, str] | None = None) -> SweepResult:
    """The table of a sweep from its folder: each point's run record, or its Slurm job's state and record. With
    `wait`, poll until every job ended (or `timeout_s`); otherwise a sweep with jobs still queued or running has
    no table yet (rows None) and says which points are pending."""
    import json
    import time

    from cmx.sweep import outcome_of_run, read_sweep, rows, table

    s = _settings(settings)
    env = os.environ if environ is None else environ
    sw, points, _mode = read_sweep(Path(sweep_dir))
    started = time.monotonic()
    while True:
        outcomes = []
        ids = [p.job_id for p in points if p.job_id]
        jobs = {j.record.job_id: j for j in slurm_jobs(job_ids=ids, settings=s, environ=env)} if ids else {}
        for p in points:
            if p.job_id:
                j = jobs[p.job_id]
                if not j.state.final:
                    outcomes.append(outcome_of_run(j.state.state.lower(), {}, None, p.results_dir,
                                                   detail=f"Slurm job {p.job_id}"))
                    continue
                status = "ok" if j.state.state == "COMPLETED" and j.run_status == "ok" else \
                    "failed" if j.state.state == "COMPLETED" else j.state.state.lower()
                record = j.run_record
                detail = f"Slurm job {p.job_id} {j.state.state}"
            else:
                record = p.run_record
                status, detail = None, None
            run_data: dict[str, Any] = {}
            if record:
                try:
                    run_data = json.loads(Path(record).read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    run_data = {}
            root = (run_data.get("plan") or {}).get("root")
            outputs = ((run_data.get("results") or {}).get(root) or {}).get("outputs") or {}
            if status is None:
                status = run_data.get("status") or "unknown"
                error = run_data.get("error")
                detail = "; ".join(line.strip() for line in error.splitlines()[:2])[:300] \
                    if status != "ok" and isinstance(error, str) and error else None
            if status != "ok":
                outputs = {}  # nothing of a point that did not complete is a result
            outcomes.append(outcome_of_run(status, outputs, record, p.results_dir, detail))
        pending = [o for o in outcomes if o.status in ("pending", "running", "configuring", "completing",
                                                        "suspended", "requeued", "resizing")
                   and o.detail and o.detail.startswith("Slurm job")]
        if not pending:
            table_rows = rows(sw, points, outcomes)
            return SweepResult(Path(sweep_dir), sw, points, outcomes, table_rows, table(sw, table_rows))
        if not wait or (timeout_s is not None and time.monotonic() - started > timeout_s):
            return SweepResult(Path(sweep_dir), sw, points, outcomes, None, None)
        time.sleep(poll_s)


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
                   and all(v in e.variations for v in q.variations)]
    return entries


def cache_entry(key: str, *, settings: Settings | None = None) -> "Entry":
    """The one entry whose key starts with `key`; an error when none, or several, do."""
    from cmx.cache.store import Store

    found = Store(_settings(settings).cache).find(key)
    if not found:
        raise CacheError(f"no cache entry has a key starting with {key!r}", hint="`cmx cache ls` lists keys")
    if len(found) > 1:
        raise CacheError(f"{key!r} starts {len(found)} keys", hint="give more characters of the key")
    if found[0].meta is None:
        raise CacheError(f"cache entry {found[0].path} has an unreadable meta.json",
                         hint=f"remove it with `cmx cache rm {found[0].key[:12]}`; it will be rebuilt")
    return found[0]


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
    """Each source with its number of recipes (None for a git source not fetched yet: nothing is fetched here)."""
    from cmx.registry.sources import read_registry

    s = _settings(settings)
    out = []
    for source in read_registry(s.registry):
        fetched = source.git is None or (source.checkout_dir(s.sources_dir) / ".git").is_dir()
        root = source.recipes_dir(s.sources_dir)
        count = sum(1 for p in root.glob("*/recipe.yaml") if not p.parent.name.startswith((".", "_"))) \
            if fetched and root.is_dir() else None
        out.append(SourceInfo(source, count))
    return out


def registry_update(name: str, rev: str | None = None, *, settings: Settings | None = None) -> "Source":
    """Fetch git source `name` at commit `rev` and pin it there (registry.yaml is edited only after the fetch
    worked); without `rev`, fetch the commit it is pinned to."""
    from cmx.errors import RegistryError
    from cmx.registry.sources import read_registry, update_rev
    from cmx.tools.git import checkout_commit

    s = _settings(settings)
    current = next((x for x in read_registry(s.registry, repairing=name) if x.name == name), None)
    if (current is None or current.git is None) and rev:
        return update_rev(s.registry, name, rev)  # says what is wrong with the name
    if current is None or current.git is None:
        known = ", ".join(x.name for x in read_registry(s.registry) if x.git is not None) or "none"
        raise RegistryError(f"{name!r} is not a git source of {s.registry}", hint=f"its git sources: {known}")
    candidate = current._replace(rev=rev or current.rev)
    try:
        checkout_commit(current.git, candidate.rev or "", candidate.checkout_dir(s.sources_dir))
    except Exception as exc:
        raise RegistryError(f"source {name!r}: {getattr(exc, 'message', exc)}", hint=getattr(exc, "hint", None)) \
            from None
    return update_rev(s.registry, name, rev) if rev else current


def default_jobs() -> int:
    return max(1, min(4, os.cpu_count() or 1))


# --- reports ----------------------------------------------------------------------------------

def report(results: str | os.PathLike, out: str | os.PathLike | None = None, *,
           other: str | os.PathLike | None = None) -> Path:
    """Write one self-contained HTML page for a benchmark's results folder (and, with `other`, B compared with
    A): the tests with their validity, rates, latencies and accuracy against the round's, plots of the
    latencies and of throughput over time, and how the run was made. Default `out`: RESULTS/report.html."""
    from cmx.mlperf.report.page import write_report

    target = Path(out) if out is not None else Path(results) / "report.html"
    return write_report(Path(results), target, other=Path(other) if other is not None else None)


# --- MLPerf submissions ------------------------------------------------------------------------

def check(path: str | os.PathLike, *, round_name: str = "v6.0") -> "CheckReport":
    """Check a submission tree against a round's rules (cmx.mlperf.submission.check); the report lists every problem."""
    from cmx.mlperf.submission.check import check_tree

    return check_tree(Path(path), round_name)


def check_text(report: "CheckReport") -> str:
    """The report as people read it: the results table, one line per problem, the verdict."""
    from cmx.mlperf.submission.check.report import format_report

    return format_report(report)


def check_expectation(report: "CheckReport", rules: set[str]) -> tuple[bool, str]:
    """Whether the tree breaks exactly `rules` (a smoke tree's known shortfalls), and the verdict line."""
    from cmx.mlperf.submission.check.report import expectation

    return expectation(report, rules)


def write_check_csv(report: "CheckReport", path: Path) -> Path:
    """The official checker's summary.csv columns, one row per result."""
    from cmx.mlperf.submission.check.report import write_csv

    return write_csv(report, path)
