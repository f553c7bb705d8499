"""`cmx run --slurm` and `cmx jobs` on a real single-node Slurm cluster (tests/slurm/conftest.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import CMX, Home
from tests.slurm.conftest import SlurmHome

HELLO = """
    name: hello
    summary: says hello, and whether the job saw its secret
    tags: [hello]
    inputs:
      word: {type: str, default: world}
      token: {type: secret, env: CMX_TEST_TOKEN, default: null}
    cache: false
    outputs:
      greeting: {type: str}
      has_token: {type: bool}
    """
HELLO_PY = """
    import os
    def run(ctx):
        job = os.environ.get("SLURM_JOB_ID", "none")
        return {"greeting": f"hello {ctx.inputs['word']} from job {job}", "has_token": ctx.inputs["token"] is not None}
    """
SLEEPER = """
    name: sleeper
    summary: writes a results folder that looks finished, then sleeps
    tags: [sleeper]
    inputs:
      results_dir: {type: path, default: null}
    cache: false
    outputs:
      results_dir: {type: path}
    """
SLEEPER_PY = """
    import json, time
    def run(ctx):
        out = ctx.inputs["results_dir"]
        out.mkdir(parents=True, exist_ok=True)
        (out / "result.json").write_text(json.dumps({"validity": "VALID"}))
        (out / "started").write_text("yes")
        time.sleep(300)
        return {"results_dir": out}
    """


def wait_for(shome: SlurmHome, job_id: str, states: set[str], timeout: float = 120) -> dict:
    """`cmx jobs JOBID --json` until the job is in one of `states`."""
    deadline = time.monotonic() + timeout
    while True:
        proc = shome.cmx("jobs", job_id, "--json")
        assert proc.returncode == 0, proc.stderr
        job = json.loads(proc.stdout)[0]
        if job["state"] in states:
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} still {job['state']} after {timeout} s:\n{job}\n"
                                 f"{shome.cluster.logs()}")
        time.sleep(0.5)


def submitted_id(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("submitted Slurm job "), proc.stdout
    return first.split()[3].rstrip(":")


def test_a_submitted_run_completes_and_cmx_jobs_finds_its_run_record(shome: SlurmHome) -> None:
    shome.home.recipe("hello", HELLO, HELLO_PY)
    proc = shome.cmx("run", "hello", "--input", "word=slurm's test", "--slurm", "--time", "5", "--job-name=hi",
                     env={"CMX_TEST_TOKEN": "tok-Zq81-secret"})
    job_id = submitted_id(proc)
    record = json.loads((shome.home.root / "runs" / "slurm" / f"{job_id}.json").read_text())
    script = Path(record["script"]).read_text()
    # the same command line, without --slurm and its options, with this interpreter; settings exported
    assert record["argv"] == [sys.executable, "-m", "cmx", "run", "hello", "--input", "word=slurm's test"]
    assert f"exec {sys.executable} -m cmx run hello --input 'word=slurm'\"'\"'s test'" in script
    assert "#SBATCH --time=5" in script and "#SBATCH --job-name=hi" in script
    assert "--slurm" not in script.split("\nexec ")[1] and "--time" not in script.split("\nexec ")[1]
    assert f"export CMX_CACHE={shome.home.root / 'cache'}" in script
    assert f"export CMX_RUNS={shome.home.root / 'runs'}" in script
    assert "token of hello: $CMX_TEST_TOKEN" in script and "tok-Zq81-secret" not in script

    job = wait_for(shome, job_id, {"COMPLETED", "FAILED", "CANCELLED"})
    assert job["state"] == "COMPLETED", Path(job["stderr"]).read_text()
    assert job["state_source"] in ("scontrol", "sacct", "squeue")
    run = json.loads(Path(job["run_record"]).read_text())
    assert run["status"] == "ok" and job["run_status"] == "ok"
    assert run["results"]["hello"]["outputs"] == {"greeting": f"hello slurm's test from job {job_id}",
                                                   "has_token": True}  # the secret came through the environment
    assert job["validity"] is None  # not a benchmark: no summary to judge
    # the final state is kept: slurmctld forgets a finished job, and there is no accounting here
    again = json.loads(shome.cmx("jobs", "--json").stdout)
    assert [(j["job_id"], j["state"], j["state_source"]) for j in again] == [(job_id, "COMPLETED", "record")]
    listing = shome.cmx("jobs")
    assert f"{job_id}  COMPLETED  hello" in listing.stdout and "record: " in listing.stdout

    # the script stops at once, saying why, on a node where the cache is not there
    cache = shome.home.root / "cache"
    cache.rename(cache.with_name("cache-away"))
    try:
        alone = subprocess.run(["bash", record["script"]], capture_output=True, text=True, timeout=60)
    finally:
        cache.with_name("cache-away").rename(cache)
    assert alone.returncode == 2
    assert f"cmx: error: {cache} is not visible on node" in alone.stderr and "shares" in alone.stderr


def test_a_secret_on_the_command_line_is_refused_before_anything_is_submitted(shome: SlurmHome) -> None:
    shome.home.recipe("hello", HELLO, HELLO_PY)
    proc = shome.cmx("run", "hello", "--input", "token=tok-on-the-line", "--slurm")
    assert proc.returncode == 1
    assert "secret input token of hello is given on the command line" in proc.stderr
    assert "export CMX_TEST_TOKEN" in proc.stderr and "tok-on-the-line" not in proc.stderr
    assert not (shome.home.root / "runs" / "slurm").exists()


def test_a_url_password_reaches_the_job_by_its_environment_never_the_script_or_the_record(shome: SlurmHome) -> None:
    from tests.execute.test_input_env import ECHO, ECHO_PY, URL

    shome.home.recipe("echo-url", ECHO, ECHO_PY)
    proc = shome.cmx("run", "echo url", "--input", f"url={URL}", "-i", "word=yo", "--slurm")
    job_id = submitted_id(proc)
    assert "pw-Q7x" not in proc.stdout + proc.stderr
    record_file = shome.home.root / "runs" / "slurm" / f"{job_id}.json"
    record = json.loads(record_file.read_text())
    script = Path(record["script"]).read_text()
    assert record["argv"][3:] == ["run", "echo url", "--input-env", "url=CMX_INPUT_URL", "-i", "word=yo"]
    assert "url: $CMX_INPUT_URL" in script
    assert "pw-Q7x" not in script and "pw-Q7x" not in record_file.read_text()
    job = wait_for(shome, job_id, {"COMPLETED", "FAILED", "CANCELLED"})
    assert job["state"] == "COMPLETED", Path(job["stderr"]).read_text()
    run = json.loads(Path(job["run_record"]).read_text())
    assert run["results"]["echo-url"]["outputs"] == {"whole": True, "word": "yo"}  # the job had the URL whole


def test_a_cancelled_job_is_reported_cancelled_and_its_results_never_valid(shome: SlurmHome, tmp_path: Path) -> None:
    shome.home.recipe("sleeper", SLEEPER, SLEEPER_PY)
    results = tmp_path / "results"
    submitted = shome.cmx("run", "sleeper", "--input", f"results_dir={results}", "--slurm", "--json")
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["job_id"]
    assert json.loads(submitted.stdout)["results_dir"] == str(results)
    running = wait_for(shome, job_id, {"RUNNING", "COMPLETED", "FAILED"})
    assert running["state"] == "RUNNING" and running["validity"] is None
    deadline = time.monotonic() + 60
    while not (results / "started").exists():  # the run wrote a result that says VALID
        assert time.monotonic() < deadline, Path(running["stderr"]).read_text()
        time.sleep(0.2)
    shome.cluster.run("scancel", job_id)
    job = wait_for(shome, job_id, {"CANCELLED", "COMPLETED", "FAILED"})
    assert job["state"] == "CANCELLED"
    assert job["validity"] == "cancelled" and job["results_dir"] == str(results)
    assert job["marker"] == str(results / "CANCELLED")
    assert "nothing in this folder is a valid result" in (results / "CANCELLED").read_text()
    listing = shome.cmx("jobs")
    assert f"{job_id}  CANCELLED, cancelled  sleeper" in listing.stdout
    assert "VALID" not in listing.stdout.replace("CANCELLED", "")


def test_slurm_without_sbatch_on_path_is_one_clear_error_and_no_job_record(home: Home, tmp_path: Path) -> None:
    home.recipe("hello", HELLO, HELLO_PY)
    empty = tmp_path / "bin"
    empty.mkdir()
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and not (Path(p) / "sbatch").exists()) or str(empty)
    assert shutil.which("sbatch", path=path) is None
    proc = subprocess.run([*CMX, "run", "hello", "--slurm", "--partition", "gpu"], env={**home.env, "PATH": path},
                          cwd=home.root, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: sbatch was not found on PATH"), proc.stderr
    assert "hint: run it on the cluster's login node" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.count("sbatch was not found") == 1
    assert not (home.root / "runs" / "slurm").exists()
    misplaced = home.cmx("run", "hello", "--partition", "gpu")
    assert misplaced.returncode == 2 and "go with --slurm" in misplaced.stderr


def test_every_final_state_but_completed_is_a_marker_the_packager_refuses():
    from cmx.mlperf.submission.sources import NOT_A_RESULT_MARKERS
    from cmx.slurm.submit import FINAL_STATES

    assert FINAL_STATES - {"COMPLETED"} == set(NOT_A_RESULT_MARKERS)
