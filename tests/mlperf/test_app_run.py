"""The MLPerf app: cmx.mlperf.app (layout, facts, summary, refusing failed runs) and the helpers of
cmx.mlperf.app_step, on llama2-70b's settings.

Unit tests drive `run_app` with a recorded runner: it copies real LoadGen logs from
tests/data/loadgen into the test's folder and returns the HarnessResult the harness would have
judged from them (no vLLM, no harness process). Each app recipe, through the CLI on its tiny model,
is a row of tests/mlperf/test_app_benchmarks.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from cmx.mlperf.app import AppConfig, AppRunFailed, run_app
from cmx.mlperf.app_plan import AppConfigError
from cmx.mlperf.app_step import chosen_sampling, modes_for, scenarios_for, system_name
from cmx.mlperf.backends.base import GREEDY, Sampling
from cmx.mlperf.benchmarks.llama2_70b.accuracy import AccuracyResult
from cmx.mlperf.loadgen.harness import judge
from cmx.mlperf.loadgen.harness_config import HarnessConfig, HarnessResult
from cmx.mlperf.loadgen.sut import SampleError
from cmx.mlperf.loadgen.test06 import Check, Test06Result, format_verify_accuracy_txt
from cmx.mlperf.rounds import load_round
from cmx.mlperf.run_summary import format_table
from cmx.mlperf.scoring.accuracy_txt import format_accuracy_txt
from tests.conftest import DATA

LOADGEN_LOGS = DATA / "loadgen"
V60 = load_round("v6.0")
RECORDED = {"performance": "offline-perf", "accuracy": "accuracy", "test06": "accuracy"}


class Recorded:
    """A harness runner that replays recorded LoadGen logs; `folders` maps (scenario, mode) to one, `failed` to the
    samples that failed in the backend (the SUT's error record)."""

    def __init__(self, folders: dict[tuple[str, str], str] | None = None,
                 failed: dict[tuple[str, str], list[SampleError]] | None = None) -> None:
        self.folders = folders or {}
        self.failed = failed or {}
        self.calls: list[HarnessConfig] = []
        self.processes: list[tuple[str, ...]] = []  # each harness process: its tests' "Scenario mode"

    def __call__(self, configs: list[HarnessConfig], *, timeout: float | None = None, logger: Any = None,
                 env: dict[str, str] | None = None, on_progress: Any = None) -> list[HarnessResult]:
        self.processes.append(tuple(f"{c.scenario} {c.mode}" for c in configs))
        return [self.one(c) for c in configs]

    def one(self, config: HarnessConfig) -> HarnessResult:
        self.calls.append(config)
        key = (config.scenario, config.mode)
        folder = self.folders[key] if key in self.folders else RECORDED[config.mode]
        shutil.copytree(LOADGEN_LOGS / folder, config.output, dirs_exist_ok=True)
        # judge the recorded logs as what they are (no recording is a TEST06 audit run)
        recorded = HarnessConfig(**{**config.__dict__, "scenario": "Server" if "server" in folder or
                                    folder == "invalid" else "Offline",
                                    "mode": "accuracy" if config.mode == "test06" else config.mode})
        result = judge(recorded, self.failed.get((config.scenario, config.mode), []), 16, 1.0, 2.0, {})
        result = HarnessResult(**{**result.__dict__, "scenario": config.scenario, "mode": config.mode})
        result.write(config.output / "result.json")
        return result


def fake_evaluate(output: Path, dataset: Path, tokenizer: Path, *, benchmark: str = "llama2-70b-99",
                  rows: int | None = None) -> Path:
    result = AccuracyResult(rouge1=30.5, rouge2=10.25, rougeL=20.0, rougeLsum=20.0, gen_len=100, gen_num=16,
                            gen_tok_len=200, tokens_per_sample=12.5)
    path = output / "accuracy.txt"
    path.write_text(format_accuracy_txt(result, "a" * 64), encoding="utf-8")
    return path


def fake_verify(output: Path, scenario: str, eos_token_id: int | None = None, passed: bool = True) -> Path:
    result = Test06Result(scenario, 16, Check(None), Check(passed), Check(True))
    path = output / "verify_accuracy.txt"
    path.write_text(format_verify_accuracy_txt(result), encoding="utf-8")
    return path


def app_config(tmp_path: Path, **kw: Any) -> AppConfig:
    base: dict[str, Any] = {
        "round": "v6.0", "benchmark": "llama2-70b-99", "device": "cpu", "scenarios": ("Offline",),
        "modes": ("performance", "accuracy", "test06"), "model": tmp_path / "model", "tokenizer": tmp_path / "model",
        "dataset": tmp_path / "orca.pkl", "results_dir": tmp_path / "results", "system": "my-box",
        "target_qps": {"Offline": 300.0, "Server": 90.0, "Interactive": 90.0}, "short": True, "tiny": True, "rows": 16,
        "max_tokens": 16}
    return AppConfig(**{**base, **kw})


def test_the_results_tree_holds_each_test_user_conf_and_the_facts(tmp_path: Path):
    runner = Recorded()
    result = run_app(app_config(tmp_path), runner=runner, evaluate=fake_evaluate, verify=fake_verify)
    scenario = tmp_path / "results" / "my-box" / "llama2-70b-99" / "Offline"
    assert (scenario / "performance" / "run_1" / "mlperf_log_detail.txt").is_file()
    assert (scenario / "accuracy" / "accuracy.txt").is_file()
    assert (scenario / "TEST06" / "verify_accuracy.txt").is_file()
    conf = (scenario / "user.conf").read_text()
    assert "SHORT PROFILE" in conf and "llama2-70b.Offline.target_qps = 300.0" in conf
    assert [c.user_conf for c in runner.calls] == [scenario / "user.conf"] * 3
    assert [c.mode for c in runner.calls] == ["performance", "accuracy", "test06"]
    assert runner.processes == [("Offline performance", "Offline accuracy", "Offline test06")]  # one engine load
    assert all(c.rows == 16 and c.max_tokens == 16 and c.device == "cpu" for c in runner.calls)
    facts = json.loads((scenario / "cmx_run.json").read_text())
    assert facts["short"] is True and facts["tiny"] is True and facts["compliant"] is False
    assert any("short run" in r for r in facts["noncompliance"])
    assert facts["validity"]["performance"] == "VALID" and facts["ok"] is True
    assert result.ok and (tmp_path / "results" / "summary.txt").read_text().strip() == result.table


def test_each_scenario_runs_its_tests_in_a_harness_process_of_its_own(tmp_path: Path):
    runner = Recorded({("Server", "performance"): "server-perf"})
    run_app(app_config(tmp_path, scenarios=("Offline", "Server"), modes=("performance", "accuracy")), runner=runner,
            evaluate=fake_evaluate, verify=fake_verify)
    assert runner.processes == [("Offline performance", "Offline accuracy"), ("Server performance", "Server accuracy")]


def test_the_summary_has_tokens_per_second_rouge_and_says_not_compliant(tmp_path: Path):
    result = run_app(app_config(tmp_path, modes=("performance", "accuracy")), runner=Recorded(),
                     evaluate=fake_evaluate, verify=fake_verify)
    perf, acc = result.runs
    assert perf.validity == "VALID" and perf.tokens_per_second and perf.tokens_per_second > 0
    assert acc.rouge == {"rouge1": 30.5, "rouge2": 10.25, "rougeL": 20.0, "tokens_per_sample": 12.5}
    lines = result.table.splitlines()
    assert lines[0].split()[:3] == ["scenario", "mode", "result"]
    assert "VALID" in lines[1] and "rouge1 30.50 rouge2 10.25 rougeL 20.00" in lines[2]
    assert "NOT COMPLIANT" in lines[-1]


def test_an_invalid_run_fails_the_app_naming_the_run_and_why_after_writing_the_tree(tmp_path: Path):
    runner = Recorded({("Server", "performance"): "invalid"})
    config = app_config(tmp_path, scenarios=("Offline", "Server"), modes=("performance",))
    with pytest.raises(AppRunFailed) as err:
        run_app(config, runner=runner, evaluate=fake_evaluate, verify=fake_verify)
    text = err.value.render()
    assert "1 of 2 test(s) failed" in text and "Server performance (INVALID)" in text
    assert "Offline performance" not in text and "hint:" in text
    facts = json.loads((config.scenario_dir("Server") / "cmx_run.json").read_text())
    assert facts["ok"] is False and facts["problems"]["performance"]
    assert (tmp_path / "results" / "summary.txt").is_file()


def test_log_errors_and_a_failed_test06_fail_the_app(tmp_path: Path):
    runner = Recorded({("Offline", "accuracy"): "error"})
    with pytest.raises(AppRunFailed, match="Offline accuracy") as err:
        run_app(app_config(tmp_path), runner=runner, evaluate=fake_evaluate,
                verify=lambda out, scenario, eos: fake_verify(out, scenario, eos, passed=False))
    assert "n_tokens" in err.value.message and "TEST06 failed a check" in err.value.message


def test_full_runs_are_judged_on_accuracy_targets(tmp_path: Path):
    config = app_config(tmp_path, tiny=False, short=False, rows=None, modes=("accuracy",))
    with pytest.raises(AppRunFailed, match=r"ROUGE-1 is 30\.5, below the minimum"):
        run_app(config, runner=Recorded(), evaluate=fake_evaluate, verify=fake_verify)


def test_a_missing_target_qps_fails_before_anything_runs(tmp_path: Path):
    runner = Recorded()
    config = app_config(tmp_path, scenarios=("Offline", "Server"), target_qps={"Offline": 1.0, "Server": None})
    with pytest.raises(AppConfigError, match="no target_qps for llama2-70b-99 Server") as err:
        run_app(config, runner=runner, evaluate=fake_evaluate, verify=fake_verify)
    assert "target_qps_server" in (err.value.hint or "") and runner.calls == []


def test_an_earlier_successful_runs_folder_is_refused_before_anything_runs(tmp_path: Path):
    config = app_config(tmp_path)
    run_app(config, runner=Recorded(), evaluate=fake_evaluate, verify=fake_verify)
    runner = Recorded()
    with pytest.raises(AppConfigError, match="already holds results of a successful run"):
        run_app(config, runner=runner, evaluate=fake_evaluate, verify=fake_verify)
    assert runner.calls == [] and (config.scenario_dir("Offline") / "cmx_run.json").is_file()


def test_variation_names_map_to_scenarios_modes_and_a_system_folder():
    assert scenarios_for("all-scenarios", V60, "llama2-70b-99") == ("Offline", "Server", "Interactive")
    assert scenarios_for("server", V60, "llama2-70b-99") == ("Server",)
    v61 = load_round("v6.1")
    assert scenarios_for("all-scenarios", v61, "qwen3-vl-235b-a22b") == ("Offline", "Server")
    with pytest.raises(AppConfigError, match="measured by MLCommons' endpoint client"):
        scenarios_for("interactive", v61, "qwen3-vl-235b-a22b")
    assert modes_for("valid") == ("performance", "accuracy", "test06")
    assert modes_for("compliance") == ("test06",)
    with pytest.raises(AppConfigError):
        modes_for("fast")
    assert system_name({"gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 8}) == "8xNVIDIA_H100_80GB_HBM3"
    assert system_name({"gpus": [], "cpu_model": "AMD EPYC 9575F 64-Core Processor"}) == \
        "AMD_EPYC_9575F_64-Core_Processor"
    assert system_name({"gpus": []}, "my box/1") == "my_box_1"


GPT_OSS = Sampling(temperature=1.0, top_p=1.0, top_k=-1)
NOTHING_GIVEN = {"temperature": None, "top_p": None, "top_k": None, "sampling_seed": None}


def test_the_reference_sampling_holds_unless_an_input_overrides_a_field():
    assert chosen_sampling(NOTHING_GIVEN, GPT_OSS) == GPT_OSS
    assert chosen_sampling({**NOTHING_GIVEN, "temperature": 0}, GPT_OSS) == Sampling(temperature=0.0, top_k=-1)
    seeded = Sampling(top_k=1, seed=42)
    assert chosen_sampling({**NOTHING_GIVEN, "sampling_seed": -1, "top_k": 0}, seeded) == Sampling()
    assert chosen_sampling({**NOTHING_GIVEN, "sampling_seed": 7, "top_p": 0.5}, seeded) == \
        Sampling(top_p=0.5, top_k=1, seed=7)
    with pytest.raises(AppConfigError, match=r"--input: top_p 0\.0 is outside") as caught:
        chosen_sampling({**NOTHING_GIVEN, "top_p": 0}, GPT_OSS)
    assert caught.value.hint


def test_an_overridden_sampling_reaches_each_test_and_is_recorded_beside_the_references(tmp_path: Path):
    runner = Recorded()
    debug = Sampling(temperature=0.0, top_p=1.0, top_k=-1)
    result = run_app(app_config(tmp_path, modes=("performance",), sampling=debug, reference_sampling=GPT_OSS),
                     runner=runner, evaluate=fake_evaluate, verify=fake_verify)
    assert [c.sampling for c in runner.calls] == [debug]
    facts = json.loads((tmp_path / "results/my-box/llama2-70b-99/Offline/cmx_run.json").read_text())
    assert facts["sampling"] == {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "seed": None}
    assert facts["reference_sampling"]["temperature"] == 1.0 and facts["sampling_overrides"] == ["temperature"]
    assert "sampling overridden (temperature): the closed division generates as the reference does" in \
        facts["noncompliance"]
    assert result.table.splitlines()[-1] == ("SAMPLING OVERRIDDEN: temperature 0, top_p 1, top_k off, no seed "
                                             "(the reference: temperature 1, top_p 1, top_k off, no seed)")


def test_a_run_at_the_references_sampling_records_no_override(tmp_path: Path):
    result = run_app(app_config(tmp_path, modes=("performance",), sampling=GPT_OSS, reference_sampling=GPT_OSS),
                     runner=Recorded(), evaluate=fake_evaluate, verify=fake_verify)
    facts = json.loads((tmp_path / "results/my-box/llama2-70b-99/Offline/cmx_run.json").read_text())
    assert facts["sampling"] == facts["reference_sampling"] == GPT_OSS.to_json() and facts["sampling_overrides"] == []
    assert not any("sampling" in reason for reason in facts["noncompliance"])
    assert "SAMPLING" not in result.table
    assert app_config(tmp_path).sampling == GREEDY and app_config(tmp_path).sampling_overrides == ()


def test_an_empty_table_still_has_its_header():
    assert format_table([]).split() == ["scenario", "mode", "result", "tokens/s", "TTFT", "p99", "ms", "TPOT", "p99",
                                        "ms", "accuracy", "tok/sample"]


def test_a_benchmark_judged_on_whole_answers_shows_samples_per_second_and_the_end_to_end_p99():
    from cmx.mlperf.run_summary import RunSummary

    run = RunSummary(scenario="Server", mode="performance", folder="f", validity="VALID", tokens_per_second=None,
                     ttft_p99_ms=None, tpot_p99_ms=None, rouge=None, problems=[], latency_p99_ms=4210.5,
                     samples_per_second=0.99)
    header, row = format_table([run], whole_answers=True).splitlines()
    assert header.split() == ["scenario", "mode", "result", "samples/s", "latency", "p99", "ms", "accuracy"]
    assert row.split() == ["Server", "performance", "VALID", "0.99", "4210.5", "-"]


def test_requests_a_server_refused_are_noted_under_the_table():
    from cmx.mlperf.app import refusal_notes
    from cmx.mlperf.run_summary import RunSummary

    def run(mode: str, refused: int) -> RunSummary:
        return RunSummary(scenario="Offline", mode=mode, folder="f", validity="VALID", tokens_per_second=None,
                          ttft_p99_ms=None, tpot_p99_ms=None, rouge=None, problems=[],
                          details={"refused_requests": refused})

    assert refusal_notes([run("performance", 0), run("accuracy", 3)]) == (
        "Offline accuracy: the server refused 3 request(s), answered empty and scored as unparsable (see harness.log)",)


def test_engine_options_reach_the_harness_command_line(tmp_path: Path):
    from cmx.mlperf.app import harness_config
    from cmx.mlperf.loadgen.harness import parse_args
    from cmx.mlperf.loadgen.harness_config import EngineSettings

    engine = EngineSettings(precision="fp8", tensor_parallel_size=8, max_num_seqs=512, max_num_batched_tokens=8192,
                            gpu_memory_utilization=0.95, max_model_len=4096)
    config = app_config(tmp_path, device="rocm", engine=engine)
    hc = harness_config(config, "Server", "performance", tmp_path / "user.conf")
    assert hc.output == config.scenario_dir("Server") / "performance" / "run_1"
    assert parse_args(hc.argv(tmp_path / "harness_config.json")) == [hc]
    assert hc.engine == engine and hc.endpoint is None and hc.backend == "vllm"


def test_test06_checks_the_models_own_eos_id(tmp_path: Path):
    seen: list[int | None] = []

    def verify(output: Path, scenario: str, eos_token_id: int | None) -> Path:
        seen.append(eos_token_id)
        return fake_verify(output, scenario, eos_token_id)

    run_app(app_config(tmp_path, eos_token_id=128009), runner=Recorded(), evaluate=fake_evaluate, verify=verify)
    assert seen == [128009]
