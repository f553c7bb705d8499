"""find-performance: which scenarios of an app run measure their own target first, the margins, and the plan's line.

`cmx run` of an MLPerf app, for a scenario whose target the user gave none of (no --input, no inputs file, no
variation), measures one on the run's engine before the real test (cmx.mlperf.tune.measure), as MLCommons' CM
and MLCFlow do with their find-performance pass: Offline from a short Offline probe, Server and Interactive
from `cmx tune`'s search (cmx.mlperf.tune.search), with no confirm run: the real performance run is the confirm.

Pure and light: `cmx plan` reads it through the app's plan check (cmx.mlperf.app_plan), within its budget, so
it imports no round, benchmark or engine module.

The margins (docs/tune.md, "Find-performance"):

- Offline: the measured samples/s x (1 + OFFLINE_MARGIN). An Offline run is VALID when it lasts its minimum
  duration: a target above the engine's rate only lengthens it, one below ends it too early (INVALID). A
  probe is short and its engine cold, so it reads low: the target errs upwards (LoadGen adds its own 10 %).
- Server, Interactive: the search passes a probe only when its TTFT and TPOT p99s stay within LATENCY_HEADROOM
  of the limits (the real run is judged on the limits themselves), then (1 - SERVER_MARGIN) x the lower of the
  search's answer and the highest rate any probe completed. A short run stays VALID above the engine's capacity
  (its backlog has no time to grow past the TTFT limit), so the search's answer can be far above what the engine
  completes; the real run is scheduled under both. The latency headroom is for a machine that is busier during
  the run than during the probes, or an engine colder: the latencies of a rate inside the capacity grow with the
  time each step takes, and a rate whose p99s were half the limits stays inside them when steps take twice as
  long. A rate margin alone did not hold: on a loaded 2-core machine, 0.8 x the rate that passed the limits
  themselves ran INVALID (TPOT p99 457 ms, limit 200).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

OFFLINE_MARGIN = 0.25        # Offline's target: measured samples/s x 1.25
SERVER_MARGIN = 0.2          # Server/Interactive: 0.8 x min(the search's answer, the highest completed rate)
LATENCY_HEADROOM = 0.5       # Server/Interactive: a probe passes with its p99s within half of the limits
PROBE_SECONDS = 30.0         # a probe's minimum duration when the run is the round's full length
EARLY_STOPPING_QUERIES = 480  # LoadGen's early stopping at p99 needs >= 459 queries with none over the limit
OFFLINE_PROBES = 2           # the Offline measurement: one probe, and a second at the rate the first measured
FOLDER = "find-performance"  # in the app step's folder, beside the results tree (never inside it)


@dataclass(frozen=True)
class FoundTarget:
    """A target find-performance measured for one scenario, as cmx_run.json, the outputs and the README keep it."""

    scenario: str
    qps: float                    # the target the run used
    measured_qps: float           # Offline: samples/s measured; Server-like: min(search answer, highest completed)
    margin: float                 # the margin applied to measured_qps
    method: str                   # how it was measured, in words
    probes: int                   # probes run for it
    seconds: float                # the measurement's wall time, engine start included
    search_qps: float | None      # Server-like: the search's answer (the highest passing probe's target)
    folder: str                   # the probes' logs

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """`Server: target_qps_server = 120 (the tune's search: 7 probes, ...)`, as `cmx run` prints it."""
        return (f"{self.scenario}: target_qps_{self.scenario.lower()} = {self.qps:g} ({self.method}; measured "
                f"{self.measured_qps:g}/s, margin {self.margin:.0%}; {self.probes} probe(s), {self.seconds:.0f} s; "
                f"logs {self.folder})")


# scenarios with no target to find: LoadGen issues a SingleStream query when the last one completed, so no rate is
# planned (its expected latency only sizes the queries LoadGen pre-generates; mlperf.conf's default serves)
TARGETLESS_SCENARIOS = ("SingleStream",)


def unset_targets(scenarios: Iterable[str], targets: Mapping[str, Any]) -> tuple[str, ...]:
    """The scenarios (by name: Offline, Server) whose target_qps_<scenario> is None: those find-performance
    measures. Given in any way (command line, inputs file, a variation such as _tiny), a target is used as is."""
    return tuple(s for s in scenarios
                 if s not in TARGETLESS_SCENARIOS and targets.get(f"target_qps_{s.lower()}") is None)


def plan_line(scenarios: tuple[str, ...] | None, short: bool) -> str:
    """The line `cmx plan` shows under the app step: what will be measured, bounded how, before the runs.
    `scenarios` None: `_all-scenarios`, whose scenarios the round's table gives when the step starts."""
    offline = (f"at most {OFFLINE_PROBES} Offline probes of the _short run's length" if short else
               f"at most {OFFLINE_PROBES} Offline probes: {EARLY_STOPPING_QUERIES} samples, then about "
               f"{PROBE_SECONDS:g} s at the rate measured")
    kept = (f"p99s within {LATENCY_HEADROOM:.0%} of the limits, then {1 - SERVER_MARGIN:.0%} of the rate that "
            "held")
    search = (f"the tune's search, probes as long as the _short run, from the Offline rate, {kept}" if short else
              f"the tune's search, probes of {PROBE_SECONDS:g} s and {EARLY_STOPPING_QUERIES} queries, from the "
              f"Offline rate, {kept}")
    if scenarios is None:
        return (f"find-performance: each scenario without a target: Offline ({offline}), Server and Interactive "
                f"({search}); then the runs")
    parts = [f"{s} ({offline if s == 'Offline' else search})" for s in scenarios]
    return f"find-performance: {', '.join(parts)}; then the runs"


def offline_target(measured_qps: float) -> float:
    """Offline's target from the measured samples/s (three significant figures)."""
    return _rounded(measured_qps * (1 + OFFLINE_MARGIN))


def server_measure(search_qps: float, completed: Iterable[float | None]) -> float:
    """The rate a Server-like target is taken from: the search's answer, or the highest rate a probe completed when
    lower (a short probe passes above the engine's capacity; the completed rate is what the engine held)."""
    held = [c for c in completed if c]
    return min(search_qps, max(held)) if held else search_qps


def server_target(measured_qps: float) -> float:
    """A Server-like target: (1 - SERVER_MARGIN) x the rate measured, three significant figures."""
    return _rounded(measured_qps * (1 - SERVER_MARGIN))


def _rounded(qps: float) -> float:
    return float(f"{qps:.3g}")


__all__ = ["FOLDER", "LATENCY_HEADROOM", "OFFLINE_MARGIN", "SERVER_MARGIN", "TARGETLESS_SCENARIOS", "FoundTarget",
           "offline_target", "plan_line", "server_measure", "server_target", "unset_targets"]
