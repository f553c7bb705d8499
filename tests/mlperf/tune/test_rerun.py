"""The 're-run just this step' line of a step that fails inside `cmx tune`: the tune's command for the tune step."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cmx import api
from cmx.errors import StepFailed
from cmx.mlperf.tune.target import TuneRequest
from tests.conftest import Home


def _tunable_app(home: Home) -> None:
    """An app the tune accepts (llama2-70b's family tag, a round, a device), whose engine never starts: the app
    step has no model dep, so the tune step fails at once; its dep fails when asked to."""
    home.recipe("fake-app", """
        name: fake-app
        summary: an MLPerf app in name only
        tags: [app, llama2-70b]
        inputs:
          round: {type: str, default: v6.0}
          target_qps_server: {type: float, default: null}
        variations:
          device:
            cpu: {context: {device: cpu}}
            cuda: {context: {device: cuda}, default: true}
        deps:
          - tags: child
            as: child
        """, "def run(ctx):\n    return {}\n")
    home.recipe("child", """
        name: child
        tags: [child]
        inputs:
          fail: {type: bool, default: false}
        """, "def run(ctx):\n    if ctx.inputs['fail']:\n        raise ValueError('boom')\n    return {}\n")


def test_a_failing_tune_step_names_the_tune_command_and_a_failing_dep_names_cmx_run(home: Home, tmp_path: Path):
    _tunable_app(home)
    out = tmp_path / "my tuned.yaml"
    result = api.tune("fake-app _cpu", scenario="Server", inputs={"target_qps_server": "3"}, out=out,
                      max_probes=4, confirm=False, settings=home.settings, invocation="cmx --registry r.yaml")
    assert isinstance(result.error, StepFailed) and result.error.chain == ["fake-app"]
    assert result.error.rerun == (f"cmx --registry r.yaml tune 'fake-app _cpu' --input target_qps_server=3.0 "
                                  f"--context device=cpu --scenario Server --out '{out}' --max-probes 4 --no-confirm")
    home.recipe("fake-app", (home.recipes / "fake-app" / "recipe.yaml").read_text().replace(
        "as: child", "as: child\n    with: {fail: true}"), "def run(ctx):\n    return {}\n")
    dep = api.tune("fake-app _cpu", scenario="Server", start_qps=2, settings=home.settings)
    assert isinstance(dep.error, StepFailed) and dep.error.chain[-1] == "child"
    assert dep.error.rerun == "cmx run child --input fail=True --context device=cpu"


def test_the_cli_prints_the_tune_command_as_the_rerun_line(home: Home, tmp_path: Path):
    _tunable_app(home)
    out = tmp_path / "a b.yaml"
    proc = home.cmx("tune", "fake-app", "_cpu", "--scenario", "server", "--start", "2.5", "--tolerance", "0.1",
                    "--out", str(out))
    assert proc.returncode != 0
    rerun = re.search(r"^\s+re-run just this step: (.+)$", proc.stderr, re.M)
    assert rerun, proc.stderr
    assert rerun.group(1) == ("cmx tune 'fake-app _cpu' --context device=cpu --scenario Server --start 2.5 "
                              f"--out '{out}' --tolerance 0.1")


@pytest.mark.parametrize(("request_", "options"), [
    (TuneRequest("Offline"), ("--scenario", "Offline")),
    (TuneRequest("Interactive", start_qps=20.0, out=Path("/t/a b.yaml"), tolerance=0.04, max_probes=3,
                 confirm=False, probe_seconds=12.5),
     ("--scenario", "Interactive", "--start", "20", "--out", "/t/a b.yaml", "--max-probes", "3",
      "--probe-seconds", "12.5", "--no-confirm")),
])
def test_a_tune_requests_options_are_those_that_ask_for_it_again(request_: TuneRequest, options: tuple[str, ...]):
    assert request_.options() == options
