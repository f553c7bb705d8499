"""The record of one run: runs/<time>-<recipe>/run.json, a log per step, workdirs of uncached steps."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from cmx import __version__
from cmx.container import container_facts
from cmx.errors import CmxError
from cmx.execute.result import RunResult
from cmx.recipe.types import to_json
from cmx.resolve.plan import Plan
from cmx.secrets import Secret


class RunRecord:
    def __init__(self, path: Path, plan: Plan, argv: list[str]) -> None:
        self.path = path
        self.plan = plan
        self.argv = redact_argv(argv, plan)
        self.started = datetime.now().astimezone()
        self._plan_json: dict[str, Any] | None = None

    @classmethod
    def create(cls, runs_dir: Path, plan: Plan, argv: list[str]) -> "RunRecord":
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        base = f"{stamp}-{plan.root_step.name}"
        try:
            runs_dir.mkdir(parents=True, exist_ok=True)
            for n in range(1, 1000):
                path = runs_dir / (base if n == 1 else f"{base}-{n}")
                try:
                    path.mkdir()
                    break
                except FileExistsError:
                    continue
            record = cls(path, plan, argv)
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
            "results": {
                sid: {"status": r.status, "seconds": round(r.seconds, 3), "outputs": to_json(r.outputs),
                      "log": r.log, "entry": r.entry}
                for sid, r in result.steps.items()
            },
        })

    def _write(self, extra: dict[str, Any]) -> None:
        if self._plan_json is None:
            self._plan_json = self.plan.to_json()
        uname = os.uname()  # platform.platform() would spawn `uname -p`: too slow for every run
        data = {
            "cmx": __version__,
            "python": sys.version.split()[0],
            "platform": f"{uname.sysname} {uname.release} {uname.machine}",
            "argv": self.argv,
            "cwd": os.getcwd(),
            "started": self.started.isoformat(timespec="seconds"),
            "container": container_facts(),  # the image, its base and Dockerfile, in a `cmx run --docker` container
            "plan": self._plan_json,
            **extra,
        }
        tmp = self.path / "run.json.tmp"
        tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
        tmp.replace(self.path / "run.json")


def redact_argv(argv: list[str], plan: Plan) -> list[str]:
    """A secret given on the command line (`--input token=...`) must not reach run.json."""
    secrets = {v.reveal() for step in plan for v in step.inputs.values() if isinstance(v, Secret) and v.reveal()}
    out = []
    for arg in argv:
        for secret in secrets:
            arg = arg.replace(secret, "********")
        out.append(arg)
    return out


def _safe(step_id: str) -> str:
    return step_id.replace(":", "_").replace("/", "_")
