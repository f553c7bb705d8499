"""`cmx pareto` as a verb in place of the app's step (cmx.mlperf.app_verb): its step is the curve
(cmx.mlperf.pareto.step), its result the outputs read back as a ParetoRecord.

A curve always measures an endpoint, so `--input endpoint_url=URL` implies the app's `_endpoint` (as docs/pareto.md
offers it): a query that chooses no backend gets `_endpoint`; one that chooses another backend is refused by
resolution, which names the backend it chose."""

from __future__ import annotations

from dataclasses import dataclass, replace

from cmx.execute.request import RunRequest, Runtime, resolved
from cmx.mlperf.app_verb import StepVerb, StepVerbResult, run_in_place_of_app
from cmx.mlperf.pareto.record import ParetoRecord
from cmx.mlperf.pareto.step import ParetoRequest, ParetoTarget, pareto_step, pareto_target
from cmx.recipe.query import Query, query_of


@dataclass(frozen=True)
class ParetoResult(StepVerbResult):
    """A curve's run record folder, its outputs ({} when it failed), its error, and how long it took."""

    @property
    def record(self) -> ParetoRecord | None:
        return ParetoRecord.from_json(dict(self.outputs)) if self.error is None and "points" in self.outputs else None

    @property
    def ok(self) -> bool:
        """The curve was drawn (whether it meets the rules is in its problems)."""
        return self.record is not None


def pareto(run: RunRequest, request: ParetoRequest, runtime: Runtime, invocation: str = "cmx") -> ParetoResult:
    """What cannot draw a curve is refused before any step runs; the deps run as in `run`; the app's step is
    replaced by the curve, on one server."""
    verb = StepVerb[ParetoTarget]("pareto", target=pareto_target,
                                  step=lambda ctx, target: pareto_step(ctx, target, request),
                                  options=request.options())
    return run_in_place_of_app(with_endpoint_implied(run, runtime), verb, runtime, invocation, ParetoResult)


def with_endpoint_implied(run: RunRequest, runtime: Runtime) -> RunRequest:
    """`run` with `_endpoint` (the engine registry's backend over HTTP) added to its query when it gives an
    endpoint_url and chooses no variation of the group `_endpoint` is in (the backend); unchanged otherwise
    (resolution then judges it as `cmx run` would)."""
    from cmx.mlperf.engines import http_backend

    endpoint = http_backend()
    query = query_of(run.query)
    if not run.inputs.get("endpoint_url") or endpoint in query.variations:
        return run
    without = {k: v for k, v in run.inputs.items() if k != "endpoint_url"}
    recipe = resolved(query, without, run.context, runtime).root_step.recipe
    group = next((options for options in recipe.groups.values() if any(v.name == endpoint for v in options)), None)
    if group is None or any(v.name in query.variations for v in group):
        return run
    return replace(run, query=Query(query.tags, query.exclude, (*query.variations, endpoint)))
