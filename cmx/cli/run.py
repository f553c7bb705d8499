"""`cmx run QUERY`: resolve, then run every step that is not cached, in dependency order."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import click

from cmx.cli.common import app, echo_json, parse_query, query_options, registry_option
from cmx.cli.docker_options import (
    container_of,
    container_option,
    docker_options,
    docker_options_of,
    refuse_without_docker,
)
from cmx.cli.run_output import done_lines, result_json
from cmx.cli.slurm_options import (
    any_slurm_option,
    slurm_options,
    slurm_options_of,
    without_slurm_args,
)


@click.command("run", help="""Resolve QUERY and run it.

Steps run in dependency order, independent ones in parallel (--jobs). A step whose
cache key is already in the cache is not run again. A run whose root step is cached
is answered again from a memo while none of the files, environment variables or
machine facts its plan read has changed (docs/cli.md § cmx run). Each run writes
runs/<time>-<recipe>/run.json and one log per step. When a step fails, cmx names the
chain of steps that led to it, prints the end of its log and a command that re-runs
just that step.

\b
    cmx run "detect system"
    cmx run "get python-package" --input package=numpy
    cmx run "app mlperf inference llama2 _cpu _tiny _short" --jobs 2
    cmx run "app mlperf inference llama2 _rocm" --dry-run
    cmx run "app mlperf inference llama2 _cpu _tiny _short" --docker
    cmx run "app mlperf inference llama2 _cpu _tiny _short" --container podman

With --docker the plan is resolved here, an image is rendered from it (the device
profile's base image, every step's docker: additions, this cmx built as a wheel),
built unless an identical one exists, and the same query runs inside it with the
cache, run records and every path of the plan mounted at their own paths, as the
host user. --container podman does the same with podman, rootful or (as a user
other than root) rootless, with no daemon; --container alone takes CMX_CONTAINER's
engine, or `container:` in the cmx home's settings.yaml, else Docker where it is
reachable, else podman (and says so). `cmx docker QUERY` shows the Dockerfile and
the container settings, `--print-run` the exact command.

With --slurm the run is submitted as a Slurm batch job (sbatch) and cmx returns at
once with its id; the job runs this same command line (less --slurm and its
options) with this Python interpreter, and the cache and run records of this cmx
home (CMX_CACHE, CMX_RUNS, exported into the job): they must be on storage every
node sees at the same path, or the job stops at once saying so. A secret input
reaches the job through its environment (export it before submitting), never the
script; so does an input holding a URL's password, which cmx puts there itself
(--input-env). `cmx jobs` follows the jobs; the script is templates/slurm/run.sbatch.j2.

\b
    cmx run "app mlperf inference llama2 _cuda" --slurm --partition gpu \\
        --gpus-per-node 8 --time 4:00:00 --input results_dir=/shared/results
    cmx jobs

With --locked FILE (a lockfile from `cmx lock`, or the cmx.lock every run leaves
beside its run.json) the lock's query runs again with its inputs and context, after
checking that nothing differs: the installed vLLM, torch, LoadGen..., every recipe's
files, the variations, inputs, context and cache keys, and the checksums of what
the cache holds. The first difference refuses the run and says what changed. Only
--input values that move outputs (inputs of type path, like results_dir) may be
given, and the credentials of a locked URL, which a lock never keeps (the replay asks
for them: --input-env NAME=VARIABLE); after the run, a step that built other files
than the lock records fails it.
A lock made with `cmx lock --docker` replays in its image: the Dockerfile and build
context rendered now must be the locked ones and the image with the locked ID must be
in the engine that locked it (--container names another); --load-image FILE loads
it first from an archive `cmx lock --save-image FILE` wrote. The container then runs
`cmx run --locked` on the same lock, which checks the steps and the image's packages
inside (--gpus and --keep apply).

\b
    cmx lock "app mlperf inference llama2 _cpu _tiny _short" -o cmx.lock
    cmx run --locked cmx.lock --input results_dir=R
""")
@click.argument("query", nargs=-1)
@click.option("--locked", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Replay a lockfile exactly (no QUERY), or refuse at its first difference.")
@query_options()
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Steps to run at once (default: min(4, CPUs)).")
@click.option("--dry-run", is_flag=True, help="Only show the plan (same as `cmx plan`).")
@click.option("--json", "as_json", is_flag=True, help="Print the result (outputs, steps, logs) as JSON.")
@click.option("--install-missing", is_flag=True, default=None,
              help="Let steps install what they lack (Python packages) instead of failing with the "
                   "command to run; also CMX_INSTALL_MISSING=1. Never drivers.")
@click.option("--progress", type=click.Choice(["auto", "live", "plain", "none"]), default="auto",
              show_default=True, help="Live display on a terminal, plain lines otherwise.")
@click.option("--docker", "in_docker", is_flag=True, help="Run the query in a Docker container built from the plan.")
@container_option
@click.option("--rebuild", is_flag=True, help="In a container: build the image even if an identical one exists.")
@click.option("--keep", is_flag=True, help="In a container: keep the container and the build context.")
@click.option("--load-image", type=click.Path(path_type=Path, dir_okay=False, exists=True), metavar="FILE",
              help="With --locked: load the lock's image from this archive (`cmx lock --save-image`) first.")
@docker_options
@slurm_options
@registry_option
@click.pass_context
def command(ctx: click.Context, query: tuple[str, ...], locked: Path | None, inputs: tuple[str, ...],
            inputs_file: str | None, input_envs: tuple[str, ...], contexts: tuple[str, ...], jobs: int | None,
            dry_run: bool, as_json: bool, install_missing: bool | None, progress: str, in_docker: bool,
            container: str | None, rebuild: bool, keep: bool, load_image: Path | None, in_slurm: bool,
            **options: Any) -> None:  # click's values, of the types the option decorators give
    if bool(query) == bool(locked):
        raise click.UsageError("give a QUERY, or --locked FILE (whose query runs), not both" if query else
                               "missing QUERY (or --locked FILE)")
    engine = container_of(in_docker, container)
    if locked and (contexts or dry_run or in_slurm or in_docker):
        raise click.UsageError("--locked replays the lock's query and context where the lock says (natively, or "
                               "in its image for a lock made with `cmx lock --docker`): it goes with neither "
                               "--context, --dry-run, --slurm nor --docker")
    if load_image and not locked:
        raise click.UsageError("--load-image goes with --locked: it loads the lock's image")
    q = parse_query(query, inputs, contexts, inputs_file, input_envs)
    text, given, context = q.query, q.inputs, q.context
    slurm = {k: options.pop(k) for k in ("partition", "account", "time_limit", "gpus_per_node", "nodes",
                                         "cpus_per_task", "mem", "job_name")}
    docker = options
    if locked:
        from cmx import api

        if rebuild or docker["base_image"] or docker["ca_bundle"] or docker["wheelhouse"] or docker["cmx_wheel"]:
            raise click.UsageError("--rebuild, --base-image, --ca-bundle, --wheelhouse and --cmx-wheel would change "
                                   "the image; a lock made with --docker holds its image")
        if api.lock_runs_in_docker(locked):
            if as_json:
                raise click.UsageError("--json does not go with a lock made with --docker: the replay in the "
                                       "container prints its progress")
            _replay_in_docker(ctx, locked, given, jobs=jobs, install_missing=bool(install_missing), keep=keep,
                              gpus=docker["gpus"], container=None if engine == "auto" else engine,
                              load_image=load_image)
            return
        if keep or docker["gpus"] or engine or load_image:
            raise click.UsageError("--keep, --gpus, --container and --load-image go with a lock made with "
                                   "`cmx lock --docker` or `--container`")
    if in_slurm:
        if dry_run or engine or rebuild or keep or any(docker.values()):
            raise click.UsageError("--slurm goes with neither --dry-run nor a container (--docker, --container) and "
                                   "its options: the job runs the query natively on a node")
        _submit_to_slurm(ctx, text, given, context, as_json, slurm)
        return
    if any_slurm_option(slurm):
        raise click.UsageError("--partition, --account, --time, --gpus-per-node, --nodes, --cpus-per-task, --mem "
                               "and --job-name go with --slurm")
    if dry_run:
        from cmx.cli.plan import print_plan

        print_plan(text, given, context, as_json, False, ctx)
        return
    if engine:
        if as_json:
            raise click.UsageError("--json does not go with --docker or --container: the run inside prints its "
                                   "progress; read its run.json (the path is printed at the end)")
        _run_in_docker(ctx, text, given, context, jobs=jobs, rebuild=rebuild, keep=keep,
                       install_missing=bool(install_missing), container=engine, **docker)
        return
    refuse_without_docker(rebuild, keep, *docker.values())
    from cmx import api
    from cmx.errors import CmxError

    state = app(ctx)
    prefix = "cmx" + (f" --registry {shlex.quote(state.registry)}" if state.registry else "") + " run"
    try:
        result = api.run(text, inputs=given, context=context, jobs=jobs or api.default_jobs(),
                         settings=state.settings(), reporter=api.reporter("none" if as_json else progress),
                         check=False, argv=["cmx", *sys.argv[1:]], rerun_prefix=prefix,
                         install_missing=True if install_missing else None,  # None: CMX_INSTALL_MISSING decides
                         locked=locked,
                         # the next identical command line may be answered from a memo (cmx.cli.main), which
                         # knows only a query and --input pairs, with the home from the environment (the API
                         # itself declines a lock or a context); a value read from a file or a variable may change
                         memo=not (inputs_file or input_envs or state.registry))
    except CmxError as exc:
        if not as_json:
            raise
        echo_json({"ok": False, "query": text, "error": exc.render()})  # a script reads stdout either way
        ctx.exit(exc.exit_code)
    steps, outputs = result.steps_json(), api.to_json(result.outputs)
    if as_json:
        echo_json(result_json(ok=result.ok, query=result.plan.query, root=result.plan.root,
                              run_dir=str(result.run_dir), seconds=result.seconds, outputs=outputs, steps=steps,
                              error=result.error.render() if result.error else None))
        if result.error:
            ctx.exit(1)
        return
    if result.error is not None:
        raise result.error
    for line in done_lines(result.plan.root, result.seconds, steps, str(result.run_dir), outputs):
        click.echo(line)


def _submit_to_slurm(ctx: click.Context, text: str, given: dict, context: dict, as_json: bool,
                     slurm: dict) -> None:
    from cmx import api

    args = without_slurm_args(sys.argv[1:], drop=("--json",))
    record = api.submit_slurm(text, options=slurm_options_of(**slurm), inputs=given, context=context,
                              cmx_args=args, host_command=["cmx", *sys.argv[1:]], settings=app(ctx).settings())
    if as_json:
        echo_json(record.to_json())
        return
    click.echo(f"submitted Slurm job {record.job_id}: {record.query}")
    click.echo(f"  script: {record.script}")
    click.echo(f"  output: {record.stdout}")
    if record.results_dir:
        click.echo(f"  results: {record.results_dir}")
    click.echo("  follow it: cmx jobs")


# options: click's values, of the types the option decorators give
def _run_in_docker(ctx: click.Context, text: str, given: dict, context: dict, *, jobs: int | None,
                   install_missing: bool, **options: Any) -> None:
    from cmx import api

    code = api.run_docker(text, inputs=given, context=context, options=docker_options_of(**options), jobs=jobs,
                          install_missing=install_missing, argv=["cmx", *sys.argv[1:]],
                          settings=app(ctx).settings(), emit=click.echo)
    if code != 0:
        click.echo(f"error: the run in the container exited with status {code} (its error is above)", err=True)
        ctx.exit(code)


def _replay_in_docker(ctx: click.Context, locked: Path, given: dict, *, jobs: int | None, install_missing: bool,
                      keep: bool, gpus: str | None, container: str | None, load_image: Path | None) -> None:
    from cmx import api

    ids = tuple(g.strip() for g in gpus.split(",") if g.strip()) if gpus else None
    code = api.replay_docker(locked, inputs=given, gpus=ids, keep=keep, jobs=jobs, install_missing=install_missing,
                             container=container, load_image=load_image, argv=["cmx", *sys.argv[1:]],
                             settings=app(ctx).settings(), emit=click.echo)
    if code != 0:
        click.echo(f"error: the locked run in the container exited with status {code} (its error is above)",
                   err=True)
        ctx.exit(code)

