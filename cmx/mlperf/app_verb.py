"""A verb that runs an MLPerf app's plan with its own step in place of the app's (`cmx tune`, `cmx pareto`): the
skeleton such verbs share, so that each states only its step, its target and how it reads its outputs.

`run_in_place_of_app(run, verb, runtime, invocation, result)` is the verb's body:

1. the plan `cmx run` would run (the same query, inputs and context);
2. `verb.target`, the verb's checks of the plan's root step, which raise its CmxError before any step runs (they
   compose the shared checks below in the verb's own order, so each refusal stays the verb's sentence);
3. the deps, run as `cmx run` runs them (cached as usual; a failed dep's 're-run just this step' line is
   `<invocation> run ...`);
4. `verb.step` on the app step's own ctx (its inputs, context and deps' outputs, through the Runner's `root_run`)
   in place of the app's run; its 're-run just this step' line is `<invocation> <verb> QUERY... OPTIONS`;
5. the result: `result` (a StepVerbResult subclass, which reads the outputs its way) of the run record's folder,
   the outputs ({} when a step failed), the error and the seconds.

The shared checks of the root step: `app_benchmark` (the step is an MLPerf app: its recipe's tags name a benchmark
family, and it has a round) and `require_device` (the query names the device: a measurement of one machine).

find-performance is no such verb: it runs inside the app's own step (cmx.mlperf.app_step, before the real tests,
on the same engine), not in its place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from cmx.errors import CmxError, StepFailed
from cmx.execute.request import RunRequest, Runtime, resolved, run_with_root
from cmx.recipe.query import query_of
from cmx.recipe.types import to_json

if TYPE_CHECKING:  # types only: a verb imports this module before it needs the app
    from cmx.execute.context import StepContext
    from cmx.mlperf.benchmarks.base import Benchmark
    from cmx.resolve.plan import Step

T = TypeVar("T")


@dataclass(frozen=True)
class StepVerbResult:
    """A verb's run record folder, its outputs ({} when it failed), its error, and how long it took. A verb's
    subclass says when it is `ok` and reads the outputs into its own types."""

    run_dir: Path
    outputs: Mapping[str, Any]
    error: StepFailed | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "run_dir": str(self.run_dir), "seconds": round(self.seconds, 3),
                **to_json(dict(self.outputs)), "error": self.error.render() if self.error is not None else None}


R = TypeVar("R", bound=StepVerbResult)


@dataclass(frozen=True)
class StepVerb(Generic[T]):
    """What a verb in place of the app's step states of its own: its word, its checks, its step and the options
    that ask for it again."""

    name: str                                                       # the CLI's word: "tune"
    target: Callable[[Step, tuple[str, ...], dict[str, Any]], T]    # (root step, query's variations, context)
    step: Callable[[StepContext, T], dict[str, Any]]                # the run in place of the app's; its outputs
    options: tuple[str, ...] = ()                                   # the verb's own arguments, each quoted


def run_in_place_of_app(run: RunRequest, verb: StepVerb[T], runtime: Runtime, invocation: str,
                        result: type[R]) -> R:
    """The plan `run` would run, checked by `verb.target` before any step runs; its deps run as in `run`, and its
    root step is replaced by `verb.step`."""
    p = resolved(run.query, run.inputs, run.context, runtime)
    target = verb.target(p.root_step, query_of(run.query).variations, dict(run.context))
    done = run_with_root(RunRequest(run.query, jobs=run.jobs, argv=run.argv, rerun_prefix=f"{invocation} run",
                                    install_missing=run.install_missing), runtime, p,
                         root_run=lambda ctx: verb.step(ctx, target),
                         root_rerun=lambda words: " ".join([f"{invocation} {verb.name}", words, *verb.options]))
    return result(done.run_dir, dict(done.outputs), done.error, done.seconds)


# --- the checks every such verb makes of the plan's root step ---------------------------------------------------

def app_benchmark(step: Step, error: type[CmxError], said: str, hint: str) -> Benchmark:
    """The benchmark of the MLPerf app the plan's root `step` runs (its recipe's tags name the family, and it has a
    round); `error("<recipe> <said>", hint)` when it runs none."""
    from cmx.mlperf.benchmarks import all_benchmarks

    bench = next((b for b in all_benchmarks() if b.family in step.recipe.tags), None)
    if bench is None or "round" not in step.inputs:
        raise error(f"{step.recipe.name} {said}", hint=hint)
    return bench


def require_device(step: Step, query_variations: tuple[str, ...], context: dict[str, Any], error: type[CmxError],
                   why: str) -> None:
    """`error("the query names no device: <why>")` when the app offers devices and neither the query's variations
    nor its context name one: a measurement of one machine must say which (the recipe's default would be a
    guess)."""
    from cmx.mlperf.app_step import unnamed_devices

    devices = unnamed_devices(step, query_variations, context)
    if devices:
        raise error(f"the query names no device: {why}",
                    hint=f"add one of {', '.join('_' + d for d in sorted(devices))} to the query")


__all__ = ["StepVerb", "StepVerbResult", "app_benchmark", "require_device", "run_in_place_of_app"]
