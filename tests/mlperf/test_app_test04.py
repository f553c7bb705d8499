"""The app's TEST04: run after the performance run it compares with, verified into TEST04/verify_performance.txt,
and failing the run (even a tiny one: a cache shows on random weights too) when the verification fails. The runs
are recorded LoadGen logs (tests/mlperf/test_app_run.py's Recorded runner)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cmx.mlperf.app import AppRunFailed, run_app
from cmx.mlperf.loadgen.harness import judge
from cmx.mlperf.loadgen.harness_config import HarnessConfig, HarnessResult
from tests.mlperf.test_app_run import LOADGEN_LOGS, Recorded, app_config, fake_evaluate, fake_verify


class RecordedTest04(Recorded):
    """Recorded, with the TEST04 run replayed from `test04` (a recorded performance run, judged as one: no recording
    is of an audit run, which the harness would judge by its audit.config)."""

    def __init__(self, test04: str) -> None:
        super().__init__()
        self.test04 = test04

    def one(self, config: HarnessConfig) -> HarnessResult:
        if config.mode != "test04":
            return super().one(config)
        self.calls.append(config)
        shutil.copytree(LOADGEN_LOGS / self.test04, config.output, dirs_exist_ok=True)
        recorded = HarnessConfig(**{**config.__dict__, "mode": "performance",
                                    "scenario": "Server" if self.test04 == "invalid" else "Offline"})
        result = judge(recorded, [], 16, 1.0, 2.0, {})
        result = HarnessResult(**{**result.__dict__, "scenario": config.scenario, "mode": "test04"})
        result.write(config.output / "result.json")
        return result


def test_test04_runs_after_the_performance_run_and_passes_on_the_same_speed(tmp_path: Path):
    runner = RecordedTest04("offline-perf")
    result = run_app(app_config(tmp_path, modes=("performance", "accuracy", "test04")), runner=runner,
                     evaluate=fake_evaluate, verify=fake_verify)
    assert [c.mode for c in runner.calls] == ["performance", "accuracy", "test04"]
    folder = tmp_path / "results" / "my-box" / "llama2-70b-99" / "Offline"
    assert runner.calls[-1].output == folder / "TEST04"
    text = (folder / "TEST04" / "verify_performance.txt").read_text(encoding="utf-8")
    assert text == "Verifying performance.\nreference score = 99.6085\ntest score = 99.6085\nTEST PASS\n"
    assert result.ok and json.loads((folder / "cmx_run.json").read_text())["validity"]["test04"] == "VALID"


def test_a_test04_that_fails_its_verification_fails_the_tiny_run_too(tmp_path: Path):
    runner = RecordedTest04("invalid")
    with pytest.raises(AppRunFailed, match="TEST04"):
        run_app(app_config(tmp_path, modes=("performance", "test04")), runner=runner, evaluate=fake_evaluate,
                verify=fake_verify)
    folder = tmp_path / "results" / "my-box" / "llama2-70b-99" / "Offline"
    text = (folder / "TEST04" / "verify_performance.txt").read_text(encoding="utf-8")
    assert "TEST PASS" not in text and "TEST FAIL: " in text
    facts = json.loads((folder / "cmx_run.json").read_text())
    assert facts["validity"]["test04"] == "FAILED" and facts["dataset"] == str(tmp_path / "orca.pkl")
