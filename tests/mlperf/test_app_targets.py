"""The round decides llama2's accuracy target: v6.1 keeps only llama2-70b-99.9, which is what the app runs there by
default; v6.0 keeps both and runs 99 unless told; a `_99` under v6.1 fails at `cmx plan`, naming the fix."""

from __future__ import annotations

import pytest

from cmx import api
from cmx.execute.plan_check import PlannedStep
from cmx.mlperf.app_step import benchmark_of
from cmx.mlperf.app_targets import TARGETS, TargetError, targeted_benchmark
from cmx.mlperf.benchmarks import all_benchmarks, benchmark_for
from cmx.mlperf.rounds import known_rounds, load_round
from tests.conftest import Home

QUERY = "app mlperf inference llama2 _cpu _tiny _short"


def test_the_table_is_the_rounds_files() -> None:
    """Every family with several names has the targets each round's file has, in the benchmark's order (99 first),
    for every round cmx knows, oldest first; no other family is in the table."""
    several = {b.family for b in all_benchmarks() if len(b.names) > 1}
    assert set(TARGETS) == several == {"llama2-70b"}
    for family, by_round in TARGETS.items():
        names = benchmark_for(family).names
        assert list(by_round) == known_rounds()
        for name in known_rounds():
            kept = tuple(n.removeprefix(f"{family}-") for n in names if n in load_round(name).benchmark_names)
            assert by_round[name] == kept, name


@pytest.mark.parametrize("round_name, named, runs", [
    ("v6.1", None, "llama2-70b-99.9"), ("v6.1", "99.9", "llama2-70b-99.9"),
    ("v6.0", None, "llama2-70b-99"), ("v6.0", "99", "llama2-70b-99"), ("v6.0", "99.9", "llama2-70b-99.9"),
    ("v5.1", None, "llama2-70b-99"),
])
def test_the_round_picks_the_target_the_query_does_not_name(round_name: str, named: str | None, runs: str) -> None:
    assert targeted_benchmark("llama2-70b", round_name, named) == runs


def test_a_benchmark_with_one_name_has_no_target() -> None:
    assert targeted_benchmark("gpt-oss-120b", "v6.1", None) is None


def test_99_under_v61_is_refused_naming_both_fixes() -> None:
    with pytest.raises(TargetError) as err:
        targeted_benchmark("llama2-70b", "v6.1", "99")
    assert err.value.message == ("llama2-70b-99 is not a v6.1 benchmark (v6.1 keeps llama2-70b-99.9): use _99.9, "
                                 "or --input round=v6.0")


@pytest.mark.parametrize("words, inputs, runs", [
    ("", {}, "llama2-70b-99.9"),
    (" _99.9", {}, "llama2-70b-99.9"),
    ("", {"round": "v6.0"}, "llama2-70b-99"),
    (" _99", {"round": "v6.0"}, "llama2-70b-99"),
    (" _99.9", {"round": "v6.0"}, "llama2-70b-99.9"),
])
def test_the_planned_app_step_runs_the_rounds_target(builtin: Home, words: str, inputs: dict[str, str],
                                                     runs: str) -> None:
    """The real recipe resolved: the step the plan holds names the benchmark the app step will run."""
    step = api.plan(QUERY + words, inputs=inputs, settings=builtin.settings, environ={}).plan.root_step
    assert step.inputs["round"] == inputs.get("round", known_rounds()[-1])
    assert benchmark_of(benchmark_for("llama2-70b").names, PlannedStep.of(step)) == runs


def test_cmx_plan_refuses_99_under_the_default_round_in_one_line(builtin: Home) -> None:
    proc = builtin.cmx("plan", f"{QUERY} _99")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["error: llama2-70b-99 is not a v6.1 benchmark (v6.1 keeps llama2-70b-99.9): "
                                        "use _99.9, or --input round=v6.0"]
    assert builtin.cmx("plan", f"{QUERY} _99", "--input", "round=v6.0").returncode == 0
