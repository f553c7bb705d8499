"""A run record (run.json) read back, by whoever follows a run from outside it: its status, error and root outputs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RecordedRun:
    """What a run.json says: `status` (ok, failed, interrupted; None while the run has not ended), the error as
    it was printed, and the root step's outputs. A record that cannot be read is no record (`read` gives None)."""

    path: Path
    status: str | None
    error: str | None
    root_outputs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, path: str | Path) -> RecordedRun | None:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        root = _mapping(data.get("plan")).get("root")
        results = _mapping(data.get("results"))
        outputs = _mapping(_mapping(results.get(root) if isinstance(root, str) else None).get("outputs"))
        error = data.get("error")
        status = data.get("status")
        return cls(Path(path), status if isinstance(status, str) else None, error if isinstance(error, str) else None,
                   dict(outputs))

    def error_lines(self, count: int = 2, limit: int = 300) -> str | None:
        """The error's first lines on one line, for a table (None without an error)."""
        if not self.error:
            return None
        return "; ".join(line.strip() for line in self.error.splitlines()[:count])[:limit]


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
