"""`cmx tune` as a verb in place of the app's step (cmx.mlperf.app_verb): its step is the search
(cmx.mlperf.tune.step), its result the outputs read into dataclasses (the answer, the probes, the confirm runs)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from cmx.execute.request import RunRequest, Runtime
from cmx.mlperf.app_verb import StepVerb, StepVerbResult, run_in_place_of_app
from cmx.mlperf.tune.search import Probe
from cmx.mlperf.tune.step import tune_step, tune_target
from cmx.mlperf.tune.target import TuneRequest, TuneTarget


@dataclass(frozen=True)
class Confirm:
    """One confirm run at the chosen QPS (a row of the tune's `confirms` output)."""

    qps: float
    ok: bool
    validity: str | None
    problems: tuple[str, ...]
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    samples_per_second: float | None
    tokens_per_second: float | None
    seconds: float
    same_engine: bool
    loadgen_validity: str | None = None  # LoadGen's own verdict; `validity` is cmx's (FAILED when samples failed)


@dataclass(frozen=True)
class LatencyLimits:
    ttft_p99_ms: float
    tpot_p99_ms: float


@dataclass(frozen=True)
class TuneAnswer:
    """What a tune found, as its step's outputs say (cmx.mlperf.tune.step.tune_record)."""

    scenario: str
    benchmark: str
    round: str
    input: str                    # the app input the answer sets: target_qps_server
    qps: float | None             # the QPS written into the inputs file (None: none was)
    found_qps: float | None       # what the probes found, confirmed or not
    confirmed: bool
    short: bool
    probes: tuple[Probe, ...]
    confirms: tuple[Confirm, ...]
    tuned_file: str | None
    tune_dir: str
    engine_start_s: float
    seconds: float
    limits: LatencyLimits | None  # None: Offline, whose target is the measured throughput
    results_dir: str
    confirm_count: int = 0
    confirm_rates: tuple[float, ...] = ()        # each confirm run's target QPS, in order
    confirm_stop: str = ""                       # why they stopped (cmx.mlperf.tune.stepdown's code; "": none ran)
    confirm_why: str = ""                        # the same as a sentence
    confirm_floor_qps: float | None = None       # the lowest rate a confirm could step down to
    lowest_confirm_qps: float | None = None

    @classmethod
    def of(cls, outputs: Mapping[str, Any]) -> TuneAnswer:
        own = {f.name for f in fields(cls)}
        values = {k: v for k, v in outputs.items() if k in own}
        limits = outputs.get("limits")
        return cls(**{**values,
                      "probes": tuple(Probe(**p) for p in outputs["probes"]),
                      "confirms": tuple(Confirm(**{**c, "problems": tuple(c["problems"])})
                                        for c in outputs["confirms"]),
                      "confirm_rates": tuple(outputs.get("confirm_rates") or ()),
                      "limits": LatencyLimits(**limits) if limits else None})


@dataclass(frozen=True)
class TuneResult(StepVerbResult):
    """A tune's run record folder, its outputs ({} when it failed), its error, and how long it took."""

    @property
    def ok(self) -> bool:
        """A target was found (and confirmed, unless the tune was asked not to confirm)."""
        return self.error is None and self.outputs.get("qps") is not None

    @property
    def answer(self) -> TuneAnswer | None:
        """The outputs read, once the tune step ran to its end (None when it failed)."""
        return TuneAnswer.of(self.outputs) if self.error is None and "probes" in self.outputs else None


def tune(run: RunRequest, request: TuneRequest, runtime: Runtime, invocation: str = "cmx") -> TuneResult:
    """The plan `run` would run; what cannot be tuned (not an app, no device in the query, a scenario the
    benchmark lacks) is refused before any step runs. The deps run as in `run`; the app's
    step is replaced by the tune (cmx.mlperf.tune.step), which keeps one engine for every probe. A failed dep's
    're-run just this step' line is `<invocation> run ...`, the tune step's `<invocation> tune ... --scenario S`."""
    verb = StepVerb[TuneTarget](
        "tune", target=lambda step, variations, context: tune_target(step, variations, context, request),
        step=lambda ctx, target: tune_step(ctx, target, request), options=tuple(map(shlex.quote, request.options())))
    return run_in_place_of_app(run, verb, runtime, invocation, TuneResult)
