"""app-mlperf-inference-deepseek-r1 through the CLI: the plan of a real run (no network), and the tiny deepseek-r1
(a random DeepseekV3: MLA + MoE) on vLLM's CPU build with LoadGen, Offline and Server, performance and accuracy,
packaged for open and checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cmx.mlperf.loadgen.log import read_loadgen_run
from cmx.mlperf.scoring.accuracy_txt import read_accuracy_txt
from cmx.mlperf.submission.check import check_tree
from cmx.mlperf.submission.check.report import format_report
from tests.conftest import REPO, Home, needs_vllm


def builtin(home: Home) -> Home:
    (home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                             encoding="utf-8")
    return home


@pytest.mark.parametrize("device", ["rocm", "cuda"])
def test_the_plan_of_a_real_run_names_the_real_fetches_and_engine_settings(home: Home, device: str):
    proc = builtin(home).cmx("plan", f"app mlperf inference deepseek-r1 _{device}", "-v")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert f"app-mlperf-inference-deepseek-r1 _{device} _offline _valid _full _vllm _auto" in out
    assert "get-ml-model-deepseek-r1 _full" in out and "fetches https://huggingface.co" in out
    assert "inference.mlcommons-storage.org/metadata/deepseek-r1-datasets-fp8-eval.uri" in out
    # the reference's engine: 8 GPUs, MAX_ISL + MAX_OSL + MAX_TEMPLATE_TOKS of context
    assert "tensor_parallel_size = 8  (variation)" in out and "max_model_len = 23140  (variation)" in out
    assert "revision = '56d4cbbb4d29f4355bab4b9a39ccb717a14ad5ad'" in out


@needs_vllm
@pytest.mark.e2e
def test_the_tiny_deepseek_r1_runs_offline_and_server_and_packages_for_open(home: Home, tmp_path: Path):
    results, submission = tmp_path / "results", tmp_path / "submission"
    builtin(home)
    proc = home.cmx("run", "app mlperf inference deepseek-r1 _cpu _tiny _short",
                    "--input", "scenarios=Offline,Server", "--input", "modes=performance,accuracy",
                    "--input", "rows=20", "--input", f"results_dir={results}", "--input", "system_name=cpu-box",
                    "--progress", "none", timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    for scenario in ("Offline", "Server"):
        folder = results / "cpu-box" / "deepseek-r1" / scenario
        run = read_loadgen_run(folder / "performance" / "run_1")
        assert run.results.validity == "VALID", scenario
        values = read_accuracy_txt(folder / "accuracy" / "accuracy.txt")
        # the checker's exact_match and TOKENS_PER_SAMPLE patterns both find a value
        assert {"exact_match", "tokens_per_sample"} <= set(values)
        assert 0 <= values["exact_match"] <= 100 and 2 <= values["tokens_per_sample"] <= 16
        facts = json.loads((folder / "cmx_run.json").read_text())
        assert facts["benchmark"] == "deepseek-r1" and facts["tiny"] is True
        assert facts["origin"]["model"]["name"] == "tiny-DeepseekV3ForCausalLM-random-seed0"  # what really ran
    packaged = home.cmx("run", "generate mlperf submission", "--input", f"results_dir={results}",
                        "--input", f"out_dir={submission}", "--input", "submitter=me", "--input", "division=open",
                        "--input", f"system_file={REPO / 'docs/examples/system-demo.yaml'}", "--progress", "none")
    assert packaged.returncode == 0, packaged.stdout[-3000:] + packaged.stderr[-3000:]
    report = check_tree(submission, "v6.0")
    assert report.rules_broken() == {"loadgen.min-duration", "loadgen.sample-count", "accuracy.coverage"}, \
        format_report(report)
