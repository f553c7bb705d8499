"""app-mlperf-inference-gpt-oss-120b through the CLI: the plan of a real run (no network), and the tiny GptOss on
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


def builtin(home: Home) -> Home:
    (home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                             encoding="utf-8")
    return home


@pytest.mark.parametrize("query", ["app mlperf inference gpt-oss-120b _rocm", "app mlperf inference gpt-oss _cuda"])
def test_the_plan_of_a_real_run_names_the_real_model_and_dataset_fetches(home: Home, query: str):
    proc = builtin(home).cmx("plan", query)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "app-mlperf-inference-gpt-oss-120b " in out and "_full" in out
    assert "get-ml-model-gpt-oss-120b _full" in out and "fetches https://huggingface.co" in out
    assert "get-dataset-gpt-oss-120b _full" in out
    assert "inference.mlcommons-storage.org/metadata/gpt-oss-data.uri" in out


@needs_vllm
@pytest.mark.e2e
def test_the_tiny_gpt_oss_runs_offline_and_server_and_packages_for_open(home: Home, tmp_path: Path):
    results, submission = tmp_path / "results", tmp_path / "submission"
    proc = builtin(home).cmx("run", "app mlperf inference gpt-oss-120b _cpu _tiny _short _submission",
                             "--input", "scenarios=Offline,Server", "--input", "modes=performance,accuracy",
                             "--input", "rows=24", "--input", f"results_dir={results}",
                             "--input", "system_name=cpu-box", "--input", "submitter=cmx-test",
                             "--input", f"system_file={REPO / 'docs/examples/system-demo.yaml'}",
                             "--input", f"submission_dir={submission}", "--progress", "none", timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    for scenario in ("Offline", "Server"):
        folder = results / "cpu-box" / "gpt-oss-120b" / scenario
        run = read_loadgen_run(folder / "performance" / "run_1")
        assert run.results.validity == "VALID", scenario
        values = read_accuracy_txt(folder / "accuracy" / "accuracy.txt")
        # the checker's exact_match and TOKENS_PER_SAMPLE patterns both find a value
        assert set(values) - {"hash"} == {"exact_match", "tokens_per_sample"}
        assert 0 <= values["exact_match"] <= 100 and 2 <= values["tokens_per_sample"] <= 16
        accuracy_log = json.loads((folder / "accuracy" / "mlperf_log_accuracy.json").read_text())
        assert sorted(r["qsl_idx"] for r in accuracy_log) == list(range(24))  # the 24 rows of the accuracy set
        facts = json.loads((folder / "cmx_run.json").read_text())
        assert facts["benchmark"] == "gpt-oss-120b"
        # sampled as the reference samples (generation_config.json), through real vLLM SamplingParams
        assert facts["sampling"] == {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "seed": None}
        assert facts["sampling_overrides"] == [] and facts["runs"][0]["details"]["sampling"] == facts["sampling"]
        model = facts["origin"]["model"]
        assert (model["name"], model["architecture"]) == ("tiny-gpt-oss-random-seed0", "GptOssForCausalLM")
    readmes = [p.read_text() for p in submission.rglob("cpu-box/gpt-oss-120b/*/README.md")]
    assert len(readmes) == 2 and all("top_k off, no seed, as the reference samples" in r for r in readmes)
    report = check_tree(submission, "v6.0")
    assert report.rules_broken() == {"loadgen.min-duration", "loadgen.sample-count", "accuracy.coverage"}, \
        format_report(report)
