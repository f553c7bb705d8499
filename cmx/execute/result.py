"""What a run of a plan gives back: each step's status, outputs and log, and the run's own."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cmx.errors import StepFailed
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
