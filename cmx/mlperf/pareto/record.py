"""What `cmx pareto` leaves in its results folder: `cmx_pareto.json`, one curve, read back into dataclasses.

    <results_dir>/<system>/<benchmark>/pareto/cmx_pareto.json
    <results_dir>/<system>/<benchmark>/pareto/r<N>/        one folder per point (N: its concurrency)
    <results_dir>/<system>/<benchmark>/pareto/offline/     the Offline point

The curve is MLPerf Endpoints v1.0's methodology (fixed-concurrency points laid out over regions
derived from C_min and C_max, per-point system tokens/s, tokens/s per user = 1000 / TPOT p90, TTFT p90,
an accuracy gate at the mandatory points) run by cmx's endpoint client, or by MLCommons' client where
it is installed (`client`). Only the latter can be submitted; `LABEL` says so wherever a curve is shown.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

PARETO_DIR = "pareto"
CMX_PARETO_JSON = "cmx_pareto.json"
OFFLINE_DIR = "offline"
LABEL = ("MLPerf Endpoints v1.0 methodology run by cmx's endpoint client: not a compliant MLPerf Endpoints "
         "submission, which requires MLCommons' client (inference-endpoint), unmodified")
OFFICIAL_CLIENT_LABEL = ("MLPerf Endpoints v1.0 methodology run by MLCommons' client (inference-endpoint) from the "
                         "configs cmx wrote; the submission package and its checker are the submitter's next step")
# region names as point.yaml spells them
ULTRA_LOW, LOW, MEDIUM, HIGH, MARGIN, CHOICE, OFFLINE = ("low_latency", "low_concurrency", "med_concurrency",
                                                         "high_concurrency", "margin", "submitters_choice", "offline")


@dataclass(frozen=True)
class AccuracyGate:
    """One accuracy run of the gate: the benchmark's metrics on its accuracy set at the point's concurrency."""

    metrics: dict[str, float]        # as the benchmark's evaluator reports them (rouge1, ..., exact_match)
    shortfalls: tuple[str, ...]      # each target missed, as a sentence; empty: passed
    samples: int                     # accuracy samples generated (each row once)
    seconds: float

    @property
    def passed(self) -> bool:
        return not self.shortfalls


@dataclass(frozen=True)
class Point:
    """One measurement point: fixed concurrency (or Offline: the whole set at once), its metrics over its window."""

    concurrency: int
    region: str                      # low_latency, low_concurrency, med_concurrency, high_concurrency, offline
    role: str                        # mandatory, choice, offline
    folder: str                      # r<N> or offline, beside cmx_pareto.json
    system_tps: float | None         # output tokens / window (issue time) seconds
    tps_per_user: float | None       # 1000 / tpot_p90_ms (None for Offline)
    ttft_p90_ms: float | None
    tpot_p90_ms: float | None
    system_tps_per_kw: float | None  # with a system_power file
    issued: int
    completed: int
    failed: int
    output_tokens: int               # in the window
    window_s: float                  # the window's issue-time span
    duration_s: float                # first issue to last completion
    min_duration_s: float            # what the rules ask of this region (600 s ultra-low, 1,200 s others)
    whole_run_tps: float | None      # supplementary: every output token over duration_s
    accuracy: AccuracyGate | None = None   # at the gate's points

    @property
    def duration_met(self) -> bool:
        return self.window_s >= self.min_duration_s

    @property
    def offline(self) -> bool:
        return self.role == OFFLINE


@dataclass(frozen=True)
class Probe:
    """A short run at one concurrency, to find where the system stops gaining throughput (C_max)."""

    concurrency: int
    system_tps: float
    tpot_p90_ms: float | None
    seconds: float


@dataclass(frozen=True)
class ParetoRecord:
    """One curve: its system and benchmark, how its points were laid out, the points, power, the gate, the problems."""

    benchmark: str
    system: str
    client: str                      # cmx, or inference-endpoint (MLCommons' client)
    label: str
    short: bool                      # the _short profile: seconds per point, never the rules' durations
    c_min: int
    c_max: int
    c_max_source: str                # probes (cmx's knee search) or declared (--max-concurrency)
    regions: dict[str, tuple[int, int]]
    points: tuple[Point, ...]
    probes: tuple[Probe, ...] = ()
    provisioned_kw: float | None = None
    power_file: str | None = None
    power_method: str | None = None
    problems: tuple[str, ...] = ()   # what keeps the curve from meeting the rules' structure and durations
    command: str = ""
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def steps(self) -> tuple[Point, ...]:
        """The fixed-concurrency points in concurrency order (the step function's points; Offline is a ceiling)."""
        return tuple(sorted((p for p in self.points if not p.offline), key=lambda p: p.concurrency))

    @property
    def offline_point(self) -> Point | None:
        return next((p for p in self.points if p.offline), None)

    @property
    def accuracy_passed(self) -> bool | None:
        """Every gate run passed (None: none ran)."""
        gates = [p.accuracy for p in self.points if p.accuracy is not None]
        return all(g.passed for g in gates) if gates else None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["regions"] = {k: list(v) for k, v in self.regions.items()}
        data["accuracy_passed"] = self.accuracy_passed
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ParetoRecord:
        own = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in own}
        values["regions"] = {k: (int(v[0]), int(v[1])) for k, v in data["regions"].items()}
        values["points"] = tuple(_point(p) for p in data["points"])
        values["probes"] = tuple(Probe(**p) for p in data.get("probes", ()))
        values["problems"] = tuple(data.get("problems", ()))
        return cls(**values)


def _point(data: dict[str, Any]) -> Point:
    own = {f.name for f in fields(Point)}
    values = {k: v for k, v in data.items() if k in own}
    gate = data.get("accuracy")
    values["accuracy"] = AccuracyGate(metrics=gate["metrics"], shortfalls=tuple(gate["shortfalls"]),
                                      samples=gate["samples"], seconds=gate["seconds"]) if gate else None
    return Point(**values)


def write_record(record: ParetoRecord, folder: Path) -> Path:
    path = folder / CMX_PARETO_JSON
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record.to_json(), indent=2) + "\n", encoding="utf-8")
    return path


def read_record(path: Path) -> ParetoRecord:
    return ParetoRecord.from_json(json.loads(path.read_text(encoding="utf-8")))


def find_records(results_dir: Path) -> list[Path]:
    """Every cmx_pareto.json under a results folder (<system>/<benchmark>/pareto/), or the folder's own."""
    if (results_dir / CMX_PARETO_JSON).is_file():
        return [results_dir / CMX_PARETO_JSON]
    return sorted(results_dir.glob(f"*/*/{PARETO_DIR}/{CMX_PARETO_JSON}"))
