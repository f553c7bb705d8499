"""The sbatch script of `cmx run --slurm`: rendered from templates/slurm/run.sbatch.j2.

The script runs the same `cmx run` command line on a node, with the interpreter that submitted it (so the
node needs the same Python environment at the same path: a shared file system) and with the submitter's
CMX_* settings exported, so the job reads and fills the same cache and writes its run record where
`cmx jobs` finds it. It never holds a secret: a `type: secret` input reaches the job through its
environment (sbatch exports the submitter's environment by default).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cmx import __version__
from cmx.settings import Settings
from cmx.templates import render

TEMPLATE = "slurm/run.sbatch.j2"


@dataclass(frozen=True)
class SlurmOptions:
    """The sbatch options `cmx run --slurm` takes; None leaves a choice to the cluster's defaults."""

    partition: str | None = None
    account: str | None = None
    time: str | None = None            # Slurm's time format: MINUTES, HH:MM:SS, D-HH:MM...
    gpus_per_node: str | None = None   # a count, or TYPE:COUNT
    nodes: int | None = None
    cpus_per_task: int | None = None
    mem: str | None = None             # e.g. 64G
    job_name: str | None = None

    def directives(self) -> list[str]:
        """`#SBATCH` lines (without the prefix) for the options that are set."""
        pairs = [("partition", self.partition), ("account", self.account), ("time", self.time),
                 ("gpus-per-node", self.gpus_per_node), ("nodes", self.nodes),
                 ("cpus-per-task", self.cpus_per_task), ("mem", self.mem)]
        return [f"--{name}={value}" for name, value in pairs if value not in (None, "")]


@dataclass(frozen=True)
class JobFiles:
    """Where a submitted job's files go: a folder of its own under <runs>/slurm/."""

    folder: Path

    @property
    def script(self) -> Path:
        return self.folder / "job.sbatch"

    @property
    def stdout(self) -> Path:
        return self.folder / "stdout.log"

    @property
    def stderr(self) -> Path:
        return self.folder / "stderr.log"


def cmx_environment(settings: Settings, environ: Mapping[str, str]) -> dict[str, str]:
    """The CMX_* variables the job exports: the submitter's settings, resolved to absolute paths, so the
    job's cmx finds the same registry, cache and run records whatever the node's defaults would be."""
    env = {"CMX_HOME": environ["CMX_HOME"]} if environ.get("CMX_HOME") else {}
    env.update(CMX_REGISTRY=str(settings.registry), CMX_CACHE=str(settings.cache), CMX_RUNS=str(settings.runs))
    return env


@dataclass(frozen=True)
class Submission:
    """One job to submit: `cmx CMX_ARGS` for the query whose root is `recipe`. `secrets` describes the secret
    inputs (with where their value comes from) the job must find in its environment; `host_command` is what
    was typed (secrets hidden)."""

    query: str
    recipe: str
    cmx_args: tuple[str, ...]
    options: SlurmOptions
    results_dir: str | None
    secrets: tuple[str, ...] = ()
    host_command: tuple[str, ...] = ()


def render_script(job: Submission, command: Sequence[str], files: JobFiles, settings: Settings,
                  environ: Mapping[str, str], workdir: Path) -> str:
    """The script's text. `command` is the whole command the job runs (interpreter first)."""
    options = job.options
    return render(TEMPLATE, version=__version__, job_name=options.job_name or f"cmx-{job.recipe}",
                  directives=options.directives(),
                  stdout=str(files.stdout), stderr=str(files.stderr), workdir=shlex.quote(str(workdir)),
                  environment={k: shlex.quote(v) for k, v in cmx_environment(settings, environ).items()},
                  cache=shlex.quote(str(settings.cache)), runs=shlex.quote(str(settings.runs)),
                  command=shlex.join(command), secret_inputs=list(job.secrets),
                  submitted_from=" ".join(job.host_command).replace("\n", " "))
