"""app-mlperf-inference-mixtral-8x7b through the CLI: the plan of a real run (no network), and the tiny Mixtral on
vLLM's CPU build with LoadGen, Offline and Server, performance and accuracy, packaged for open and checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cmx.mlperf.loadgen.log import read_loadgen_run
from cmx.mlperf.scoring.accuracy_txt import read_accuracy_txt
from cmx.mlperf.submission.check import check_tree
from cmx.mlperf.submission.check.report import format_report
from tests.conftest import REPO, Home, needs_vllm

BY_DESIGN = {"loadgen.min-duration", "loadgen.sample-count", "accuracy.coverage"}  # the Makefile's DEMO_EXPECTED


def builtin(home: Home) -> Home:
    (home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                             encoding="utf-8")
    return home


@pytest.mark.parametrize("device", ["rocm", "cuda"])
def test_the_plan_of_a_real_run_names_the_real_model_and_dataset_fetches(home: Home, device: str):
    proc = builtin(home).cmx("plan", f"app mlperf inference mixtral-8x7b _{device}", "-v")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert f"app-mlperf-inference-mixtral-8x7b _{device}" in out and f"get-vllm _{device}" in out
    assert "get-ml-model-mixtral-8x7b _full" in out and "fetches https://huggingface.co" in out
    assert "repo = 'mistralai/Mixtral-8x7B-Instruct-v0.1'" in out
    assert "revision = 'a60832cb6c88d5cb6e507680d0e9996fbad77050'" in out
    assert "inference.mlcommons-storage.org/metadata/mixtral-8x7b-validation-dataset.uri" in out
    assert "tensor_parallel_size = 1" in out and "max_num_seqs = None" in out  # the engine args and their origin


def test_the_mixtral_tag_alone_finds_the_app(home: Home):
    proc = builtin(home).cmx("plan", "app mlperf inference mixtral _cpu _tiny")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "get-ml-model-mixtral-8x7b _tiny" in proc.stdout and "get-dataset-mixtral-8x7b _tiny" in proc.stdout


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Home, Path, Path, str]:
    """One tiny run for the module: run, package with `generate mlperf submission`, check with `cmx check`."""
    root = tmp_path_factory.mktemp("mixtral-e2e")
    (root / "home" / "recipes").mkdir(parents=True)
    home = builtin(Home(root / "home"))
    results, submission = root / "results", root / "submission"
    proc = home.cmx("run", "app mlperf inference mixtral-8x7b _cpu _tiny _short",
                    "--input", "scenarios=Offline,Server", "--input", "modes=performance,accuracy",
                    "--input", "rows=24", "--input", f"results_dir={results}", "--input", "system_name=cpu-box",
                    "--progress", "none", timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    packaged = home.cmx("run", "generate mlperf submission", "--input", f"results_dir={results}",
                        "--input", f"out_dir={submission}", "--input", "submitter=me", "--input", "division=open",
                        "--input", f"system_file={REPO / 'docs/examples/system-demo.yaml'}", "--progress", "none")
    assert packaged.returncode == 0, packaged.stdout[-4000:] + packaged.stderr[-3000:]
    checked = home.cmx("check", str(submission), "--expect", ",".join(sorted(BY_DESIGN)))
    return home, results, submission, checked.stdout + checked.stderr + f"\nrc={checked.returncode}"


@needs_vllm
@pytest.mark.e2e
def test_the_tiny_mixtral_runs_offline_and_server_valid_with_accuracy(tiny_run: tuple[Home, Path, Path, str]):
    _, results, _, _ = tiny_run
    for scenario in ("Offline", "Server"):
        folder = results / "cpu-box" / "mixtral-8x7b" / scenario
        run = read_loadgen_run(folder / "performance" / "run_1")
        assert run.results.validity == "VALID", scenario
        values = read_accuracy_txt(folder / "accuracy" / "accuracy.txt")
        # the checker's ROUGE1/2/L, gsm8k_accuracy, mbxp_accuracy and TOKENS_PER_SAMPLE patterns all find a value
        assert {"rouge1", "rouge2", "rougeL", "gsm8k", "mbxp", "tokens_per_sample"} <= set(values)
        assert values["gen_num"] == 24 and 0 < values["tokens_per_sample"] <= 16
        facts = json.loads((folder / "cmx_run.json").read_text())
        assert facts["benchmark"] == "mixtral-8x7b"
        assert facts["origin"]["model"]["architecture"] == "MixtralForCausalLM"  # what vLLM ran, recorded


@needs_vllm
@pytest.mark.e2e
def test_the_open_package_breaks_only_the_rules_a_short_tiny_run_breaks_by_design(
        tiny_run: tuple[Home, Path, Path, str]):
    _, _, submission, checked = tiny_run
    assert checked.endswith("rc=0"), checked[-4000:]
    report = check_tree(submission, "v6.0")
    assert report.rules_broken() == BY_DESIGN, format_report(report)
    tree = submission / "open" / "me" / "results"
    assert sorted(p.name for p in tree.glob("*/mixtral-8x7b/*")) == ["Offline", "Server"]
