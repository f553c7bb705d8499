"""A server killed with SIGKILL in the middle of a Server test ends the harness within seconds, not at the end of
LoadGen's schedule, and the app starts no later test (issue 21, item 2).

Real parts: ONE `vllm serve` of the tiny Llama (the CPU build) for the module, started as
tests/mlperf/backends/test_endpoint.py starts it, and the harness process through `run_test` (real
LoadGen) on a Server schedule of a minute. The server's process group is killed once the first
samples are answered. The rule itself (what counts as a dead server, what the SUT does then) is
unit-tested with fakes in test_harness.py, backends/test_endpoint.py and backends/test_ray_replicas.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cmx.mlperf.app import AppConfig, AppRunFailed, run_app
from cmx.mlperf.backends.profiles import EngineOptions
from cmx.mlperf.backends.vllm_server import VllmServer, VllmServerConfig
from cmx.mlperf.loadgen.harness import STOPPED_EARLY, run_test
from cmx.mlperf.loadgen.harness_config import EndpointSettings, HarnessConfig, HarnessResult
from cmx.mlperf.loadgen.progress import RunProgress
from cmx.mlperf.loadgen.userconf import ShortProfile, user_conf
from cmx.mlperf.rounds import load_round
from tests.conftest import needs_vllm

ROWS, SAMPLES, MAX_TOKENS = 64, 32, 16
TARGET_QPS, SCHEDULE_MS = 10, 60_000  # a minute of schedule: 600 queries, a tenth of what the server serves here
EXIT_WITHIN_S = 5.0


DEAD = "the server at http://127.0.0.1:9/v1 stopped answering (connection refused) after 7 samples; 3 samples lost"


def test_a_test_stopped_by_a_dead_backend_is_the_apps_last(tmp_path: Path):
    calls: list[list[tuple[str, str]]] = []

    def runner(configs: list[HarnessConfig], **_: object) -> list[HarnessResult]:
        """A harness process whose first test the dead backend stopped: as run_tests, it returns that one only."""
        calls.append([(c.scenario, c.mode) for c in configs])
        first = configs[0]
        return [HarnessResult(scenario=first.scenario, mode=first.mode, validity="FAILED", problems=[DEAD, "stopped"],
                              samples_per_second=None, tokens_per_second=None, ttft_p99_ms=None, tpot_p99_ms=None,
                              completed_samples=10, failed_samples=3, start_seconds=1.0, test_seconds=2.0,
                              details={STOPPED_EARLY: {"reason": DEAD, "unfinished_logs": []}})]

    config = AppConfig(round="v6.0", benchmark="llama2-70b-99", device="cpu", scenarios=("Server", "Offline"),
                       modes=("performance", "accuracy"), model=tmp_path, tokenizer=tmp_path, dataset=tmp_path,
                       results_dir=tmp_path / "results", system="box", target_qps={"Server": 9.0, "Offline": 9.0},
                       short=True, tiny=True, rows=16, max_tokens=16)
    with pytest.raises(AppRunFailed) as caught:
        run_app(config, runner=runner)
    assert calls == [[("Server", "performance"), ("Server", "accuracy")]]  # the Offline process never starts
    assert DEAD in caught.value.render()
    facts = json.loads((config.scenario_dir("Server") / "cmx_run.json").read_text())
    assert facts["ok"] is False and facts["problems"]["performance"][0] == DEAD
    assert facts["validity"] == {"performance": "FAILED"}  # the accuracy test never ran


@dataclass(frozen=True)
class Served:
    server: VllmServer
    model: Path
    dataset: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_llama, make_tiny_openorca

    folder = tmp_path_factory.mktemp("dead-server")
    model = make_tiny_llama(folder / "model", seed=0).path
    dataset = make_tiny_openorca(folder / "orca.pkl", model, rows=ROWS, seed=0).path
    config = VllmServerConfig(model=model, options=EngineOptions(device="cpu", max_num_seqs=16),
                              log_path=folder / "server.log", served_model_name="tiny-llama2", max_model_len=2048,
                              startup_timeout_s=300)
    with VllmServer(config) as server:
        yield Served(server, model, dataset)


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_a_server_killed_mid_server_test_ends_the_harness_within_seconds_naming_the_server(served: Served,
                                                                                          tmp_path: Path):
    conf = user_conf(load_round("v6.0"), "llama2-70b-99", "Server", target_qps=TARGET_QPS,
                     short=ShortProfile(min_duration_ms=SCHEDULE_MS, samples=SAMPLES, min_query_count=SAMPLES))
    out = tmp_path / "run"
    config = HarnessConfig(model=served.model, dataset=served.dataset, scenario="Server", mode="performance",
                           user_conf=conf.write(tmp_path / "user.conf"), output=out, max_tokens=MAX_TOKENS, rows=ROWS,
                           endpoint=EndpointSettings(url=served.server.url, model="tiny-llama2"))
    killed: list[float] = []

    def kill_once_samples_are_answered(progress: RunProgress) -> None:
        if not killed and progress.completed >= 2:
            os.killpg(served.server.info.pid, signal.SIGKILL)
            killed.append(time.monotonic())

    result = run_test(config, timeout=300, on_progress=kill_once_samples_are_answered)
    returned = time.monotonic()
    assert killed, f"no sample was answered before the harness ended: {result.problems}"
    assert returned - killed[0] < EXIT_WITHIN_S, f"the harness ended {returned - killed[0]:.1f} s after the kill"
    first = result.problems[0]
    # refused, or reset when the probe met the killed process's socket still closing
    assert re.match(rf"the server at {re.escape(served.server.url)} stopped answering \(connection (refused|reset)\) "
                    "after ", first), first
    assert first.endswith(" samples lost") and not result.ok
    assert (result.validity, result.loadgen_validity) == ("FAILED", None)  # LoadGen gave no verdict
    assert result.failed_samples >= 1 and result.completed_samples >= 2
    assert result.test_seconds < SCHEDULE_MS / 1000 / 2
    assert not (out / "mlperf_log_detail.txt").exists()  # no reader may take LoadGen's unfinished log for a run's
    assert (out / "mlperf_log_detail.unfinished.txt").is_file()
    assert result.details["stopped_early"]["reason"] == first
