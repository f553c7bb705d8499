"""The Slurm commands cmx runs (sbatch, squeue, scontrol, sacct, scancel) and what their output means.

Each call is a real subprocess with a time limit; a failure becomes a SlurmError that quotes the
command's own message. Job states come from squeue while a job is queued or running, then from sacct;
a cluster without accounting (sacct: "accounting storage is disabled") still answers `scontrol show job`
until slurmctld forgets the job (MinJobAge, 300 s by default).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cmx.slurm import SlurmError

# states after which a job never runs again (Slurm's JOB_STATE names, as squeue/sacct/scontrol print them)
FINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                          "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT"})
_TIMEOUT_S = 60


@dataclass(frozen=True)
class JobState:
    """What Slurm says of one job. `source` names the command that said it ("squeue", "sacct", "scontrol"),
    or "record" for a final state cmx saw earlier and kept; `state` is UNKNOWN when nothing knows the job."""

    state: str
    source: str
    exit_code: str | None = None  # "0:0" (status:signal), once the job ended
    reason: str | None = None     # why it is pending, or why its state is unknown

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES


def tool(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The path of Slurm command `name`, or the error a user without Slurm here needs to read."""
    path = shutil.which(name, path=environ.get("PATH") if environ is not None else None)
    if path is None:
        raise SlurmError(f"{name} was not found on PATH: --slurm submits through Slurm's commands, so it runs "
                         "where they work", hint="run it on the cluster's login node, or load Slurm first (e.g. "
                                                 "`module load slurm`, or add Slurm's bin folder to PATH); "
                                                 "without --slurm the query runs on this machine")
    return path


def _run(args: list[str], environ: Mapping[str, str] | None, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    exe = tool(args[0], environ)
    try:
        proc = subprocess.run([exe, *args[1:]], capture_output=True, text=True, timeout=_TIMEOUT_S,
                              env=dict(environ) if environ is not None else None)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"`{' '.join(args)}` did not answer in {_TIMEOUT_S} s",
                         hint="is slurmctld up? `sinfo` says whether the controller answers") from None
    if check and proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()
        raise SlurmError(f"`{' '.join(args)}` failed (exit status {proc.returncode}): "
                         f"{said[-1] if said else 'no message'}",
                         hint="`sinfo` shows the partitions and whether the controller answers")
    return proc


def sbatch(script: Path, environ: Mapping[str, str] | None = None) -> str:
    """Submit `script`; the job id (`--parsable` prints "ID" or "ID;CLUSTER")."""
    proc = _run(["sbatch", "--parsable", str(script)], environ)
    job_id = proc.stdout.strip().splitlines()[-1].split(";")[0] if proc.stdout.strip() else ""
    if not job_id.isdigit():
        raise SlurmError(f"sbatch answered {proc.stdout.strip()!r}, not a job id", where=str(script))
    return job_id


def scancel(job_id: str, environ: Mapping[str, str] | None = None) -> None:
    _run(["scancel", job_id], environ)


def job_states(ids: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, JobState]:
    """The state of each job: squeue for the queued and running, then sacct, then `scontrol show job` for the
    rest (when sacct is not configured); UNKNOWN for a job no command knows any more."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return {}
    out = _squeue(wanted, environ)
    rest = [i for i in wanted if i not in out]
    if rest:
        out.update(_sacct(rest, environ))
    for job_id in [i for i in rest if i not in out]:
        out[job_id] = _scontrol(job_id, environ)
    return out


def _squeue(ids: list[str], environ: Mapping[str, str] | None) -> dict[str, JobState]:
    # every job in the queue, filtered here: `squeue -j` fails as a whole when one id is no longer known
    proc = _run(["squeue", "--noheader", "--all", "--format=%i|%T|%r"], environ)
    out = {}
    for line in proc.stdout.splitlines():
        job_id, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        if job_id in ids:
            out[job_id] = JobState(state, "squeue", reason=None if reason in ("", "None") else reason)
    return out


def _sacct(ids: list[str], environ: Mapping[str, str] | None) -> dict[str, JobState]:
    """States from accounting; {} when accounting is not configured (sacct fails), so scontrol is asked."""
    proc = _run(["sacct", "--noheader", "--parsable2", "--allocations", "--format=JobID,State,ExitCode",
                 "--jobs", ",".join(ids)], environ, check=False)
    if proc.returncode != 0:
        return {}
    out = {}
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 3 and parts[0] in ids:
            out[parts[0]] = JobState(parts[1].split()[0], "sacct", exit_code=parts[2])  # "CANCELLED by 0"
    return out


def _scontrol(job_id: str, environ: Mapping[str, str] | None) -> JobState:
    proc = _run(["scontrol", "show", "job", "--oneliner", job_id], environ, check=False)
    if proc.returncode != 0:
        return JobState("UNKNOWN", "scontrol", reason="neither squeue, sacct nor scontrol knows the job (slurmctld "
                                                      "forgets a finished job after MinJobAge when accounting is "
                                                      "not configured)")
    fields = dict(f.partition("=")[::2] for f in proc.stdout.split())
    return JobState(fields.get("JobState", "UNKNOWN"), "scontrol", exit_code=fields.get("ExitCode"),
                    reason=None if fields.get("Reason") in (None, "None") else fields.get("Reason"))
