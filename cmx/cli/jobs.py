"""`cmx jobs`: the Slurm jobs cmx submitted, their states and result folders."""

from __future__ import annotations

import click

from cmx.cli.common import app, echo_json, registry_option


@click.command("jobs", help="""List the Slurm jobs cmx submitted (`cmx run --slurm`, `cmx sweep --slurm`).

Each job's state comes from squeue while it is queued or running, then from sacct, or
from `scontrol show job` on a cluster without accounting; once a final state is
seen it is kept in the job's record (<runs>/slurm/<jobid>.json), as slurmctld
forgets finished jobs. A job's results folder is its results_dir input, or the
results_dir its run recorded.

A job that ended in any state but COMPLETED (CANCELLED, FAILED, TIMEOUT...) has no
valid result: its validity is that state, and its results folder, if any, gets a
file named after the state (e.g. CANCELLED) saying so.

\b
    cmx jobs
    cmx jobs --all --json
    cmx jobs 1234
""")
@click.argument("job_ids", nargs=-1, metavar="[JOBID]...")
@click.option("--all", "all_jobs", is_flag=True, help="Every job cmx submitted (default: the 20 most recent).")
@click.option("--json", "as_json", is_flag=True, help="Print the jobs as JSON.")
@registry_option
@click.pass_context
def command(ctx: click.Context, job_ids: tuple[str, ...], all_jobs: bool, as_json: bool) -> None:
    from cmx import api

    found = api.slurm_jobs(all_jobs=all_jobs, job_ids=list(job_ids) or None, settings=app(ctx).settings())
    if as_json:
        echo_json([j.to_json() for j in found])
        return
    if not found:
        click.echo("no Slurm jobs submitted by cmx (`cmx run QUERY --slurm` submits one)")
        return
    for j in found:
        state = j.state.state + (f" ({j.state.reason})" if j.state.reason and not j.state.final else "")
        validity = f", {j.validity}" if j.validity else ""
        click.echo(f"{j.record.job_id}  {state}{validity}  {j.record.query}  submitted {j.record.submitted}")
        if j.results_dir:
            click.echo(f"    results: {j.results_dir}" + (f" (marked {j.marker})" if j.marker else ""))
        if j.run_record:
            click.echo(f"    record: {j.run_record}" + (f" ({j.run_status})" if j.run_status else ""))
        click.echo(f"    output: {j.record.stdout}")
        if j.state.state == "UNKNOWN" and j.state.reason:
            click.echo(f"    {j.state.reason}")
