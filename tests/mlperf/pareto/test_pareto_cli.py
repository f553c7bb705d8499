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
