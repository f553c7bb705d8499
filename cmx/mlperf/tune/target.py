"""What a tune is for and how long its runs are: the request, the target a plan or an app run fixes, the probes' and
confirm run's lengths, and a probe's log line. `cmx tune`'s step (tune/step.py) and find-performance at run time
(tune/measure.py, which the app step calls) both stand on this module; it imports neither of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cmx.mlperf.tune.findperf import EARLY_STOPPING_QUERIES, PROBE_SECONDS
from cmx.mlperf.tune.probe import Length
from cmx.mlperf.tune.process import TuneError
from cmx.mlperf.tune.search import Probe
from cmx.mlperf.tune.stepdown import CONFIRM_TRIES

if TYPE_CHECKING:  # types only: `cmx tune` imports this module before it needs the app
    from cmx.mlperf.app import AppConfig
    from cmx.mlperf.loadgen.userconf import ShortProfile


@dataclass(frozen=True)
class TuneRequest:
    """What the user asked: the scenario, where to start, where the inputs file goes, how far to search."""

    scenario: str
    start_qps: float | None = None
    out: Path | None = None        # the inputs file (default: tuned.yaml in the tune's folder)
    tolerance: float = 0.04
    max_probes: int = 10
    confirm: bool = True
    confirm_tries: int = CONFIRM_TRIES
    probe_seconds: float = PROBE_SECONDS

    def options(self) -> tuple[str, ...]:
        """`cmx tune`'s arguments that ask for this request again (those left at their defaults are left out), as
        an argv takes them: a command line quotes each."""
        default = TuneRequest(self.scenario)
        out = ["--scenario", self.scenario]
        if self.start_qps is not None:
            out += ["--start", f"{self.start_qps:g}"]
        if self.out is not None:
            out += ["--out", str(self.out)]
        if self.tolerance != default.tolerance:
            out += ["--tolerance", f"{self.tolerance:g}"]
        if self.max_probes != default.max_probes:
            out += ["--max-probes", str(self.max_probes)]
        if self.probe_seconds != default.probe_seconds:
            out += ["--probe-seconds", f"{self.probe_seconds:g}"]
        if self.confirm_tries != default.confirm_tries:
            out += ["--confirm-tries", str(self.confirm_tries)]
        if not self.confirm:
            out.append("--no-confirm")
        return tuple(out)


@dataclass(frozen=True)
class TuneTarget:
    """The app, benchmark and scenario a tune is for, as the plan fixes them."""

    family: str
    benchmark: str
    round: str
    scenario: str
    input_name: str            # the app input the answer sets: target_qps_server
    start_qps: float | None
    has_limits: bool           # a Server-like scenario (Offline has none)


def scenario_target(family: str, name: str, round_name: str, scenario: str, start: float | None) -> TuneTarget:
    """The tune target of benchmark `name`'s `scenario` in the round, from `start` (None: Offline from 1 sample/s, a
    Server-like search from the Offline rate it measures first); TuneError for a scenario the search cannot judge."""
    from cmx.mlperf.rounds import RoundError, load_round

    rules_bench = load_round(round_name).benchmark(name)
    try:
        rules = rules_bench.scenario(scenario)
    except RoundError:
        raise TuneError(f"{name} has no {scenario} scenario in round {round_name}: no rules or latency limits to "
                        "tune it against", hint=f"its scenarios are {', '.join(rules_bench.scenario_names)}") from None
    if rules.target_latency_ms is not None:
        raise TuneError(f"{name} {scenario} is judged on whole answers' latency (p99 under {rules.target_latency_ms:g} "
                        "ms end to end), and cmx tune searches against TTFT and TPOT limits only",
                        hint=f"set --input target_qps_{scenario.lower()}=QPS by hand between runs; each run's summary "
                             "shows its latency p99 against the limit")
    if start is not None and start <= 0:
        raise TuneError(f"the start QPS must be above 0, not {start}")
    return TuneTarget(family=family, benchmark=name, round=round_name, scenario=scenario,
                      input_name=f"target_qps_{scenario.lower()}",
                      start_qps=float(start) if start is not None else None, has_limits=rules.latency is not None)


def lengths(config: AppConfig, target: TuneTarget, request: TuneRequest) -> tuple[Length, Length, ShortProfile | None]:
    """(each probe's length, the confirm run's length, the confirm's short profile or None)."""
    from cmx.mlperf.app import short_profile
    from cmx.mlperf.rounds import load_round

    rules = load_round(target.round).benchmark(target.benchmark).scenario(target.scenario)
    psc = load_round(target.round).benchmark(target.benchmark).performance_sample_count
    if config.short:
        short = short_profile(target.scenario, config.rows)
        full = Length(short.min_duration_ms, short.min_query_count, short.samples)
        return full, full, short  # the short profile is as short as a probe can be and still meet early stopping
    full = Length(rules.min_duration_ms, rules.min_query_count or 0, psc)
    probe_ms = min(rules.min_duration_ms, int(request.probe_seconds * 1000))
    queries = min(full.min_queries, EARLY_STOPPING_QUERIES) if not target.has_limits else EARLY_STOPPING_QUERIES
    return Length(probe_ms, queries, psc), full, None


def probe_line(p: Probe) -> str:
    ttft = "-" if p.ttft_p99_ms is None else f"{p.ttft_p99_ms:.0f}"
    tpot = "-" if p.tpot_p99_ms is None else f"{p.tpot_p99_ms:.1f}"
    return (f"{p.qps:g}/s {p.validity or '-'} {'pass' if p.passed else 'FAIL'} TTFT p99 {ttft} ms TPOT p99 {tpot} ms "
            f"completed {p.completed_qps or 0:g}/s {p.seconds:.1f} s" + (f" ({p.reason})" if p.reason else ""))


__all__ = ["TuneRequest", "TuneTarget", "lengths", "probe_line", "scenario_target"]
