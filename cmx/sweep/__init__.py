"""A sweep: one query run once per value of one input, and the table of what each point gave.

The pure part of `cmx sweep`: parsing and typing the swept values against the recipe's declared input type
(every value is checked before anything runs), naming the points and their results folders, the sweep's
own record (sweep.json in the sweep folder), and the table. Running a point here or on Slurm, and gathering
the table from the points' records, is cmx.sweep.run's, so this module needs neither the runner nor Slurm.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cmx.errors import InputError
from cmx.recipe.model import Recipe
from cmx.recipe.types import TypeMismatch, coerce


class SweepError(InputError):
    """A sweep is asked for wrongly: no swept input, several, or a value that does not fit the input's type."""


@dataclass(frozen=True)
class Sweep:
    """What is swept: `name` over `values` (as typed by the recipe), every other input fixed."""

    query: str
    name: str
    type: str
    values: tuple[Any, ...]
    fixed: dict[str, str] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)

    def point_name(self, value: Any) -> str:
        return f"{self.name}={format_value(value)}"


@dataclass(frozen=True)
class Point:
    """One point of a sweep as recorded in sweep.json: how it ran (here: `run_record`; on Slurm: `job_id`)."""

    value: Any
    name: str
    results_dir: str | None
    job_id: str | None = None
    run_record: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What became of one point: `status` ok / failed / a Slurm state in lower case (cancelled, timeout...) /
    pending / running, and the summary entries (performance tests) of its run."""

    status: str
    summary: tuple[Mapping[str, Any], ...] = ()
    results_dir: str | None = None
    run_record: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Row:
    value: Any
    status: str
    scenario: str | None
    validity: str | None
    tokens_per_second: float | None
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    results_dir: str | None
    job_id: str | None = None
    detail: str | None = None


def format_value(value: Any) -> str:
    """10.0 as "10", 12.5 as "12.5": the folder name and the table show what the user typed, not 10.0."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def split_sweep(inputs: Mapping[str, str], over: str | None = None) -> tuple[str, list[str], dict[str, str]]:
    """The swept input, its raw values and the fixed inputs. The swept one is `over` if given, else the one
    --input whose value holds a comma; other inputs (scenarios=Offline,Server included, with `over`) stay fixed."""
    if over is None:
        candidates = [k for k, v in inputs.items() if "," in v]
        if not candidates:
            raise SweepError("nothing to sweep: give one input several comma-separated values",
                             hint="e.g. --input target_qps_server=10,20,40")
        if len(candidates) > 1:
            raise SweepError(f"several inputs have comma-separated values ({', '.join(candidates)}): which one is "
                             "swept?", hint=f"name it with --over, e.g. --over {candidates[0]}")
        over = candidates[0]
    if over not in inputs:
        raise SweepError(f"--over {over}: no --input {over}=V1,V2,... gives its values")
    raw = [v.strip() for v in inputs[over].split(",")]
    if any(not v for v in raw):
        raise SweepError(f"--input {over}={inputs[over]}: an empty value in the list")
    if len(set(raw)) != len(raw):
        raise SweepError(f"--input {over}={inputs[over]}: a value is listed twice")
    return over, raw, {k: v for k, v in inputs.items() if k != over}


def typed_sweep(query: str, recipe: Recipe, inputs: Mapping[str, str], context: Mapping[str, Any],
                over: str | None = None) -> Sweep:
    """The sweep with its values typed as the recipe declares its input: one error naming the value, the input
    and its type if any value does not fit (a secret is never swept: it would be written into folder names)."""
    name, raw, fixed = split_sweep(inputs, over)
    spec = recipe.inputs.get(name)
    if spec is None:
        known = ", ".join(sorted(recipe.inputs)) or "none"
        raise SweepError(f"{recipe.name} has no input {name!r} to sweep", where=str(recipe.yaml_path),
                         hint=f"its inputs: {known}")
    if spec.type in ("secret", "path"):
        raise SweepError(f"input {name} of {recipe.name} is a {spec.type}: a sweep runs over numbers, strings, "
                         "choices or booleans", where=recipe.where(spec.line))
    values = []
    for text in raw:
        try:
            values.append(coerce(text, spec.type, spec.choices))
        except TypeMismatch as exc:
            raise SweepError(f"sweep value {text!r} does not fit input {name} of {recipe.name}, declared type "
                             f"{spec.type}: {exc}", where=recipe.where(spec.line),
                             hint="fix or drop that value; nothing has run") from None
    return Sweep(query=query, name=name, type=spec.type, values=tuple(values), fixed=dict(fixed),
                 context=dict(context))


def point_inputs(sweep: Sweep, value: Any, results_dir: Path | None) -> dict[str, Any]:
    """The inputs of one point: the fixed ones, the swept value (as text, the way --input gives it) and the
    point's own results folder when the recipe has a results_dir input."""
    inputs: dict[str, Any] = {**sweep.fixed, sweep.name: format_value(value)}
    if results_dir is not None:
        inputs["results_dir"] = str(results_dir)
    return inputs


def point_dir(sweep_dir: Path, sweep: Sweep, value: Any) -> Path:
    return sweep_dir / sweep.point_name(value)


def write_sweep(sweep_dir: Path, sweep: Sweep, points: Sequence[Point], mode: str) -> Path:
    """sweep.json: what `cmx sweep --gather` needs to find each point again."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    path = sweep_dir / "sweep.json"
    data = {"query": sweep.query, "input": sweep.name, "type": sweep.type, "values": list(sweep.values),
            "fixed": sweep.fixed, "context": sweep.context, "mode": mode, "points": [asdict(p) for p in points]}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    tmp.replace(path)
    return path


def read_sweep(sweep_dir: Path) -> tuple[Sweep, list[Point], str]:
    path = sweep_dir / "sweep.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        sweep = Sweep(query=data["query"], name=data["input"], type=data["type"], values=tuple(data["values"]),
                      fixed=dict(data.get("fixed") or {}), context=dict(data.get("context") or {}))
        points = [Point(**p) for p in data["points"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SweepError(f"not a sweep folder: cannot read {path} ({exc})",
                         hint="give the folder `cmx sweep` printed (it holds sweep.json)") from None
    return sweep, points, str(data.get("mode", "local"))


def outcome_of_run(status: str | None, outputs: Mapping[str, Any], run_record: str | None,
                   results_dir: str | None, detail: str | None = None) -> Outcome:
    """An Outcome from a run's status ("ok"/"failed"/...) and its root outputs."""
    summary = outputs.get("summary")
    entries = tuple(e for e in summary if isinstance(e, dict)) if isinstance(summary, list) else ()
    found = outputs.get("results_dir")
    return Outcome(status=status or "unknown", summary=entries, run_record=run_record,
                   results_dir=results_dir or (str(found) if found else None), detail=detail)


def rows(sweep: Sweep, points: Sequence[Point], outcomes: Sequence[Outcome]) -> list[Row]:
    """The table: a row per point and performance test (one per scenario); a point that did not complete is
    one row whose validity is its status (failed, cancelled...), never a result it may have left behind."""
    out = []
    for point, o in zip(points, outcomes, strict=True):
        perf = [e for e in o.summary if e.get("mode") in (None, "performance")]
        results_dir = o.results_dir or point.results_dir
        if o.status != "ok" or not perf:
            validity = None if o.status == "ok" else o.status
            out.append(Row(point.value, o.status, None, validity, None, None, None, results_dir, point.job_id,
                           o.detail))
            continue
        for e in perf:
            out.append(Row(point.value, o.status, e.get("scenario"), e.get("validity"), e.get("tokens_per_second"),
                           e.get("ttft_p99_ms"), e.get("tpot_p99_ms"), results_dir, point.job_id, o.detail))
    return out


def table(sweep: Sweep, table_rows: Sequence[Row]) -> str:
    """The rows as aligned text, the swept input as the first column."""
    head = (sweep.name, "status", "scenario", "validity", "tokens/s", "TTFT p99 ms", "TPOT p99 ms", "results")
    body = [(format_value(r.value), r.status, r.scenario or "-", r.validity or "-", _num(r.tokens_per_second),
             _num(r.ttft_p99_ms), _num(r.tpot_p99_ms), r.results_dir or "-") for r in table_rows]
    widths = [max(len(str(c)) for c in col) for col in zip(head, *body, strict=True)]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
                     for line in (head, *body))


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


RunPoint = Callable[[Sweep, Point], Point]          # runs or submits a point; the point with how to find it
GatherPoint = Callable[[Sweep, Point], Outcome]     # what became of it
