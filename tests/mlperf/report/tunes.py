"""A `cmx tune`'s results folder for the report's tests, written by the tune's own code from hand-written probes.

The probes are probes.jsonl lines as the tune process appends them (`json.dumps(asdict(probe))`,
cmx.mlperf.tune.process.search); the confirm runs are recorded real LoadGen logs judged as the
harness judges them; `tune_record` and `write_tune_results` are what `cmx tune` calls.
"""

from __future__ import annotations

import json
from pathlib import Path

from cmx.mlperf.app import harness_config
from cmx.mlperf.loadgen.harness_config import HarnessResult
from cmx.mlperf.tune.process import TuneOutcome, confirm_folder
from cmx.mlperf.tune.record import write_tune_results
from cmx.mlperf.tune.search import Probe
from cmx.mlperf.tune.step import tune_record
from cmx.mlperf.tune.target import TuneTarget
from tests.mlperf.report.test_report import write_samples
from tests.mlperf.test_app_run import Recorded, app_config

# a Server tune of llama2-70b-99 (limits: TTFT p99 2000 ms, TPOT p99 200 ms), started at 80/s: grow, a saturated
# INVALID failure, then the queue model's estimates inside the bracket; 230 passed and is the search's answer
PROBES_JSONL = """\
{"qps": 80.0, "passed": true, "validity": "VALID", "early_stopping_met": true, "ttft_p99_ms": 151.2, "tpot_p99_ms": 21.4, "ttft_projected_ms": 151.2, "completed_qps": 79.8, "queries": 480, "seconds": 6.1, "reason": ""}
{"qps": 320.0, "passed": false, "validity": "INVALID", "early_stopping_met": false, "ttft_p99_ms": 3410.0, "tpot_p99_ms": 48.3, "ttft_projected_ms": 3410.0, "completed_qps": 171.2, "queries": 480, "seconds": 4.9, "reason": "TTFT p99 3410 ms is over the limit 2000 ms"}
{"qps": 210.0, "passed": true, "validity": "VALID", "early_stopping_met": true, "ttft_p99_ms": 1204.5, "tpot_p99_ms": 35.0, "ttft_projected_ms": 1204.5, "completed_qps": 182.0, "queries": 480, "seconds": 4.8, "reason": ""}
{"qps": 250.0, "passed": false, "validity": "VALID", "early_stopping_met": true, "ttft_p99_ms": 1788.0, "tpot_p99_ms": 39.9, "ttft_projected_ms": 2380.0, "completed_qps": 176.5, "queries": 480, "seconds": 4.7, "reason": "TTFT grows through the probe: its p99 would reach 2380 ms over the confirm run's 4 s (limit 2000 ms)"}
{"qps": 230.0, "passed": true, "validity": "VALID", "early_stopping_met": true, "ttft_p99_ms": 1502.3, "tpot_p99_ms": 37.1, "ttft_projected_ms": 1502.3, "completed_qps": 180.4, "queries": 480, "seconds": 4.8, "reason": ""}
"""  # noqa: E501 - JSON Lines, one probe a line as probes.jsonl holds them
COMMAND = "cmx tune 'app mlperf inference llama2 _cpu _tiny _short' --scenario Server"


def probes_from_jsonl(path: Path) -> tuple[Probe, ...]:
    return tuple(Probe(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines())


def write_tune(root: Path, *, results_dir: Path | None = None, system: str = "my-box", confirmed: bool = True) -> Path:
    """A tune's results folder under `root` (its results_dir; the tune's own folder beside it): five probes, and,
    when `confirmed`, a confirm run at 230/s that failed and one a step lower, at 212/s, that passed; else a tune
    with --no-confirm, whose answer is the search's, 230/s."""
    config = app_config(root, scenarios=("Server",), modes=("performance",), system=system,
                        results_dir=results_dir or root / "results")
    tune_dir = root / "tune-server"
    tune_dir.mkdir(parents=True)
    (tune_dir / "probes.jsonl").write_text(PROBES_JSONL, encoding="utf-8")
    probes = probes_from_jsonl(tune_dir / "probes.jsonl")
    confirms: list[tuple[float, HarnessResult]] = []
    if confirmed:
        failed = HarnessResult(scenario="Server", mode="performance", validity="INVALID",
                               problems=["LoadGen says INVALID: TTFT p99 over the limit"], samples_per_second=176.0,
                               tokens_per_second=2800.0, ttft_p99_ms=2210.0, tpot_p99_ms=40.2, completed_samples=480,
                               failed_samples=0, start_seconds=0.0, test_seconds=4.9,
                               details={"same_engine_as_probes": True})
        hc = harness_config(config, "Server", "performance", tune_dir / "confirm-2" / "user.conf")
        passed = Recorded({("Server", "performance"): "server-perf"}).one(
            hc.__class__(**{**hc.__dict__, "output": confirm_folder(tune_dir, 2)}))
        write_samples(confirm_folder(tune_dir, 2), streamed=True)
        confirms = [(230.0, failed), (212.0, passed)]
    outcome = TuneOutcome(scenario="Server", probes=probes, qps=230.0,
                          confirms=tuple(confirms), engine_start_s=24.6, seconds=71.3)
    target = TuneTarget(family="llama2", benchmark="llama2-70b-99", round="v6.0", scenario="Server",
                        input_name="target_qps_server", start_qps=80.0, has_limits=True)
    record = tune_record(target, outcome, 212.0 if confirmed else 230.0, short=True, tuned=root / "tuned.yaml",
                         folder=tune_dir, command=COMMAND)
    return write_tune_results(config, "Server", record, confirms[-1][1] if confirms else None,
                              confirm_folder(tune_dir, len(confirms)) if confirms else None)
