"""The Slurm verbs: `cmx run --slurm` (a query resolved here, refused when a secret would reach the script, then
submitted) and `cmx jobs` (the jobs cmx submitted, with their states)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cmx.recipe.types import to_json
from cmx.secrets import Secret
from cmx.settings import Settings
from cmx.slurm.jobs import JobRecord, JobStatus
from cmx.slurm.script import SlurmOptions


@dataclass(frozen=True)
class JobRequest:
    """A query to run as a batch job: `cmx CMX_ARGS` (default: `run QUERY` with the inputs and context), and the
    command typed on the host (recorded with its secrets hidden)."""

    query: str
    options: SlurmOptions = field(default_factory=SlurmOptions)
    inputs: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    cmx_args: Sequence[str] | None = None
    host_command: Sequence[str] | None = None


def run_args(query: str, inputs: Mapping[str, Any], context: Mapping[str, Any]) -> list[str]:
    """`run QUERY --input k=v ... --context k=v ...`: the arguments of the same run, for a job's command line."""
    args = ["run", query]
    for name, value in inputs.items():
        args += ["--input", f"{name}={to_json(value)}"]
    for name, value in context.items():
        args += ["--context", f"{name}={'true' if value is True else 'false' if value is False else value}"]
    return args


def submit_query(request: JobRequest, settings: Settings, environ: Mapping[str, str]) -> JobRecord:
    """Submit the query as a Slurm batch job on a node with the submitter's interpreter and CMX_* settings; the
    job's record. The plan is resolved here first, so a query that cannot run fails before anything is
    submitted. A secret input given on the command line is refused (the script would hold it): the job reads
    secrets from its environment. So it does an input whose value holds a URL's credentials, which cmx puts in
    sbatch's environment itself (`--input-env`)."""
    from cmx.execute import input_env
    from cmx.execute.plan_check import check_plan
    from cmx.execute.record import redact_argv
    from cmx.execute.request import Runtime, resolved
    from cmx.slurm import SlurmError
    from cmx.slurm.launch import submit
    from cmx.slurm.script import Submission
    from cmx.slurm.submit import tool

    tool("sbatch", environ)  # before anything is resolved or written
    p = resolved(request.query, request.inputs, request.context, Runtime(settings, environ=environ))
    check_plan(p)  # before the job waits in the queue, not when it starts
    args = list(request.cmx_args) if request.cmx_args is not None else run_args(request.query, request.inputs,
                                                                                request.context)
    # a URL's password goes by the job's environment (sbatch exports sbatch's own), never into the script
    args, by_env = input_env.hide_in_argv(args)
    secrets = [f"{name}: ${variable} (a URL with credentials; cmx sets it for sbatch)"
               for name, variable in by_env.by_variable]
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
    host = tuple(redact_argv(list(request.host_command), p)) if request.host_command else ()
    return submit(Submission(query=request.query, recipe=p.root_step.name, cmx_args=tuple(args),
                             options=request.options, results_dir=str(results_dir) if results_dir else None,
                             secrets=tuple(secrets), host_command=host), settings, {**environ, **by_env.environment})


def job_statuses(settings: Settings, environ: Mapping[str, str], *, all_jobs: bool = False, limit: int = 20,
                 job_ids: Sequence[str] | None = None) -> list[JobStatus]:
    """The jobs cmx submitted (the `limit` most recent, or all, or those named), with their state from Slurm, run
    record, results folder and validity; a job that ended in any state but COMPLETED gets its results folder
    marked."""
    from cmx.slurm.jobs import read_record, read_records, statuses

    if job_ids:
        records = [read_record(settings.runs, j) for j in job_ids]
    else:
        records = read_records(settings.runs)
        records = records if all_jobs else records[:limit]
    return statuses(settings.runs, records, environ)
