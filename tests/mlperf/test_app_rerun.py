"""The printed re-run line works: a failed attempt's scenario folder is set aside (kept, as
<Scenario>.failed-<UTC time>) when the scenario runs again, while a successful run's folder, or one holding files cmx
did not write, is still refused; the packager and the report never read a set-aside folder.

The app runs with tests/mlperf/test_app_run.py's Recorded runner (recorded LoadGen logs, no vLLM); the re-run line
is taken from a real `cmx` process's error and run as printed.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
from pathlib import Path

import pytest

from cmx.mlperf.app import AppRunFailed, earlier_attempt, is_set_aside, run_app, set_aside
from cmx.mlperf.app_plan import AppConfigError
from cmx.mlperf.loadgen.sut import SampleError
from cmx.mlperf.report.collect import collect
from cmx.mlperf.submission.sources import find_results
from tests.conftest import Home
from tests.mlperf.test_app_run import Recorded, app_config, fake_evaluate, fake_verify

LOG = logging.getLogger("test-rerun")
LOST = {("Offline", "performance"): [SampleError(1, "the server went away")]}
STAMP = re.compile(r"^Offline\.failed-\d{8}T\d{6}Z(-\d+)?$")


def write_facts(folder: Path, ok: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cmx_run.json").write_text(json.dumps({"ok": ok}))
    return folder


def test_a_failed_or_unfinished_attempt_is_set_aside_and_kept(tmp_path: Path):
    assert earlier_attempt(tmp_path / "Offline") is None
    (tmp_path / "Offline").mkdir()
    assert earlier_attempt(tmp_path / "Offline") is None  # empty: nothing to keep
    failed = write_facts(tmp_path / "Offline", ok=False)
    (failed / "performance/run_1").mkdir(parents=True)
    (failed / "performance/run_1/harness.log").write_text("the first attempt")
    for path in (failed, failed / "cmx_run.json"):  # the attempt's time names it
        os.utime(path, (1_700_000_000, 1_700_000_000))
    assert earlier_attempt(failed) == failed
    moved = set_aside(failed, LOG)
    assert not failed.exists() and moved.parent == tmp_path and moved.name == "Offline.failed-20231114T221320Z"
    assert (moved / "performance/run_1/harness.log").read_text() == "the first attempt" and is_set_aside(moved)
    # an attempt that never finished: user.conf and test folders, no cmx_run.json; set aside beside the first
    unfinished = tmp_path / "Offline"
    (unfinished / "accuracy").mkdir(parents=True)
    (unfinished / "user.conf").write_text("conf")
    assert earlier_attempt(unfinished) == unfinished
    os.utime(unfinished, (1_700_000_000, 1_700_000_000))  # the same second as the first: a suffix tells them apart
    again = set_aside(unfinished, LOG)
    assert again != moved and again.name == f"{moved.name}-2" and (again / "user.conf").read_text() == "conf"


@pytest.mark.parametrize(("files", "says"), [
    ({"cmx_run.json": '{"ok": true}'}, "already holds results of a successful run"),
    ({"cmx_run.json": '{"ok": tr'}, "cmx_run.json cannot be read"),
    ({"cmx_run.json": '{"round": "v6.0"}'}, "does not say whether the run succeeded"),
    ({"user.conf": "conf", "notes.txt": "mine"}, r"files cmx did not write: notes\.txt"),
])
def test_a_good_run_a_broken_record_or_foreign_files_are_refused_and_left_in_place(tmp_path: Path, files: dict,
                                                                                     says: str):
    folder = tmp_path / "Offline"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    with pytest.raises(AppConfigError, match=says) as caught:
        earlier_attempt(folder)
    assert "results_dir" in (caught.value.hint or "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Offline"]


def test_a_rerun_after_a_failed_attempt_runs_and_only_the_new_run_is_a_result(tmp_path: Path):
    config = app_config(tmp_path, modes=("performance",))
    with pytest.raises(AppRunFailed):
        run_app(config, runner=Recorded(failed=LOST), evaluate=fake_evaluate, verify=fake_verify)
    result = run_app(config, runner=Recorded(), evaluate=fake_evaluate, verify=fake_verify)
    assert result.ok
    bench = config.scenario_dir("Offline").parent
    [aside] = [p for p in bench.iterdir() if p.name != "Offline"]
    assert STAMP.match(aside.name) and json.loads((aside / "cmx_run.json").read_text())["ok"] is False
    assert [r.path for r in find_results(config.results_dir)] == [config.scenario_dir("Offline")]
    assert [(r.scenario, r.validity) for r in collect(config.results_dir).tests] == [("Offline", "VALID")]


def test_a_rerun_beside_a_successful_scenario_is_refused_before_anything_moves(tmp_path: Path):
    config = app_config(tmp_path, scenarios=("Offline", "Server"), modes=("performance",))
    with pytest.raises(AppRunFailed):
        run_app(config, runner=Recorded({("Server", "performance"): "server-perf"}, failed=LOST),
                evaluate=fake_evaluate, verify=fake_verify)
    with pytest.raises(AppConfigError, match="Server already holds results of a successful run"):
        run_app(config, runner=Recorded(), evaluate=fake_evaluate, verify=fake_verify)
    assert sorted(p.name for p in config.scenario_dir("Offline").parent.iterdir()) == ["Offline", "Server"]


APP_RUN_PY = """
from pathlib import Path

from cmx.mlperf.app import run_app
from cmx.mlperf.loadgen.sut import SampleError
from tests.mlperf.test_app_run import Recorded, app_config, fake_evaluate, fake_verify


def run(ctx):
    results = Path(ctx.inputs["results_dir"])
    tries = results.parent / "tries"
    first = not tries.exists()
    tries.write_text("tried")
    failed = {("Offline", "performance"): [SampleError(1, "the server went away")]} if first else {}
    config = app_config(results.parent, results_dir=results, modes=("performance",))
    run_app(config, runner=Recorded(failed=failed), evaluate=fake_evaluate, verify=fake_verify, logger=ctx.log)
    return {}
"""


def test_the_printed_rerun_line_runs_as_printed_past_the_earlier_attempt(home: Home, tmp_path: Path):
    home.recipe("fake-app", """
        name: fake-app
        summary: the app's run on recorded LoadGen logs; its first attempt loses a sample
        tags: [app, fake]
        inputs:
          results_dir: {type: path, default: null}
        """, APP_RUN_PY)
    results = tmp_path / "my results"
    first = home.cmx("run", "fake-app", "--input", f"results_dir={results}")
    assert first.returncode != 0
    assert "Offline performance FAILED: the server went away" in first.stderr
    line = re.search(r"^\s+re-run just this step: (.+)$", first.stderr, re.M)
    assert line, first.stderr
    argv = shlex.split(line.group(1))
    assert argv[:2] == ["cmx", "run"]
    again = home.cmx(*argv[1:])
    assert again.returncode == 0, again.stderr
    bench = results / "my-box" / "llama2-70b-99"
    assert sorted(STAMP.match(p.name) is not None for p in bench.iterdir()) == [False, True]
    assert json.loads((bench / "Offline" / "cmx_run.json").read_text())["ok"] is True
