"""`cmx sweep QUERY --input NAME=V1,V2,...`: a run per value of one input, and the table of their results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cmx.cli.common import app, echo_json, parse_query, registry_option
from cmx.cli.slurm_options import any_slurm_option, slurm_options, slurm_options_of


@click.command("sweep", help="""Run QUERY once per value of one input and tabulate the results.

The swept input is the one --input with comma-separated values (or the one --over
names, when another input's value has commas too, like scenarios=Offline,Server);
every other --input is the same for each point. Each value is checked against the
type the recipe declares for the input, and each point's plan resolved, before
anything runs. Each point gets its own results folder, <sweep dir>/<input>=<value>
(when the recipe has a results_dir input); the sweep dir holds sweep.json.

The table has a row per point (and scenario): validity (VALID, INVALID, or failed,
cancelled... for a point that did not complete, whose results never count), tokens/s,
TTFT p99 and TPOT p99 of its performance run.

Points run here one after the other, or with --slurm as one batch job each: with
--wait cmx waits for them all and prints the table; without, it prints the job ids,
and `cmx sweep --gather SWEEP_DIR` prints the table once they ended.

\b
    cmx sweep "app mlperf inference llama2 _cpu _tiny _short _server" \\\\
        --input target_qps_server=10,20,40
    cmx sweep "app mlperf inference llama2 _cuda _server" \\\\
        --input target_qps_server=100,150,200 --slurm --partition gpu --gpus-per-node 8 --wait
    cmx sweep --gather runs/sweeps/20260101-120000-app-mlperf-inference-llama2-target_qps_server
""")
@click.argument("query", nargs=-1)
@click.option("--input", "-i", "inputs", multiple=True, metavar="NAME=VALUE",
              help="An input of the root recipe; one of them NAME=V1,V2,... is swept.")
@click.option("--over", metavar="NAME", help="The swept input, when several --input values hold commas.")
@click.option("--context", "-c", "contexts", multiple=True, metavar="KEY=VALUE", help="A run-wide context value.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), metavar="DIR",
              help="The sweep's folder (default: <runs>/sweeps/<time>-<recipe>-<input>).")
@click.option("--gather", "gather_dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              metavar="SWEEP_DIR", help="Print the table of a sweep submitted earlier (no QUERY).")
@click.option("--wait", is_flag=True, help="With --slurm or --gather: wait until every job ended.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Steps to run at once, per point.")
@click.option("--json", "as_json", is_flag=True, help="Print the sweep (points, rows) as JSON.")
@slurm_options
@registry_option
@click.pass_context
def command(ctx: click.Context, query: tuple[str, ...], inputs: tuple[str, ...], over: str | None,
            contexts: tuple[str, ...], out_dir: Path | None, gather_dir: Path | None, wait: bool, jobs: int | None,
            as_json: bool, in_slurm: bool, **slurm: Any) -> None:  # slurm: click's values, typed by slurm_options
    from cmx import api

    settings = app(ctx).settings()
    if gather_dir is not None:
        if query or inputs or in_slurm:
            raise click.UsageError("--gather takes the sweep's folder only: no QUERY, --input or --slurm")
        result = api.sweep_gather(gather_dir, wait=wait, settings=settings)
    else:
        if not query:
            raise click.UsageError("give a QUERY (or --gather SWEEP_DIR)")
        if not in_slurm and any_slurm_option(slurm):
            raise click.UsageError("--partition, --account, --time, --gpus-per-node, --nodes, --cpus-per-task, "
                                   "--mem and --job-name go with --slurm")
        say = (lambda text: click.echo(text, err=True)) if as_json else click.echo
        q = parse_query(query, inputs, contexts)
        result = api.sweep(q.query, inputs=q.inputs, context=q.context, over=over, sweep_dir=out_dir,
                           slurm=slurm_options_of(**slurm) if in_slurm else None, wait=wait or not in_slurm,
                           jobs=jobs, settings=settings, progress="none" if as_json else "plain",
                           announce=say)
    if as_json:
        echo_json(result.to_json())
    elif result.table is None:
        for point, outcome in zip(result.points, result.outcomes, strict=True):
            click.echo(f"{point.name}: Slurm job {point.job_id} {outcome.status}")
        click.echo(f"sweep: {result.sweep_dir}\n  table once they ended: cmx sweep --gather {result.sweep_dir} "
                   "(--wait to wait); cmx jobs shows each job")
    else:
        click.echo(result.table)
        for point, outcome in zip(result.points, result.outcomes, strict=True):
            if outcome.status != "ok":
                click.echo(f"{point.name}: {outcome.status}" + (f": {outcome.detail}" if outcome.detail else "")
                           + (f" (record: {outcome.run_record})" if outcome.run_record else ""))
        click.echo(f"sweep: {result.sweep_dir}")
    if result.rows is not None and any(r.status != "ok" for r in result.rows):
        ctx.exit(1)
