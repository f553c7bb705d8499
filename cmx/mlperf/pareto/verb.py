"""`cmx pareto` as a verb: the plan `run` would run, checked for a curve, its deps run and its app step replaced by
the curve (cmx.mlperf.pareto.step); the outputs read back as a ParetoRecord.

A curve always measures an endpoint, so `--input endpoint_url=URL` implies the app's `_endpoint` (as docs/pareto.md
offers it): a query that chooses no backend gets `_endpoint`; one that chooses another backend is refused by
resolution, which names the backend it chose."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cmx.errors import StepFailed
from cmx.execute.request import RunRequest, Runtime, resolved, run_with_root
from cmx.mlperf.pareto.record import ParetoRecord
from cmx.mlperf.pareto.step import ParetoRequest
from cmx.recipe.query import Query, query_of
from cmx.recipe.types import to_json


@dataclass(frozen=True)
class ParetoResult:
    """A curve's run record folder, its outputs ({} when it failed), its error, and how long it took."""

    run_dir: Path
    outputs: Mapping[str, Any]
    error: StepFailed | None
    seconds: float

    @property
    def record(self) -> ParetoRecord | None:
        return ParetoRecord.from_json(dict(self.outputs)) if self.error is None and "points" in self.outputs else None

    @property
    def ok(self) -> bool:
        """The curve was drawn (whether it meets the rules is in its problems)."""
        return self.record is not None

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "run_dir": str(self.run_dir), "seconds": round(self.seconds, 3),
                **to_json(dict(self.outputs)), "error": self.error.render() if self.error is not None else None}


def pareto(run: RunRequest, request: ParetoRequest, runtime: Runtime, invocation: str = "cmx") -> ParetoResult:
    """What cannot draw a curve is refused before any step runs; the deps run as in `run`; the app's step is
    replaced by the curve, on one server."""
    from cmx.mlperf.pareto.step import pareto_step, pareto_target

    run = with_endpoint_implied(run, runtime)
    p = resolved(run.query, run.inputs, run.context, runtime)
    target = pareto_target(p.root_step, query_of(run.query).variations, dict(run.context))
    result = run_with_root(RunRequest(run.query, jobs=run.jobs, argv=run.argv, rerun_prefix=f"{invocation} run",
                                      install_missing=run.install_missing), runtime, p,
                           root_run=lambda ctx: pareto_step(ctx, target, request),
                           root_rerun=lambda words: " ".join([f"{invocation} pareto", words, *request.options()]))
    return ParetoResult(result.run_dir, dict(result.outputs), result.error, result.seconds)


ENDPOINT = "endpoint"  # the app's variation that sends the samples to a server over HTTP


def with_endpoint_implied(run: RunRequest, runtime: Runtime) -> RunRequest:
    """`run` with `_endpoint` added to its query when it gives an endpoint_url and chooses no variation of the
    group `_endpoint` is in (the backend); unchanged otherwise (resolution then judges it as `cmx run` would)."""
    query = query_of(run.query)
    if not run.inputs.get("endpoint_url") or ENDPOINT in query.variations:
        return run
    without = {k: v for k, v in run.inputs.items() if k != "endpoint_url"}
    recipe = resolved(query, without, run.context, runtime).root_step.recipe
    group = next((options for options in recipe.groups.values() if any(v.name == ENDPOINT for v in options)), None)
    if group is None or any(v.name in query.variations for v in group):
        return run
    return replace(run, query=Query(query.tags, query.exclude, (*query.variations, ENDPOINT)))
