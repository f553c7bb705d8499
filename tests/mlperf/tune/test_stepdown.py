"""The confirm runs' step down (cmx/mlperf/tune/stepdown.py, process.stepped_confirms) on a machine that slows down.

The confirm runs here are a model's, as the search's probes are in test_search.py: a run at lambda queries/s on
a machine whose capacity is now mu completes min(lambda, mu) samples/s and passes while lambda <= mu (a
_short run's queue lets it pass a little above mu; the model is stricter, so a step that passes here passes
there). What a tune then says of its confirms is read back as `cmx tune` prints it, as --json writes it and as
`cmx report` draws it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from cmx.cli.tune import command, confirms_line, heading, no_target
from cmx.mlperf.loadgen.harness_config import HarnessConfig, HarnessResult
from cmx.mlperf.report.collect import TuneRecord
from cmx.mlperf.report.page import _tune
from cmx.mlperf.tune.probe import Length
from cmx.mlperf.tune.process import TuneConfig, TuneOutcome, stepped_confirms
from cmx.mlperf.tune.search import Policy, Probe
from cmx.mlperf.tune.step import tune_record
from cmx.mlperf.tune.stepdown import (
    CONFIRM_TRIES,
    FAILED_SAMPLES,
    FLOOR,
    PASSED,
    TRIES,
    ConfirmTry,
    StepDown,
    step_down,
)
from cmx.mlperf.tune.target import TuneRequest, TuneTarget
from cmx.mlperf.tune.verb import TuneAnswer, TuneResult

LOG = logging.getLogger("test-stepdown")
TARGET = TuneTarget(family="llama2-70b", benchmark="llama2-70b-99", round="v6.0", scenario="Server",
                    input_name="target_qps_server", start_qps=80.0, has_limits=True)


def confirm(qps: float, mu: float, failed: int = 0) -> HarnessResult:
    """A confirm run at `qps` on a machine of capacity `mu` (queries/s), judged as the harness judges one."""
    held = qps <= mu and not failed
    problems = [] if held else [f"{failed} samples failed in the backend"] if failed else \
        ["LoadGen says INVALID: TTFT constrain not met"]
    return HarnessResult(scenario="Server", mode="performance", validity="VALID" if held else "INVALID",
                         problems=problems, samples_per_second=min(qps, mu), tokens_per_second=None,
                         ttft_p99_ms=300.0 if held else 4100.0, tpot_p99_ms=40.0, completed_samples=480,
                         failed_samples=failed, start_seconds=0.0, test_seconds=max(4.0, 480 / qps),
                         details={"same_engine_as_probes": True}, loadgen_validity="VALID" if held else "INVALID")


def machine(capacities: list[float], failed: int = 0) -> tuple[Callable[[float, int], HarnessResult], list[float]]:
    """A run_at whose nth confirm meets capacity capacities[n-1] (the last one from then on); and the rates asked."""
    asked: list[float] = []

    def run_at(qps: float, n: int) -> HarnessResult:
        asked.append(qps)
        assert n == len(asked)
        return confirm(qps, capacities[min(n, len(capacities)) - 1], failed)
    return run_at, asked


def config(tmp_path: Path, tries: int = CONFIRM_TRIES) -> TuneConfig:
    harness = HarnessConfig(model=tmp_path, dataset=tmp_path, scenario="Server", mode="performance",
                            user_conf=tmp_path / "user.conf", output=tmp_path / "tune")
    length = Length(4000, 480, 64)
    return TuneConfig(harness=harness, start_qps=80.0, probe=length, target=length, short=None, policy=Policy(),
                      confirm_tries=tries)


def probes_up_to(found: float) -> tuple[Probe, ...]:
    """The probes of the issue's tune: they passed up to `found` while the machine still held it."""
    return tuple(Probe(qps=q, passed=True, validity="VALID", early_stopping_met=True, ttft_p99_ms=200.0,
                       tpot_p99_ms=40.0, ttft_projected_ms=200.0, completed_qps=min(q, 186.0), queries=480,
                       seconds=4.1) for q in (80.0, 186.0, found))


def answered(tmp_path: Path, found: float, runs: list[tuple[float, HarnessResult]], stop: StepDown) -> TuneAnswer:
    """The tune's answer as --json carries it, from the confirm runs and why they stopped."""
    outcome = TuneOutcome(scenario="Server", probes=probes_up_to(found), qps=found, confirms=tuple(runs),
                          engine_start_s=20.0, seconds=60.0, confirm_stop=stop.stop,
                          confirm_why=stop.why, confirm_floor_qps=found / 4)
    outcome = TuneOutcome.from_json(json.loads(json.dumps(outcome.to_json())))  # through tune.json
    chosen = runs[-1][0] if runs[-1][1].ok else None
    record = tune_record(TARGET, outcome, chosen, short=True, tuned=None, folder=tmp_path / "tune", command="cmx tune")
    (tmp_path / "cmx_tune.json").write_text(json.dumps(record), encoding="utf-8")  # what `cmx report` reads
    result = TuneResult(tmp_path, {**record, "results_dir": str(tmp_path)}, None, 60.0)
    data = json.loads(json.dumps(result.to_json()))  # `cmx tune --json`
    assert data["confirm_count"] == len(runs) and data["confirm_rates"] == [q for q, _ in runs]
    assert data["lowest_confirm_qps"] == min(q for q, _ in runs) and data["confirm_stop"] == stop.stop
    answer = result.answer
    assert answer is not None
    return answer


def test_the_first_confirm_passing_ends_the_confirms_as_before(tmp_path: Path):
    run_at, asked = machine([300.0])
    runs, stop = stepped_confirms(292.0, run_at, config(tmp_path), LOG)
    assert asked == [292.0] and stop.stop == PASSED and stop.why == "the first confirm run passed at 292/s"
    a = answered(tmp_path, 292.0, runs, stop)
    assert (a.qps, a.confirmed, a.confirm_count) == (292.0, True, 1)
    assert confirms_line(a) == "1 confirm run(s), at 292/s: the first confirm run passed at 292/s"
    assert "3 probe(s) and 1 confirm run(s)" in heading(a)


def test_a_machine_that_slowed_down_is_confirmed_at_what_it_still_completes(tmp_path: Path):
    """The issue's tune: probes passed up to 292/s, then the machine held only 150/s and soon 111/s. Each failed
    confirm steps to a tolerance under what it completed, not 8 % under its own target as before."""
    run_at, asked = machine([150.0, 111.0])
    runs, stop = stepped_confirms(292.0, run_at, config(tmp_path), LOG)
    assert asked == [292.0, 144.0, 107.0]  # 150 x 0.96, then 111 x 0.96, three significant figures
    assert [r.ok for _, r in runs] == [False, False, True]
    assert stop.stop == PASSED and stop.why == "confirm 3 of 3 passed at 107/s"
    a = answered(tmp_path, 292.0, runs, stop)
    assert (a.qps, a.found_qps, a.confirmed, a.confirm_count) == (107.0, 292.0, True, 3)
    assert a.confirm_rates == (292.0, 144.0, 107.0)
    assert confirms_line(a) == "3 confirm run(s), at 292, 144, 107/s: confirm 3 of 3 passed at 107/s"
    section = _tune(TuneRecord.read(tmp_path / "cmx_tune.json"))
    assert section["answer"] == "target_qps_server = 107, confirmed by the last confirm run"
    assert "3 confirm run(s)" in str(section["took"]) and "confirms at 292, 144, 107/s" in str(section["took"])


def test_a_confirm_that_failed_at_the_edge_steps_down_by_twice_the_tolerance():
    """Not saturated (it completed what was scheduled): the failure was the edge's noise, the old step."""
    edge = [ConfirmTry(292.0, ok=False, completed_qps=291.0, failed_samples=0)]
    assert step_down(edge, 292.0, tolerance=0.04, max_tries=4).qps == 269.0


def test_nothing_passes_down_to_the_floor_and_the_tune_says_why_and_the_lowest_rate(tmp_path: Path):
    run_at, asked = machine([5.0])  # the machine holds 5/s: the step to 4.8/s would be under the floor
    runs, stop = stepped_confirms(292.0, run_at, config(tmp_path), LOG)
    assert asked == [292.0, 73.0]  # the floor, a quarter of 292, tried once
    assert stop.stop == FLOOR
    a = answered(tmp_path, 292.0, runs, stop)
    assert (a.qps, a.confirmed, a.confirm_count, a.lowest_confirm_qps, a.confirm_floor_qps) == \
        (None, False, 2, 73.0, 73.0)
    assert a.confirm_why == "2 confirm runs failed down to the floor, 73/s (0.25 of the probes' 292/s), the lowest " \
                            "rate tried"
    assert no_target(a).startswith("no target QPS for Server: the probes passed up to 292, but no confirm run did: "
                                   "2 confirm runs failed down to the floor, 73/s")
    section = _tune(TuneRecord.read(tmp_path / "cmx_tune.json"))
    assert section["answer"] == ("no target_qps_server: the probes passed up to 292/s, but no confirm run did "
                                 "(2 confirm runs failed down to the floor, 73/s (0.25 of the probes' 292/s), "
                                 "the lowest rate tried)")


def test_the_confirms_stop_after_confirm_tries_runs(tmp_path: Path):
    run_at, asked = machine([200.0, 150.0, 120.0, 90.0])  # slowing down faster than the steps follow
    runs, stop = stepped_confirms(292.0, run_at, config(tmp_path, tries=3), LOG)
    assert asked == [292.0, 192.0, 144.0] and stop.stop == TRIES
    a = answered(tmp_path, 292.0, runs, stop)
    assert a.confirm_why == ("3 confirm run(s) failed, the most --confirm-tries allows; the lowest rate tried 144/s "
                             "(the floor: 73/s)")
    assert "no confirm run did: 3 confirm run(s) failed" in no_target(a)


def test_samples_failed_in_the_backend_end_the_confirms_at_once(tmp_path: Path):
    run_at, asked = machine([300.0], failed=12)
    _runs, stop = stepped_confirms(292.0, run_at, config(tmp_path), LOG)
    assert asked == [292.0] and stop.stop == FAILED_SAMPLES
    assert stop.why == ("confirm 1 at 292/s lost 12 samples in the backend, which a lower rate does not mend; the "
                        "lowest rate tried 292/s")


@pytest.mark.parametrize("tries", [1, 4])
def test_confirm_tries_is_a_cli_option_with_the_libraries_default(tries: int):
    option = next(p for p in command.params if p.name == "confirm_tries")
    assert option.default == CONFIRM_TRIES == TuneRequest("Server").confirm_tries
    asked = TuneRequest("Server", confirm_tries=tries).options()
    assert asked == (("--scenario", "Server") if tries == CONFIRM_TRIES else
                     ("--scenario", "Server", "--confirm-tries", str(tries)))
