"""The record of one run: runs/<time>-<recipe>/run.json, a log per step, workdirs of uncached steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cmx.container import container_facts
from cmx.errors import CmxError
from cmx.execute.result import RunResult, recorded_results
from cmx.execute.rundir import header, new_run_dir
from cmx.resolve.plan import Plan
from cmx.secrets import Redactor


class RunRecord:
    def __init__(self, path: Path, plan: Plan, argv: list[str], started: str) -> None:
        self.path = path
        self.plan = plan
        self.argv = redact_argv(argv, plan)
        self.started = started  # ISO 8601, local time
        self._plan_json: dict[str, Any] | None = None

    @classmethod
    def create(cls, runs_dir: Path, plan: Plan, argv: list[str]) -> RunRecord:
        try:
            path, started = new_run_dir(str(runs_dir), plan.root_step.name)
            record = cls(Path(path), plan, argv, started)
            record._write({"status": "running"})
        except OSError as exc:
            raise CmxError(f"cannot write the run record under {runs_dir}: {exc.strerror or exc}",
                           hint="point CMX_RUNS (or CMX_HOME) at a writable folder") from None
        return record

    def log_path(self, step_id: str) -> Path:
        return self.path / "logs" / f"{_safe(step_id)}.log"

    def workdir(self, step_id: str) -> Path:
        return self.path / "work" / _safe(step_id)

    def interrupted(self, seconds: float) -> None:
        self._write({"status": "interrupted", "seconds": round(seconds, 3)})

    def finish(self, result: RunResult) -> None:
        self._write({
            "status": "ok" if result.ok else "failed",
            "seconds": round(result.seconds, 3),
            "error": result.error.render() if result.error else None,
            "results": recorded_results(result.steps_json()),
        })

    def _write(self, extra: dict[str, Any]) -> None:
        if self._plan_json is None:
            self._plan_json = self.plan.to_json()
        data = {**header(self.argv, self.started, container_facts()), "plan": self._plan_json, **extra}
        # an output or an error may quote a secret a step was given (a server's echo of its key)
        data = redactor_of(self.plan).redact_json(data)
        tmp = self.path / "run.json.tmp"
        tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
        tmp.replace(self.path / "run.json")


def redact_argv(argv: list[str], plan: Plan) -> list[str]:
    """The command as records and printed lines may show it: a secret given on the command line (`--input
    token=...`), the credentials of a URL (`endpoint_url=http://user:PASS@host/v1`) and the tokens set in the
    environment replaced (cmx.secrets.Redactor)."""
    redactor = redactor_of(plan)  # once: it walks every step's inputs
    return [redactor.redact(arg) for arg in argv]


def redactor_of(plan: Plan) -> Redactor:
    """What every record of `plan`'s run redacts: each step's secrets and URL credentials, and the plan's asked
    inputs (cmx.secrets.Redactor.of)."""
    return Redactor.of([*(v for step in plan for v in step.inputs.values()), *plan.inputs.values()])


def _safe(step_id: str) -> str:
    return step_id.replace(":", "_").replace("/", "_")
