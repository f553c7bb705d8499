"""What a run of a plan gives back: each step's status, outputs and log, and the run's own."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cmx.errors import StepFailed
from cmx.recipe.types import to_json
from cmx.resolve.plan import Plan

StepStatus = Literal[
    "cached",      # its cache entry was there
    "built",       # it ran and its outputs were published as a cache entry
    "ran",         # it ran (a recipe that is not cached)
    "failed",
    "cancelled",   # stopped at its next progress report by another step's failure
    "skipped",     # never started, after a failure
    "not-needed",  # below a cached step
]


@dataclass
class StepResult:
    id: str
    recipe: str
    key: str
    status: StepStatus
    outputs: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    log: str | None = None
    entry: str | None = None  # the cache entry folder, for cached steps


@dataclass
class RunResult:
    plan: Plan
    run_dir: Path
    steps: dict[str, StepResult]
    seconds: float
    error: StepFailed | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def outputs(self) -> dict[str, Any]:
        return self.steps[self.plan.root].outputs if self.plan.root in self.steps else {}

    def steps_json(self) -> dict[str, dict[str, Any]]:
        """Each step's result as JSON data: what `run --json` prints and run.json records."""
        return {sid: {"recipe": r.recipe, "key": r.key, "status": r.status, "seconds": round(r.seconds, 3),
                      "outputs": to_json(r.outputs), "log": r.log, "entry": r.entry}
                for sid, r in self.steps.items()}


RECORDED = ("status", "seconds", "outputs", "log", "entry")  # what run.json keeps of each step's result


def recorded_results(steps: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """run.json's "results": `steps_json` less what the plan beside it already says (recipe, key)."""
    return {sid: {k: step[k] for k in RECORDED} for sid, step in steps.items()}
