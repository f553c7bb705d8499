"""Submitting one `cmx run` as a batch job: its folder under <runs>/slurm/, the script, sbatch, the record.

Nothing is written before sbatch is known to be on PATH, and the job record only once sbatch gave a job
id, so a failed submission leaves no job for `cmx jobs` to follow (its folder stays, with the script).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

from cmx.settings import Settings
from cmx.slurm import SlurmError
from cmx.slurm.jobs import JobRecord, records_dir, write_record
from cmx.slurm.script import JobFiles, Submission, render_script
from cmx.slurm.submit import sbatch, tool


def job_folder(runs: Path, name: str) -> JobFiles:
    """A new folder <runs>/slurm/<time>-<name>[-n] for the script and the job's stdout and stderr."""
    base = f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{name}"
    parent = records_dir(runs)
    parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        folder = parent / (base if n == 1 else f"{base}-{n}")
        try:
            folder.mkdir()
            return JobFiles(folder)
        except FileExistsError:
            continue
    raise SlurmError(f"cannot make a job folder under {parent}")


def submit(job: Submission, settings: Settings, environ: Mapping[str, str], python: str = sys.executable) -> JobRecord:
    """Render the script that runs `python -m cmx CMX_ARGS` on a node, submit it, record the job."""
    tool("sbatch", environ)
    files = job_folder(settings.runs, job.recipe)
    command = (python, "-m", "cmx", *job.cmx_args)
    options = job.options
    text = render_script(job, command, files, settings, environ, Path.cwd())
    files.script.write_text(text, encoding="utf-8")
    files.script.chmod(0o750)
    job_id = sbatch(files.script, environ)
    record = JobRecord(job_id=job_id, query=job.query, argv=command, host_command=job.host_command,
                       script=str(files.script), stdout=str(files.stdout), stderr=str(files.stderr),
                       results_dir=job.results_dir, submitted=datetime.now().astimezone().isoformat(timespec="seconds"),
                       options={k: v for k, v in asdict(options).items() if v is not None})
    write_record(settings.runs, record)
    return record
