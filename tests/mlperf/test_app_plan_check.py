"""What the app step would refuse after the downloads is refused when the query is planned: `cmx plan` and `cmx run`
fail at once, with one line, before any step runs (cmx.execute.plan_check, the app's `check`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Home

QUERY = "app mlperf inference llama2 _cpu"


@pytest.mark.parametrize("args, says", [
    pytest.param(["--input", "scenarios=offline,servr", "--input", "target_qps_offline=1"],
                 "unknown scenario 'servr' in scenarios=offline,servr", id="a-mistyped-scenario"),
    pytest.param(["_server", "--input", "scenarios=Offline"], "both _server and --input scenarios=Offline choose",
                 id="a-variation-and-a-list-both-choosing"),
    pytest.param(["_tiny", "--input", "modes=performance,acuracy"], "unknown mode 'acuracy'", id="a-mistyped-test"),
    pytest.param(["_tiny", "_submission"], "_submission needs --input submitter=NAME",
                 id="a-submission-without-its-name"),
])
def test_a_mistake_no_artefact_is_needed_for_fails_at_plan_with_one_line(builtin: Home, args: list[str],
                                                                          says: str) -> None:
    words = [QUERY + "".join(f" {a}" for a in args if a.startswith("_")), *(a for a in args if not a.startswith("_"))]
    proc = builtin.cmx("plan", *words)
    assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: ") and says in proc.stderr.splitlines()[0], proc.stderr
    assert proc.stderr.count("error:") == 1


def test_run_fails_before_any_step_runs_or_downloads(builtin: Home, tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    proc = builtin.cmx("run", QUERY, "--input", f"model_path={model}", "-i", "get-dataset-openorca.url=file:///none",
                       "-i", "get-dataset-openorca.sha256=none", "-i", "scenarios=offline,servr")
    assert proc.returncode == 1 and "unknown scenario 'servr'" in proc.stderr
    runs = builtin.root / "runs"
    assert not runs.exists() or not any(runs.iterdir()), "a step ran, or its run was recorded"


def test_a_run_without_targets_plans_with_find_performance_under_its_app_step(builtin: Home) -> None:
    proc = builtin.cmx("plan", "app mlperf inference llama2 _rocm", "-i", "scenarios=Offline,Server", check=True)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("app-mlperf-inference-llama2 ")
    assert lines[1].strip().startswith("find-performance: Offline (at most 2 Offline probes") and \
        "Server (the tune's search" in lines[1] and lines[1].endswith("; then the runs"), lines[1]


def test_a_given_target_is_not_measured_and_the_plan_says_so_in_json(builtin: Home) -> None:
    import json

    def notes(*args: str) -> list[str]:
        data = json.loads(builtin.cmx("plan", QUERY, "-i", "scenarios=Offline,Server", *args, "--json",
                                      check=True).stdout)
        return next(s for s in data["steps"] if s["id"] == data["root"])["notes"]

    assert notes("-i", "target_qps_offline=5", "-i", "target_qps_server=2") == []
    only_server = notes("-i", "target_qps_offline=5")
    assert len(only_server) == 1 and "Offline (" not in only_server[0] and "Server (" in only_server[0]


def test_a_tiny_run_measures_only_its_server_target(builtin: Home) -> None:
    proc = builtin.cmx("plan", f"{QUERY} _tiny _short", "-i", "scenarios=Offline,Server,Interactive", check=True)
    line = proc.stdout.splitlines()[1].strip()
    assert line.startswith("find-performance: Server (the tune's search, probes as long as the _short run"), line
    assert "Offline (" not in line and "Interactive (" not in line


def test_the_checks_names_are_the_rounds_and_the_harness_s() -> None:
    from cmx.mlperf import app_plan
    from cmx.mlperf.loadgen.harness_config import MODES
    from cmx.mlperf.rounds import SCENARIOS

    assert app_plan.SCENARIOS == SCENARIOS
    assert set(app_plan.TESTS) == {*MODES, "compliance"}


def test_plan_stays_within_its_budget_by_importing_no_benchmark_module(builtin: Home) -> None:
    """docs/architecture.md § Budgets: `cmx plan` of an app under 0.3 s; the check must not import the app step's
    work."""
    import subprocess
    import sys

    builtin.cmx("plan", f"{QUERY} _tiny", check=True)  # the index is built
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "cmx", "plan", f"{QUERY} _tiny"], env=builtin.env,
                          capture_output=True, text=True, check=True)
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "cmx.mlperf.app_plan" in imported
    assert not {"cmx.mlperf.app_step", "cmx.mlperf.app", "cmx.mlperf.rounds", "numpy"} & imported


def test_the_plan_of_your_own_model_folder_fetches_nothing_from_the_hub(builtin: Home, tmp_path: Path) -> None:
    proc = builtin.cmx("plan", QUERY, "-i", f"model_path={tmp_path}", "-i", "target_qps_offline=1", check=True)
    assert "huggingface.co" not in proc.stdout and "fetches https://inference.mlcommons-storage.org" in proc.stdout
    assert "huggingface.co" in builtin.cmx("plan", QUERY, "-i", "target_qps_offline=1", check=True).stdout
