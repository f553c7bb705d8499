"""The options `cmx run --slurm` and `cmx sweep --slurm` share, as click options and as the API's SlurmOptions,
and the host command line without them (what the job runs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from cmx import api

# option -> whether it takes a value; what is stripped from the command line the job runs
SLURM_FLAGS: dict[str, bool] = {"--slurm": False, "--partition": True, "--account": True, "--time": True,
                                "--gpus-per-node": True, "--nodes": True, "--cpus-per-task": True, "--mem": True,
                                "--job-name": True}


def slurm_options(fn: Callable) -> Callable:
    options = [
        click.option("--slurm", "in_slurm", is_flag=True,
                     help="Submit as a Slurm batch job (sbatch) instead of running here; `cmx jobs` follows it."),
        click.option("--partition", metavar="NAME", help="With --slurm: the partition (default: the "
                                                               "cluster's)."),
        click.option("--account", metavar="NAME", help="With --slurm: the account charged."),
        click.option("--time", "time_limit", metavar="TIME",
                     help="With --slurm: the time limit (MINUTES, HH:MM:SS, D-HH:MM); a job past it ends TIMEOUT."),
        click.option("--gpus-per-node", metavar="N", help="With --slurm: GPUs per node (N or TYPE:N)."),
        click.option("--nodes", type=click.IntRange(min=1), help="With --slurm: nodes (default 1)."),
        click.option("--cpus-per-task", type=click.IntRange(min=1), help="With --slurm: CPUs for the run."),
        click.option("--mem", metavar="SIZE", help="With --slurm: memory per node (e.g. 64G)."),
        click.option("--job-name", metavar="NAME", help="With --slurm: the job's name (default: cmx-RECIPE)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def slurm_options_of(*, partition: str | None, account: str | None, time_limit: str | None,
                     gpus_per_node: str | None, nodes: int | None, cpus_per_task: int | None, mem: str | None,
                     job_name: str | None) -> api.SlurmOptions:
    # cmx.api is imported here, not at the top: `cmx run` stays light
    from cmx import api

    return api.SlurmOptions(partition=partition, account=account, time=time_limit, gpus_per_node=gpus_per_node,
                             nodes=nodes, cpus_per_task=cpus_per_task, mem=mem, job_name=job_name)


def any_slurm_option(values: dict[str, object]) -> bool:
    return any(values.get(k) not in (None, False) for k in ("partition", "account", "time_limit", "gpus_per_node",
                                                            "nodes", "cpus_per_task", "mem", "job_name"))


def without_slurm_args(args: list[str], drop: tuple[str, ...] = ()) -> list[str]:
    """`args` less --slurm and its options (`--time 10` or `--time=10`), and less `drop`: the command the job
    runs. A value of another option (`--input time=10`) is kept; so is everything after a `--`."""
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.partition("=")[0] if arg.startswith("--") else arg
        if arg == "--":
            out += args[i:]
            break
        if arg in drop:
            i += 1
            continue
        if name in SLURM_FLAGS:
            takes_value = SLURM_FLAGS[name] and "=" not in arg
            i += 2 if takes_value else 1
            continue
        out.append(arg)
        i += 1
    return out
