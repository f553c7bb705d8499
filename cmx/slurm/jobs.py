"""The record cmx keeps of each job it submitted (<runs>/slurm/<jobid>.json), and what became of the job.

A job's results folder is the run's `results_dir` input when one was given, else the `results_dir`
output of the run record the job wrote (found through the `record: .../run.json` line `cmx run` prints
to the job's stdout). A job that ended in any state but COMPLETED produced nothing trustworthy: its
results folder, if there is one, gets a marker file named after the state (CANCELLED, FAILED,
TIMEOUT...) and its validity is that state, whatever the result files inside say.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from cmx.execute.recorded import RecordedRun
from cmx.slurm import SlurmError
from cmx.slurm.submit import JobState, job_states

RECORD_DIR = "slurm"
_RECORD_LINE = re.compile(r"record: (\S+/run\.json)\s*$", re.M)
_LOG_LINE = re.compile(r"^\s+log: (\S+)/logs/\S+\.log\s*$", re.M)  # a failed step's log, in the run's folder


@dataclass(frozen=True)
class JobRecord:
    """What cmx wrote down when it submitted a job. `final_state` is filled in once a final state was seen,
    so it survives slurmctld forgetting the job on a cluster without accounting."""

    job_id: str
    query: str
    argv: tuple[str, ...]          # the command the job runs (interpreter first)
    host_command: tuple[str, ...]  # the command that submitted it, secrets hidden
    script: str
    stdout: str
    stderr: str
    results_dir: str | None        # the results_dir input, when the query was given one
    submitted: str                 # ISO time
    options: dict[str, Any]
    final_state: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobRecord:
        fields: dict[str, Any] = {k: data.get(k) for k in cls.__dataclass_fields__}
        fields["argv"] = tuple(fields["argv"] or ())
        fields["host_command"] = tuple(fields["host_command"] or ())
        fields["options"] = dict(fields["options"] or {})
        return cls(**fields)


@dataclass(frozen=True)
class JobStatus:
    """A job as `cmx jobs` reports it: the record, Slurm's state, the run record and results folder found,
    and the validity of its results (VALID, INVALID, a lower-case final state, or None: not known yet)."""

    record: JobRecord
    state: JobState
    run_record: str | None
    run_status: str | None
    results_dir: str | None
    validity: str | None
    marker: str | None  # the marker file written into results_dir for a job that did not complete

    def to_json(self) -> dict[str, Any]:
        r = self.record
        return {"job_id": r.job_id, "state": self.state.state, "state_source": self.state.source,
                "exit_code": self.state.exit_code, "reason": self.state.reason, "query": r.query,
                "submitted": r.submitted, "script": r.script, "stdout": r.stdout, "stderr": r.stderr,
                "run_record": self.run_record, "run_status": self.run_status, "results_dir": self.results_dir,
                "validity": self.validity, "marker": self.marker, "command": list(r.argv)}


def records_dir(runs: Path) -> Path:
    return runs / RECORD_DIR


def write_record(runs: Path, record: JobRecord) -> Path:
    folder = records_dir(runs)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{record.job_id}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record.to_json(), indent=2), encoding="utf-8")
    tmp.replace(path)
    return path


def read_records(runs: Path) -> list[JobRecord]:
    """Every job record, the most recently submitted first."""
    out = []
    for path in records_dir(runs).glob("*.json"):
        try:
            out.append(JobRecord.from_json(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, TypeError) as exc:
            raise SlurmError(f"unreadable job record: {exc}", where=str(path),
                             hint="remove the file; the job itself is not affected") from None
    return sorted(out, key=lambda r: (r.submitted, int(r.job_id) if r.job_id.isdigit() else 0), reverse=True)


def read_record(runs: Path, job_id: str) -> JobRecord:
    path = records_dir(runs) / f"{job_id}.json"
    if not path.is_file():
        raise SlurmError(f"cmx submitted no job {job_id} (no {path})", hint="`cmx jobs --all` lists the jobs")
    return JobRecord.from_json(json.loads(path.read_text(encoding="utf-8")))


def statuses(runs: Path, records: list[JobRecord], environ: Mapping[str, str] | None = None) -> list[JobStatus]:
    """The status of each job. Asks Slurm only about the jobs whose final state is not recorded yet, and records
    a final state the first time it is seen; marks the results of a job that did not complete."""
    ask = [r.job_id for r in records if not r.final_state]
    states = job_states(ask, environ) if ask else {}
    out = []
    for record in records:
        if record.final_state:
            state = JobState(**{**record.final_state, "source": "record"})
        else:
            state = states.get(record.job_id, JobState("UNKNOWN", "none"))
            if state.final:
                record = replace(record, final_state={k: v for k, v in asdict(state).items() if k != "source"})
                write_record(runs, record)
        out.append(status_of(record, state))
    return out


def status_of(record: JobRecord, state: JobState) -> JobStatus:
    run_json = _run_record(record)
    run = RecordedRun.read(run_json) if run_json else None
    outputs = run.root_outputs if run else {}
    results_dir = record.results_dir or (str(outputs["results_dir"]) if outputs.get("results_dir") else None)
    run_status = run.status if run else None
    marker = None
    validity: str | None
    if state.final and state.state != "COMPLETED":
        validity = state.state.lower()
        if results_dir and Path(results_dir).is_dir():
            marker = str(mark_not_valid(Path(results_dir), record.job_id, state.state))
    elif state.state == "COMPLETED":
        validity = run_validity(run_status, outputs)
    else:
        validity = None
    return JobStatus(record, state, str(run_json) if run_json else None, run_status, results_dir, validity, marker)


def run_validity(run_status: str | None, outputs: Mapping[str, Any]) -> str | None:
    """VALID when every performance test of the run's `summary` is VALID, INVALID when one is not, "failed"
    when the run failed; None for a run without a summary (not a benchmark)."""
    if run_status not in (None, "ok"):
        return "failed"
    summary = outputs.get("summary")
    if not isinstance(summary, list) or not summary:
        return None
    values = [e.get("validity") for e in summary if isinstance(e, dict) and e.get("validity")]
    if not values:
        return None
    return "VALID" if all(v == "VALID" for v in values) else "INVALID"


def mark_not_valid(results_dir: Path, job_id: str, state: str) -> Path:
    """Write <results_dir>/<STATE>: whatever the files in the folder say, they are not a result."""
    path = results_dir / state
    if not path.exists():
        path.write_text(f"Slurm job {job_id} ended {state} (seen by cmx at "
                        f"{datetime.now().astimezone().isoformat(timespec='seconds')}): nothing in this folder is "
                        "a valid result, whatever its files say.\n", encoding="utf-8")
    return path


def _run_record(record: JobRecord) -> Path | None:
    """The run.json the job's `cmx run` printed (its last `record:` line), if the job got that far."""
    try:
        text = Path(record.stdout).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = _RECORD_LINE.findall(text)
    if found:
        return Path(found[-1])
    try:  # a failed run prints its error (with the failed step's log) on stderr instead
        logs = _LOG_LINE.findall(Path(record.stderr).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None
    return Path(logs[-1]) / "run.json" if logs and (Path(logs[-1]) / "run.json").is_file() else None


__all__ = ["JobRecord", "JobStatus", "read_record", "read_records", "records_dir", "run_validity",
           "status_of", "statuses", "write_record"]
