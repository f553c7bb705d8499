"""`cmx sweep`: a run per value of one input, here or as Slurm jobs, and the table of their results."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Home
from tests.slurm.conftest import SlurmHome

# a stand-in for the benchmark app: its outputs have the app's `summary` shape; above 30/s it is INVALID
BENCH = """
    name: fake-bench
    summary: reports a benchmark summary for a target rate
    tags: [fake, bench]
    inputs:
      qps: {type: float, default: null}
      scenarios: {type: str, default: Offline}
      results_dir: {type: path, default: null}
    cache: false
    outputs:
      results_dir: {type: path}
      summary: {type: list}
    """
BENCH_PY = """
    import json
    def run(ctx):
        qps, out = ctx.inputs["qps"], ctx.inputs["results_dir"]
        if qps == 13:
            raise RuntimeError("13 is unlucky")
        out.mkdir(parents=True, exist_ok=True)
        summary = [{"scenario": s, "mode": "performance", "validity": "VALID" if qps <= 30 else "INVALID",
                    "tokens_per_second": qps * 10, "ttft_p99_ms": 100 + qps, "tpot_p99_ms": 5.0}
                   for s in ctx.inputs["scenarios"].split(",")]
        (out / "summary.json").write_text(json.dumps(summary))
        return {"results_dir": out, "summary": summary}
    """


def test_a_local_sweep_runs_each_value_into_its_own_folder_and_tabulates(home: Home, tmp_path: Path) -> None:
    home.recipe("fake-bench", BENCH, BENCH_PY)
    out = tmp_path / "sweep"
    proc = home.cmx("sweep", "fake bench", "--input", "qps=10,20,40", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["input"] == "qps" and result["type"] == "float" and result["values"] == [10.0, 20.0, 40.0]
    rows = [(r["value"], r["status"], r["validity"], r["tokens_per_second"], r["ttft_p99_ms"], r["results_dir"])
            for r in result["rows"]]
    assert rows == [(10.0, "ok", "VALID", 100.0, 110.0, str(out / "qps=10")),
                    (20.0, "ok", "VALID", 200.0, 120.0, str(out / "qps=20")),
                    (40.0, "ok", "INVALID", 400.0, 140.0, str(out / "qps=40"))]
    assert json.loads((out / "qps=20" / "summary.json").read_text())[0]["tokens_per_second"] == 200.0
    assert json.loads((out / "sweep.json").read_text())["points"][0]["run_record"].endswith("/run.json")
    text = home.cmx("sweep", "--gather", str(out))
    assert text.returncode == 0, text.stderr
    head, *lines = text.stdout.splitlines()
    assert head.split()[:5] == ["qps", "status", "scenario", "validity", "tokens/s"]
    assert lines[2].split()[:5] == ["40", "ok", "Offline", "INVALID", "400.0"]


def test_a_comma_in_a_fixed_input_needs_over_and_a_failed_point_is_failed(home: Home, tmp_path: Path) -> None:
    home.recipe("fake-bench", BENCH, BENCH_PY)
    both = home.cmx("sweep", "fake bench", "--input", "qps=10,13", "--input", "scenarios=Offline,Server")
    assert both.returncode == 1 and "several inputs have comma-separated values (qps, scenarios)" in both.stderr
    assert "--over qps" in both.stderr
    proc = home.cmx("sweep", "fake bench", "--input", "qps=10,13", "--input", "scenarios=Offline,Server",
                    "--over", "qps", "--out", str(tmp_path / "s"), "--json")
    assert proc.returncode == 1  # a point failed
    rows = json.loads(proc.stdout)["rows"]
    assert [(r["value"], r["scenario"], r["validity"]) for r in rows] == [
        (10.0, "Offline", "VALID"), (10.0, "Server", "VALID"), (13.0, None, "failed")]


def test_a_value_of_the_wrong_type_is_one_error_before_anything_runs(home: Home, tmp_path: Path) -> None:
    home.recipe("fake-bench", BENCH, BENCH_PY)
    proc = home.cmx("sweep", "fake bench", "--input", "qps=10,abc", "--out", str(tmp_path / "s"))
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: ") and proc.stderr.count("error: ") == 1
    assert "sweep value 'abc' does not fit input qps of fake-bench, declared type float" in proc.stderr
    assert not (tmp_path / "s").exists() and not (home.root / "runs").exists()  # nothing ran
    unknown = home.cmx("sweep", "fake bench", "--input", "rate=1,2")
    assert unknown.returncode == 1 and "fake-bench has no input 'rate' to sweep" in unknown.stderr
    nothing = home.cmx("sweep", "fake bench", "--input", "qps=1")
    assert nothing.returncode == 1 and "nothing to sweep" in nothing.stderr


def test_a_slurm_sweep_submits_a_job_per_value_and_gathers_them(shome: SlurmHome, tmp_path: Path) -> None:
    shome.home.recipe("fake-bench", BENCH, BENCH_PY)
    out = tmp_path / "sweep"
    proc = shome.cmx("sweep", "fake bench", "--input", "qps=20,40", "--out", str(out), "--slurm", "--time", "5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "qps=20: Slurm job " in proc.stdout and f"cmx sweep --gather {out}" in proc.stdout
    gathered = shome.cmx("sweep", "--gather", str(out), "--wait", "--json", timeout=180)
    assert gathered.returncode == 0, gathered.stdout + gathered.stderr
    result = json.loads(gathered.stdout)
    assert [(r["value"], r["status"], r["validity"], r["results_dir"]) for r in result["rows"]] == [
        (20.0, "ok", "VALID", str(out / "qps=20")), (40.0, "ok", "INVALID", str(out / "qps=40"))]
    assert all(r["job_id"] for r in result["rows"])
    jobs = json.loads(shome.cmx("jobs", "--json").stdout)
    assert sorted(j["state"] for j in jobs) == ["COMPLETED", "COMPLETED"]
    assert sorted(j["validity"] for j in jobs) == ["INVALID", "VALID"]


def _ended_job(home: Home, job_id: str, state: str, run_json: Path) -> None:
    """A job record whose final state cmx already saw (so no Slurm command is asked), its stdout naming its run."""
    from cmx.slurm.jobs import JobRecord, write_record

    folder = home.root / "runs" / "slurm" / f"job-{job_id}"
    folder.mkdir(parents=True)
    (folder / "stdout.log").write_text(f"ok: fake-bench in 1.00s (1 ran); record: {run_json}\n", encoding="utf-8")
    (folder / "stderr.log").write_text("", encoding="utf-8")
    write_record(home.settings.runs, JobRecord(
        job_id=job_id, query="fake bench", argv=("python", "-m", "cmx"), host_command=(), script="job.sbatch",
        stdout=str(folder / "stdout.log"), stderr=str(folder / "stderr.log"), results_dir=None,
        submitted="2026-01-01T00:00:00+00:00", options={}, final_state={"state": state, "exit_code": "0:0"}))


def test_gathering_reads_each_jobs_run_record_and_a_job_that_did_not_complete_has_no_result(
        home: Home, tmp_path: Path) -> None:
    from cmx import api
    from cmx.sweep import Point, Sweep, write_sweep

    summary = [{"scenario": "Offline", "mode": "performance", "validity": "VALID", "tokens_per_second": 100.0,
                "ttft_p99_ms": 110.0, "tpot_p99_ms": 5.0}]
    run_json = tmp_path / "run" / "run.json"
    run_json.parent.mkdir()
    run_json.write_text(json.dumps({"status": "ok", "plan": {"root": "fake-bench"}, "results": {
        "fake-bench": {"outputs": {"summary": summary, "results_dir": str(tmp_path / "r")}}}}), encoding="utf-8")
    _ended_job(home, "11", "COMPLETED", run_json)
    _ended_job(home, "12", "CANCELLED", run_json)  # what it left behind is no result
    sweep_dir = tmp_path / "sweep"
    points = [Point(10.0, "qps=10", str(sweep_dir / "qps=10"), job_id="11"),
              Point(20.0, "qps=20", str(sweep_dir / "qps=20"), job_id="12")]
    write_sweep(sweep_dir, Sweep("fake bench", "qps", "float", (10.0, 20.0)), points, "slurm")
    result = api.sweep_gather(sweep_dir, settings=home.settings, environ={"PATH": ""})
    assert [(r.status, r.validity, r.tokens_per_second, r.job_id) for r in result.rows or []] == [
        ("ok", "VALID", 100.0, "11"), ("cancelled", "cancelled", None, "12")]
    assert [o.detail for o in result.outcomes] == ["Slurm job 11 COMPLETED", "Slurm job 12 CANCELLED"]
