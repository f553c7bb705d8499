"""`cmx pareto` refuses, before any step runs, what cannot draw an Endpoints curve, and says why."""

from __future__ import annotations

import pytest

from tests.conftest import Home


@pytest.mark.parametrize(("query", "said", "hint"), [
    ("app mlperf inference llama2 _cpu _tiny _endpoint", "llama2-70b-99 is not an MLPerf Endpoints v1.0 benchmark",
     "Endpoints v1.0 has llama3.1-8b, gpt-oss-120b, deepseek-r1"),
    ("app mlperf inference llama3.1-8b _cpu _tiny", "a Pareto curve measures a served endpoint", "add _endpoint"),
    ("app mlperf inference llama3.1-8b _tiny _endpoint", "the query names no device", "_cpu"),
    ("detect python", "detect-python is not an MLPerf benchmark app", "cmx find app mlperf inference"),
])
def test_what_cannot_draw_a_curve_is_refused_before_any_step_runs(builtin: Home, query: str, said: str,
                                                                  hint: str) -> None:
    proc = builtin.cmx("pareto", query, "--progress", "none")
    assert proc.returncode != 0
    assert said in proc.stderr and hint in proc.stderr, proc.stderr
    runs = builtin.root / "runs"
    assert not runs.exists() or not [p for p in runs.iterdir() if not p.name.startswith(".")]


def test_an_endpoint_url_with_another_backend_chosen_is_refused_naming_it(builtin: Home) -> None:
    # the URL implies _endpoint only where the query chooses no backend: _vllm and a URL contradict each other
    proc = builtin.cmx("pareto", "app mlperf inference llama3.1-8b _cpu _tiny _vllm", "--input",
                       "endpoint_url=http://127.0.0.1:9/v1", "--progress", "none")
    assert proc.returncode == 1
    assert "--input endpoint_url is for _endpoint, which the query does not choose (it runs _vllm)" in proc.stderr, \
        proc.stderr
    runs = builtin.root / "runs"
    assert not runs.exists() or not [p for p in runs.iterdir() if not p.name.startswith(".")]


def test_the_first_token_deadline_must_be_positive(builtin: Home) -> None:
    proc = builtin.cmx("pareto", "app mlperf inference llama3.1-8b _cpu _tiny _endpoint", "--first-token-timeout", "0")
    assert proc.returncode == 2 and "--first-token-timeout" in proc.stderr


def test_the_help_states_the_first_token_deadlines_default() -> None:
    from click.testing import CliRunner

    from cmx.cli.pareto import command
    from cmx.mlperf.pareto.runner import FIRST_TOKEN_S

    text = " ".join(CliRunner().invoke(command, ["--help"]).output.split())
    assert f"default: {FIRST_TOKEN_S:g}." in text
