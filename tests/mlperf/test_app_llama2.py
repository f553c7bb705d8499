"""The llama2-70b app: cmx.mlperf.app (layout, facts, summary, refusing failed runs) and the
recipe app-mlperf-inference-llama2.

Unit tests drive `run_app` with a recorded runner: it copies real LoadGen logs from
tests/data/loadgen into the test's folder and returns the HarnessResult the harness would have
judged from them (no vLLM, no harness process). The e2e test runs the recipe through the CLI on
the tiny model with real vLLM (CPU) and LoadGen: Offline, performance and accuracy, short profile.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from cmx.mlperf.app import (
    AppConfig,
    AppConfigError,
    AppRunFailed,
    format_table,
    run_app,
)
from cmx.mlperf.app_step import chosen_sampling, modes_for, scenarios_for, system_name
from cmx.mlperf.backends.base import GREEDY, Sampling
from cmx.mlperf.benchmarks.llama2_70b.accuracy import AccuracyResult
from cmx.mlperf.loadgen.accuracy_log import read_accuracy_log
from cmx.mlperf.loadgen.harness import judge
from cmx.mlperf.loadgen.harness_config import HarnessConfig, HarnessResult
from cmx.mlperf.loadgen.log import read_loadgen_run
from cmx.mlperf.loadgen.test06 import Check, Test06Result, format_verify_accuracy_txt
from cmx.mlperf.rounds import load_round
from cmx.mlperf.scoring.accuracy_txt import format_accuracy_txt, read_accuracy_txt
from cmx.mlperf.submission.check import check_tree
from cmx.mlperf.submission.check.report import format_report
from tests.conftest import DATA, REPO, Home, needs_vllm

LOADGEN_LOGS = DATA / "loadgen"
V60 = load_round("v6.0")
RECORDED = {"performance": "offline-perf", "accuracy": "accuracy", "test06": "accuracy"}


class Recorded:
    """A harness runner that replays recorded LoadGen logs; `folders` maps (scenario, mode) to one."""

    def __init__(self, folders: dict[tuple[str, str], str] | None = None) -> None:
        self.folders = folders or {}
        self.calls: list[HarnessConfig] = []

    def __call__(self, config: HarnessConfig, *, timeout: float | None = None, logger: Any = None,
                 env: dict[str, str] | None = None, on_progress: Any = None) -> HarnessResult:
        self.calls.append(config)
        folder = self.folders.get((config.scenario, config.mode), RECORDED[config.mode])
        shutil.copytree(LOADGEN_LOGS / folder, config.output, dirs_exist_ok=True)
        # judge the recorded logs as what they are (no recording is a TEST06 audit run)
        recorded = HarnessConfig(**{**config.__dict__, "scenario": "Server" if "server" in folder or
                                    folder == "invalid" else "Offline",
                                    "mode": "accuracy" if config.mode == "test06" else config.mode})
        result = judge(recorded, [], 16, 1.0, 2.0, {})
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
    assert all(c.rows == 16 and c.max_tokens == 16 and c.device == "cpu" for c in runner.calls)
    facts = json.loads((scenario / "cmx_run.json").read_text())
    assert facts["short"] is True and facts["tiny"] is True and facts["compliant"] is False
    assert any("short run" in r for r in facts["noncompliance"])
    assert facts["validity"]["performance"] == "VALID" and facts["ok"] is True
    assert result.ok and (tmp_path / "results" / "summary.txt").read_text().strip() == result.table


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
    with pytest.raises(AppRunFailed, match="ROUGE-1 is 30.5, below the minimum"):
        run_app(config, runner=Recorded(), evaluate=fake_evaluate, verify=fake_verify)


def test_a_missing_target_qps_fails_before_anything_runs(tmp_path: Path):
    runner = Recorded()
    config = app_config(tmp_path, scenarios=("Offline", "Server"), target_qps={"Offline": 1.0, "Server": None})
    with pytest.raises(AppConfigError, match="no target_qps for llama2-70b-99 Server") as err:
        run_app(config, runner=runner, evaluate=fake_evaluate, verify=fake_verify)
    assert "target_qps_server" in (err.value.hint or "") and runner.calls == []


def test_an_earlier_runs_folder_is_refused_before_anything_runs(tmp_path: Path):
    config = app_config(tmp_path)
    config.scenario_dir("Offline").mkdir(parents=True)
    (config.scenario_dir("Offline") / "user.conf").write_text("old")
    runner = Recorded()
    with pytest.raises(AppConfigError, match="already holds results"):
        run_app(config, runner=runner, evaluate=fake_evaluate, verify=fake_verify)
    assert runner.calls == []


def test_variation_names_map_to_scenarios_modes_and_a_system_folder():
    assert scenarios_for("all-scenarios", V60, "llama2-70b-99") == ("Offline", "Server", "Interactive")
    assert scenarios_for("server", V60, "llama2-70b-99") == ("Server",)
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
    with pytest.raises(AppConfigError, match="--input: top_p 0.0 is outside") as caught:
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


def test_every_app_recipe_takes_the_sampling_inputs_with_the_references_as_default():
    import yaml

    for recipe in sorted(REPO.glob("recipes/app-mlperf-inference-*/recipe.yaml")):
        inputs = yaml.safe_load(recipe.read_text())["inputs"]
        assert {k: inputs[k]["default"] for k in NOTHING_GIVEN} == NOTHING_GIVEN, recipe
        assert (inputs["temperature"]["type"], inputs["top_k"]["type"]) == ("float", "int"), recipe


def test_an_empty_table_still_has_its_header():
    assert format_table([]).split() == ["scenario", "mode", "result", "tokens/s", "TTFT", "p99", "ms", "TPOT", "p99",
                                        "ms", "accuracy", "tok/sample"]


# --- e2e: the recipe through the CLI, real vLLM (CPU) and LoadGen ----------------------------------


@needs_vllm
@pytest.mark.e2e
def test_the_app_runs_offline_tiny_short_through_the_cli_and_packages_it(home: Home, tmp_path: Path):
    (home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                             encoding="utf-8")
    results, submission = tmp_path / "results", tmp_path / "submission"
    proc = home.cmx("run", "app mlperf inference llama2 _cpu _tiny _short _submission", "--input", "rows=256",
                    "--input", "modes=performance,accuracy", "--input", f"results_dir={results}",
                    "--input", "system_name=cpu-box", "--input", "submitter=cmx-test",
                    "--input", f"system_file={REPO / 'docs/examples/system-demo.yaml'}",
                    "--input", f"submission_dir={submission}", "--progress", "plain", timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # each test's live progress, on the app step's line
    live = [line for line in proc.stderr.splitlines() if "Offline performance" in line or "Offline accuracy" in line]
    assert any("Offline performance" in line and "tok/s" in line and " samples" in line for line in live), live
    assert any("Offline accuracy 100% (256/256): 256/256 samples" in line and "elapsed" in line for line in live), live
    scenario = results / "cpu-box" / "llama2-70b-99" / "Offline"
    perf, acc = scenario / "performance" / "run_1", scenario / "accuracy"
    for folder in (perf, acc):
        run = read_loadgen_run(folder)
        assert run.errors == (), [e.value for e in run.errors]
        assert (folder / "result.json").is_file() and not (folder / "audit.config").exists()
    assert not (scenario / "TEST06").exists()
    assert read_loadgen_run(perf).results.validity == "VALID"
    records = read_accuracy_log(acc / "mlperf_log_accuracy.json")
    assert sorted({r.qsl_idx for r in records}) == list(range(256))
    assert all(2 <= r.n_tokens <= 16 for r in records)
    values = read_accuracy_txt(acc / "accuracy.txt")
    assert all(isinstance(values[k], float) for k in ("rouge1", "rouge2", "rougeL", "tokens_per_sample"))
    facts = json.loads((scenario / "cmx_run.json").read_text())
    assert facts["short"] is True and facts["compliant"] is False and facts["ok"] is True
    assert facts["validity"]["performance"] == "VALID"
    assert "  summary = " in proc.stdout and "\n  table:\n    scenario" in proc.stdout  # the table as a block
    assert "VALID" in (results / "summary.txt").read_text()
    # _submission: an open tree, structurally complete; cmx check finds only what _short breaks by design
    tree = submission / "open" / "cmx-test"
    packaged = tree / "results" / "cpu-box" / "llama2-70b-99" / "Offline"
    for rel in ("performance/run_1/mlperf_log_detail.txt", "accuracy/accuracy.txt", "accuracy/mlperf_log_accuracy.json",
                "measurements.json", "user.conf", "README.md"):
        assert (packaged / rel).stat().st_size > 0, rel
    assert (tree / "systems" / "cpu-box.json").is_file() and (tree / "src" / "cmx" / "api.py").is_file()
    assert "app mlperf inference llama2 _cpu _tiny _short _submission" in (packaged / "README.md").read_text()
    report = check_tree(submission, "v6.0")
    assert report.rules_broken() == {"loadgen.min-duration", "loadgen.sample-count", "accuracy.coverage"}, \
        format_report(report)
    assert json.loads((tree / "systems" / "cpu-box.json").read_text())["accelerators_per_node"] == "0"


@needs_vllm
@pytest.mark.e2e
def test_submission_into_closed_from_a_tiny_run_is_refused_before_the_benchmark_runs(home: Home, tmp_path: Path):
    (home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                             encoding="utf-8")
    proc = home.cmx("run", "app mlperf inference llama2 _cpu _tiny _short _submission", "--input", "division=closed",
                    "--input", "submitter=cmx-test", "--input", f"results_dir={tmp_path / 'results'}",
                    "--progress", "none", timeout=300)
    assert proc.returncode == 1
    out = proc.stdout + proc.stderr
    assert "_submission into the closed division would be refused after the run: a _short run" in out
    assert "a _tiny run" in out and "use --input division=open" in out
    assert not (tmp_path / "results").exists()  # nothing ran


def test_engine_options_reach_the_harness_command_line(tmp_path: Path):
    from cmx.mlperf.app import harness_config
    from cmx.mlperf.loadgen.harness import parse_args
    from cmx.mlperf.loadgen.harness_config import EngineSettings

    engine = EngineSettings(precision="fp8", tensor_parallel_size=8, max_num_seqs=512, max_num_batched_tokens=8192,
                            gpu_memory_utilization=0.95, max_model_len=4096)
    config = app_config(tmp_path, device="rocm", engine=engine)
    hc = harness_config(config, "Server", "performance", tmp_path / "user.conf")
    assert hc.output == config.scenario_dir("Server") / "performance" / "run_1"
    assert parse_args(hc.argv(tmp_path / "harness_config.json")) == hc
    assert hc.engine == engine and hc.endpoint is None and hc.backend == "vllm"


def test_test06_checks_the_models_own_eos_id(tmp_path: Path):
    seen: list[int | None] = []

    def verify(output: Path, scenario: str, eos_token_id: int | None) -> Path:
        seen.append(eos_token_id)
        return fake_verify(output, scenario, eos_token_id)

    run_app(app_config(tmp_path, eos_token_id=128009), runner=Recorded(), evaluate=fake_evaluate, verify=verify)
    assert seen == [128009]
