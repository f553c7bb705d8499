"""The MLPerf apps' plan-time check (their run.py's `check`): what the app step would refuse for its inputs and
variations alone, refused when the query is planned, before any download.

It must fit `cmx plan`'s budget (the whole process under 0.3 s, docs/architecture.md § Budgets), so it imports no
round, benchmark or engine module: the scenario and test names are this module's
(tests/mlperf/test_app_plan_check.py holds them equal to the rounds' and the harness's). What needs a round's
tables (a scenario a benchmark lacks in a round, the targets of `_all-scenarios`, the closed division's refusals)
the app step judges when it starts, as it always did, before it benchmarks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from cmx.errors import StepError
from cmx.mlperf.app_targets import named_target, targeted_benchmark

SCENARIOS = ("Offline", "Server", "Interactive", "SingleStream")
TESTS = ("performance", "accuracy", "compliance", "test01", "test04", "test06", "test07", "test09")
DEFAULT_SCENARIO, DEFAULT_MODE = "offline", "valid"


class AppConfigError(StepError):
    """The app was asked for something it cannot run (an unknown mode, two choices of one group)."""


class Choices(Protocol):
    """What a check reads: the step's context when it runs, or the plan's view of the step
    (cmx.execute.plan_check.PlannedStep) before anything runs."""

    @property
    def inputs(self) -> Mapping[str, Any]: ...

    @property
    def params(self) -> Mapping[str, Any]: ...

    def variation(self, group: str) -> str: ...

    def flag(self, name: str) -> bool: ...


def pick(listed: str | None, variation: str, default: str, *, group: str, input_name: str) -> str | None:
    """The comma-separated input when given (only beside the group's default), else None."""
    if listed is None:
        return None
    if variation != default:
        raise AppConfigError(f"both _{variation} and --input {input_name}={listed} choose the {group}",
                             hint=f"drop one of the two (_{default} is the default, used when neither is given)")
    return listed


def listed_names(listed: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n.strip() for n in listed.split(",") if n.strip()))


def scenario_name(word: str) -> str | None:
    """A scenario as the rounds spell it, from a variation or a listed name in any case (`singlestream`,
    `Offline`); None when there is none."""
    return next((s for s in SCENARIOS if s.lower() == word.lower()), None)


def planned_scenarios(step: Choices) -> tuple[str, ...] | None:
    """The scenarios the step will run, by name; None for `_all-scenarios` (the round's table says which)."""
    variation = step.variation("scenario")
    listed = pick(step.inputs["scenarios"], variation, DEFAULT_SCENARIO, group="scenarios", input_name="scenarios")
    if listed is None:
        return None if variation == "all-scenarios" else (scenario_name(variation) or variation.capitalize(),)
    names = listed_names(listed)
    unknown = [n for n in names if scenario_name(n) is None]
    if unknown or not names:
        raise AppConfigError(f"unknown scenario {unknown[0] if unknown else '(none)'!r} in scenarios={listed}",
                             hint=f"the scenarios are {', '.join(SCENARIOS)} (comma-separated)")
    return tuple(scenario_name(n) or n for n in names)


def check_tests(step: Choices) -> None:
    listed = pick(step.inputs["modes"], step.variation("mode"), DEFAULT_MODE, group="tests", input_name="modes")
    if listed is None:
        return
    unknown = [n for n in listed_names(listed) if n.lower() not in TESTS]
    if unknown:
        raise AppConfigError(f"unknown mode {unknown[0]!r} in modes={listed}", hint=f"modes are {', '.join(TESTS)}")


def refuse_workers_without_url(inputs: Mapping[str, Any]) -> None:
    if inputs.get("client_workers") and not inputs.get("endpoint_url"):
        raise AppConfigError("--input client_workers needs --input endpoint_url: the server cmx starts itself is "
                             "driven from the harness process",
                             hint="give the server's URL (endpoint_url), or drop client_workers")


def refuse_half_topology(inputs: Mapping[str, Any]) -> None:
    """prefill_decode and disagg_proxy: both, or neither."""
    text, proxy = inputs.get("prefill_decode"), inputs.get("disagg_proxy")
    if (text is None) != (proxy is None):
        given, missing = ("prefill_decode", "disagg_proxy") if proxy is None else ("disagg_proxy", "prefill_decode")
        raise AppConfigError(f"--input {given} needs --input {missing}: a disaggregated topology is its instances "
                             "and the proxy in front of them",
                             hint="give both (prefill_decode=1:1, disagg_proxy=PATH to vLLM's examples/disaggregated/"
                                  "disaggregated_serving/disagg_proxy_demo.py), or neither")


def check_app_plan(step: Choices) -> list[str]:
    """The scenarios and tests (a typo; a variation and a list both choosing), the endpoint's paired inputs, a
    submission's submitter, and an accuracy target the round keeps; returns the plan's line for the step: the
    scenarios whose target the run measures first (find-performance), none when every target is given."""
    from cmx.mlperf.tune.findperf import plan_line, unset_targets

    i = step.inputs
    targeted_benchmark(step.params["benchmark"], i["round"], named_target(step))
    scenarios = planned_scenarios(step)
    check_tests(step)
    refuse_workers_without_url(i)
    if i.get("endpoint_url"):  # before anything starts, not on the harness's first request
        from cmx.mlperf.backends.openai_api import refuse_two_credentials

        refuse_two_credentials(i["endpoint_url"], bool(i.get("endpoint_api_key")))
    refuse_half_topology(i)
    if step.flag("submission") and not i.get("submitter"):
        raise AppConfigError("_submission needs --input submitter=NAME (your organisation, the tree's folder name)")
    # _all-scenarios (None): which scenarios lack a target is known when the step reads the round's table
    unset = unset_targets(scenarios, i) if scenarios is not None else (None if unset_targets(SCENARIOS, i) else ())
    return [plan_line(unset, step.flag("short"))] if unset != () else []


__all__ = ["SCENARIOS", "TESTS", "AppConfigError", "Choices", "check_app_plan", "pick", "planned_scenarios",
           "scenario_name"]
