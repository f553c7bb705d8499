"""The tiny MLPerf benchmark (vLLM on the CPU + LoadGen) submitted with --slurm runs as a job and leaves its results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, needs_vllm
from tests.slurm.conftest import SlurmHome
from tests.slurm.test_jobs import submitted_id, wait_for

TINY = "app mlperf inference llama2 _cpu _tiny _short"
pytestmark = [pytest.mark.e2e, needs_vllm, pytest.mark.timeout(1500)]


def test_the_tiny_benchmark_runs_as_a_slurm_job_and_its_results_are_in_place(shome: SlurmHome, tmp_path: Path):
    (shome.home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n")
    results = tmp_path / "results"
    proc = shome.cmx("run", TINY, "--input", "scenarios=Offline", "--input", "modes=performance",
                     "--input", "system_name=box", "--input", f"results_dir={results}", "--slurm", "--time", "20")
    job_id = submitted_id(proc)
    assert f"results: {results}" in proc.stdout
    job = wait_for(shome, job_id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, timeout=1200)
    assert job["state"] == "COMPLETED", (Path(job["stdout"]).read_text()[-4000:]
                                         + Path(job["stderr"]).read_text()[-4000:])
    assert job["run_status"] == "ok" and job["results_dir"] == str(results)
    run = json.loads(Path(job["run_record"]).read_text())
    summary = run["results"][run["plan"]["root"]]["outputs"]["summary"]
    assert [(e["scenario"], e["mode"]) for e in summary] == [("Offline", "performance")]
    assert job["validity"] == summary[0]["validity"] == "VALID"
    run_1 = results / "box" / "llama2-70b-99.9" / "Offline" / "performance" / "run_1"  # the default round's
    for path in (results / "summary.txt", run_1 / "result.json", run_1 / "mlperf_log_detail.txt"):
        assert path.is_file(), path
    assert json.loads((run_1 / "result.json").read_text())["validity"] == "VALID"
    assert not (results / "CANCELLED").exists()
