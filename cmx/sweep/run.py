"""`cmx sweep`: every point of a sweep resolved first, then run here one after the other or submitted to Slurm one
job each; and the table gathered from the points' run records and jobs (`cmx sweep --gather`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from cmx.execute.recorded import RecordedRun
from cmx.settings import Settings
from cmx.slurm.script import SlurmOptions
from cmx.sweep import (
    Outcome,
    Point,
    Row,
    Sweep,
    SweepError,
    outcome_of_run,
    point_dir,
    point_inputs,
    read_sweep,
    rows,
    table,
    typed_sweep,
    write_sweep,
)

# Slurm states of a job that has not ended
_PENDING = ("pending", "running", "configuring", "completing", "suspended", "requeued", "resizing")


@dataclass(frozen=True)
class SweepRequest:
    """What `cmx sweep` is asked: the query, its inputs (one of them V1,V2,... or the one `over` names), where the
    sweep's folder goes (None: <runs>/sweeps/<time>-<recipe>-<input>), and how the points run: here (`jobs`
    steps at once, None: the default; `progress` each run's display) or as Slurm jobs (`slurm`), waited for or
    not (`wait`, polling every `poll_s`)."""

    query: str
    inputs: Mapping[str, str] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    over: str | None = None
    sweep_dir: Path | None = None
    slurm: SlurmOptions | None = None
    wait: bool = True
    poll_s: float = 5.0
    jobs: int | None = None
    progress: str = "none"


@dataclass(frozen=True)
class SweepResult:
    """A sweep's folder (sweep.json, a folder per point), its points, and the table once every point ended
    (None while Slurm jobs are still queued or running and the sweep was not asked to wait)."""

    sweep_dir: Path
    sweep: Sweep
    points: list[Point]
    outcomes: list[Outcome]
    rows: list[Row] | None
    table: str | None

    def to_json(self) -> dict[str, Any]:
        return {"sweep_dir": str(self.sweep_dir), "query": self.sweep.query, "input": self.sweep.name,
                "type": self.sweep.type, "values": list(self.sweep.values), "fixed": self.sweep.fixed,
                "points": [{**asdict(p), "status": o.status, "detail": o.detail}
                           for p, o in zip(self.points, self.outcomes, strict=True)],
                "done": self.rows is not None,
                "rows": [asdict(r) for r in self.rows] if self.rows is not None else None}


def sweep(request: SweepRequest, settings: Settings, environ: Mapping[str, str],
          announce: Callable[[str], None] = lambda _: None) -> SweepResult:
    """Run the query once per value of one input, every point with its own results folder
    <sweep_dir>/<input>=<value> when the recipe has a results_dir input. Every value is typed and every point's
    plan resolved before anything runs. With Slurm and not `wait`, the result has no table yet: `gather` makes
    it later. `announce` hears each point start."""
    from cmx.execute.plan_check import check_plan
    from cmx.execute.request import Runtime, resolved, root_recipe

    if request.slurm is not None:
        from cmx.slurm.submit import tool

        tool("sbatch", environ)
    recipe = root_recipe(request.query, settings)
    sw = typed_sweep(request.query, recipe, request.inputs, request.context, request.over)
    if "results_dir" in sw.fixed:
        raise SweepError("a sweep gives each point its own results_dir (<sweep dir>/<input>=<value>)",
                         hint="drop --input results_dir; --out picks the sweep's folder")
    sweep_dir = request.sweep_dir
    if sweep_dir is None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        sweep_dir = settings.runs / "sweeps" / f"{stamp}-{recipe.name}-{sw.name}"
    sweep_dir = sweep_dir.absolute()
    has_results = "results_dir" in recipe.inputs
    points = []
    for value in sw.values:
        folder = point_dir(sweep_dir, sw, value)
        given = point_inputs(sw, value, folder if has_results else None)
        check_plan(resolved(request.query, given, sw.context, Runtime(settings, environ=environ)))  # every point, first
        points.append(Point(value=value, name=sw.point_name(value), results_dir=str(folder) if has_results else None))
    mode = "slurm" if request.slurm is not None else "local"
    write_sweep(sweep_dir, sw, points, mode)
    for i, point in enumerate(points):
        given = point_inputs(sw, point.value, Path(point.results_dir) if point.results_dir else None)
        points[i] = _run_point(request, sw, point, given, settings, environ, announce)
        write_sweep(sweep_dir, sw, points, mode)
    return gather(sweep_dir, settings, environ, wait=request.wait, poll_s=request.poll_s)


def _run_point(request: SweepRequest, sw: Sweep, point: Point, given: dict[str, Any], settings: Settings,
               environ: Mapping[str, str], announce: Callable[[str], None]) -> Point:
    """The point once submitted (with its job id) or run (with its run record)."""
    if request.slurm is not None:
        from cmx.slurm.request import JobRequest, submit_query

        options = replace(request.slurm, job_name=request.slurm.job_name or f"cmx-sweep-{point.name}")
        record = submit_query(JobRequest(request.query, options=options, inputs=given, context=sw.context),
                              settings, environ)
        announce(f"{point.name}: Slurm job {record.job_id}")
        return replace(point, job_id=record.job_id)
    from cmx.execute.progress import make_reporter
    from cmx.execute.request import RunRequest, Runtime, default_jobs, run
    from cmx.slurm.request import run_args

    announce(f"{point.name}: running")
    result = run(RunRequest(request.query, inputs=given, context=sw.context, jobs=request.jobs or default_jobs(),
                            check=False, argv=["cmx", *run_args(request.query, given, sw.context)]),
                 Runtime(settings, reporter=make_reporter(request.progress), environ=environ))
    return replace(point, run_record=str(result.run_dir / "run.json"))


def gather(sweep_dir: Path, settings: Settings, environ: Mapping[str, str], *, wait: bool = False,
           poll_s: float = 5.0, timeout_s: float | None = None) -> SweepResult:
    """The table of a sweep from its folder: each point's run record, or its Slurm job's state and record. With
    `wait`, poll until every job ended (or `timeout_s`); otherwise a sweep with jobs still queued or running has
    no table yet (rows None) and says which points are pending."""
    from cmx.slurm.request import job_statuses

    sw, points, _mode = read_sweep(Path(sweep_dir))
    started = time.monotonic()
    while True:
        ids = [p.job_id for p in points if p.job_id]
        jobs = {j.record.job_id: j for j in job_statuses(settings, environ, job_ids=ids)} if ids else {}
        outcomes = [_outcome(p, jobs) for p in points]
        pending = [o for o in outcomes if o.status in _PENDING and o.detail and o.detail.startswith("Slurm job")]
        if not pending:
            table_rows = rows(sw, points, outcomes)
            return SweepResult(Path(sweep_dir), sw, points, outcomes, table_rows, table(sw, table_rows))
        if not wait or (timeout_s is not None and time.monotonic() - started > timeout_s):
            return SweepResult(Path(sweep_dir), sw, points, outcomes, None, None)
        time.sleep(poll_s)


def _outcome(point: Point, jobs: Mapping[str, Any]) -> Outcome:
    """What became of one point: its job's state while it has not ended, else its run record's status and outputs
    (nothing of a point that did not complete is a result)."""
    status: str | None = None
    detail: str | None = None
    record = point.run_record
    if point.job_id:
        j = jobs[point.job_id]
        state = j.state.state
        if not j.state.final:
            return outcome_of_run(state.lower(), {}, None, point.results_dir, detail=f"Slurm job {point.job_id}")
        status = "ok" if state == "COMPLETED" and j.run_status == "ok" else "failed" if state == "COMPLETED" \
            else state.lower()
        record = j.run_record
        detail = f"Slurm job {point.job_id} {state}"
    run = RecordedRun.read(record) if record else None
    outputs = run.root_outputs if run else {}
    if status is None:
        status = (run.status if run else None) or "unknown"
        detail = run.error_lines() if status != "ok" and run else None
    return outcome_of_run(status, outputs if status == "ok" else {}, record, point.results_dir, detail)
