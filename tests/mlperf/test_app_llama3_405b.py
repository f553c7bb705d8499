"""app-mlperf-inference-llama3-405b through the CLI: the plan of a real run (no network), and the tiny llama3.1-405b
on vLLM's CPU build with LoadGen, Offline and Server, performance and accuracy, packaged for open and checked."""

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


@pytest.mark.parametrize("query", ["app mlperf inference llama3.1-405b _rocm", "app mlperf inference llama3.1-405b _cuda"])
def test_the_plan_of_a_real_run_names_the_real_model_and_dataset_fetches(home: Home, query: str):
    proc = builtin(home).cmx("plan", query)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "app-mlperf-inference-llama3-405b " in out and "_full" in out
    assert "get-ml-model-llama3-405b _full" in out and "fetches https://huggingface.co" in out
    assert "get-dataset-llama3-405b _full" in out
    assert "inference.mlcommons-storage.org/metadata/llama3-1-405b-dataset-8313.uri" in out
    assert "cnndm" not in out and "get-ml-model-llama3 " not in out


def test_the_llama3_query_still_means_llama3_1_8b(home: Home):
    proc = builtin(home).cmx("plan", "app mlperf inference llama3 _cpu _tiny")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "app-mlperf-inference-llama3 " in proc.stdout and "405b" not in proc.stdout


@needs_vllm
@pytest.mark.e2e
def test_the_tiny_llama3_405b_runs_offline_and_server_and_packages_for_open(home: Home, tmp_path: Path):
    results, submission = tmp_path / "results", tmp_path / "submission"
    proc = builtin(home).cmx("run", "app mlperf inference llama3.1-405b _cpu _tiny _short _submission",
                             "--input", "scenarios=Offline,Server", "--input", "modes=performance,accuracy",
                             "--input", "rows=24", "--input", f"results_dir={results}",
                             "--input", "system_name=cpu-box", "--input", "submitter=cmx-test",
                             "--input", f"system_file={REPO / 'docs/examples/system-demo.yaml'}",
                             "--input", f"submission_dir={submission}", "--progress", "none", timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    for scenario in ("Offline", "Server"):
        folder = results / "cpu-box" / "llama3.1-405b" / scenario
        run = read_loadgen_run(folder / "performance" / "run_1")
        assert run.results.validity == "VALID", scenario
        values = read_accuracy_txt(folder / "accuracy" / "accuracy.txt")
        # the checker's ROUGEL, exact_match and TOKENS_PER_SAMPLE patterns all find a value
        assert {"rougeL", "exact_match", "tokens_per_sample", "gen_len", "gen_num", "gen_tok_len"} <= set(values)
        assert values["gen_num"] == 24 and 0 < values["tokens_per_sample"] <= 16
        facts = json.loads((folder / "cmx_run.json").read_text())
        assert facts["benchmark"] == "llama3.1-405b"
    report = check_tree(submission, "v6.0")
    assert report.rules_broken() == {"loadgen.min-duration", "loadgen.sample-count", "accuracy.coverage"}, \
        format_report(report)
