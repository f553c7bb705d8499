"""A verb in place of the app's step (cmx.mlperf.app_verb) states only its checks and its step: the skeleton runs the
plan's deps, puts the step in the app's place on the app step's ctx, and names the verb in the step's re-run line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cmx.errors import CmxError, StepFailed
from cmx.execute.context import StepContext
from cmx.execute.request import RunRequest, Runtime
from cmx.mlperf.app_verb import StepVerb, StepVerbResult, app_benchmark, require_device, run_in_place_of_app
from cmx.resolve.plan import Step
from tests.conftest import Home


class CountError(CmxError):
    """The toy verb's refusals."""


@dataclass(frozen=True)
class CountResult(StepVerbResult):
    @property
    def ok(self) -> bool:
        return self.error is None and self.outputs.get("counted") is not None


# what a next verb writes: its target (the shared checks, then its own) and its step
def count_target(step: Step, variations: tuple[str, ...], context: dict[str, Any]) -> str:
    bench = app_benchmark(step, CountError, "is not an app the toy counts", hint="give an app query")
    require_device(step, variations, context, CountError, "a count is of one machine")
    return bench.family


def count_step(ctx: StepContext, family: str) -> dict[str, Any]:
    if ctx.inputs["round"] == "v0":
        raise ValueError("no such round")
    return {"counted": family, "round": ctx.inputs["round"], "child": ctx.deps.child.outputs["made"]}


COUNT = StepVerb[str]("count", target=count_target, step=count_step, options=("--times", "'2 3'"))


def _app(home: Home, child_fails: bool = False) -> None:
    """An app in name only (llama2-70b's family tag, a round, devices) whose own run would fail: only the verb's
    step in its place can succeed."""
    home.recipe("fake-app", f"""
        name: fake-app
        tags: [app, llama2-70b]
        inputs:
          round: {{type: str, default: v6.0}}
        variations:
          device:
            cpu: {{context: {{device: cpu}}}}
            cuda: {{context: {{device: cuda}}, default: true}}
        deps:
          - tags: child
            as: child
            with: {{fail: {str(child_fails).lower()}}}
        """, "def run(ctx):\n    raise AssertionError('the app step ran')\n")
    home.recipe("child", """
        name: child
        tags: [child]
        inputs:
          fail: {type: bool, default: false}
        outputs:
          made: {type: int}
        """, "def run(ctx):\n    if ctx.inputs['fail']:\n        raise ValueError('boom')\n    return {'made': 7}\n")


def test_the_verbs_step_runs_in_the_apps_place_on_its_ctx_after_its_deps(home: Home) -> None:
    _app(home)
    result = run_in_place_of_app(RunRequest("fake-app _cpu"), COUNT, Runtime(home.settings), "cmx", CountResult)
    assert result.error is None and result.ok
    assert dict(result.outputs) == {"counted": "llama2-70b", "round": "v6.0", "child": 7}
    assert (result.run_dir / "run.json").is_file()
    assert result.to_json()["ok"] is True and result.to_json()["counted"] == "llama2-70b"


def test_a_failing_verb_step_is_rerun_by_the_verb_and_a_failing_dep_by_cmx_run(home: Home) -> None:
    _app(home)
    failed = run_in_place_of_app(RunRequest("fake-app _cpu", inputs={"round": "v0"}), COUNT, Runtime(home.settings),
                                 "cmx --registry r.yaml", CountResult)
    assert isinstance(failed.error, StepFailed) and not failed.ok and failed.outputs == {}
    assert failed.error.rerun == "cmx --registry r.yaml count 'fake-app _cpu' --input round=v0 --context device=cpu " \
                                 "--times '2 3'"
    assert failed.to_json()["error"] == failed.error.render()
    _app(home, child_fails=True)
    dep = run_in_place_of_app(RunRequest("fake-app _cpu"), COUNT, Runtime(home.settings), "cmx", CountResult)
    assert isinstance(dep.error, StepFailed) and dep.error.chain[-1] == "child"
    assert dep.error.rerun == "cmx run child --input fail=True --context device=cpu"


@pytest.mark.parametrize(("query", "said", "hint"), [
    ("child", "child is not an app the toy counts", "give an app query"),
    ("fake-app", "the query names no device: a count is of one machine", "add one of _cpu, _cuda to the query"),
])
def test_the_shared_checks_refuse_in_the_verbs_words_before_any_step_runs(home: Home, query: str, said: str,
                                                                          hint: str) -> None:
    _app(home)
    with pytest.raises(CountError) as err:
        run_in_place_of_app(RunRequest(query), COUNT, Runtime(home.settings), "cmx", CountResult)
    assert (err.value.message, err.value.hint) == (said, hint)
    assert not (home.root / "runs").exists() or not list((home.root / "runs").iterdir())


@dataclass(frozen=True)
class _Backend:
    """The app's choices as endpoint_settings reads them: the backend variation and the endpoint inputs."""

    backend: str
    inputs: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)

    def variation(self, group: str) -> str:
        return self.backend

    def flag(self, name: str) -> bool:
        return False


def test_the_backend_over_http_is_the_engine_registrys_for_the_app_and_pareto() -> None:
    from cmx.mlperf.app_plan import AppConfigError
    from cmx.mlperf.app_step import endpoint_settings
    from cmx.mlperf.engines import BACKENDS, engine_for_harness, http_backend
    from cmx.mlperf.loadgen.harness_config import EndpointSettings, HarnessConfig

    http = http_backend()
    assert http in BACKENDS
    harness = HarnessConfig(model=Path("m"), dataset=Path("d"), scenario="Offline", mode="performance",
                            user_conf=Path("u"), output=Path("o"), endpoint=EndpointSettings(url="http://127.0.0.1:9/v1"))
    assert engine_for_harness(harness).backend == http  # the engine a harness with a URL builds is of that backend
    given = {"endpoint_url": "http://127.0.0.1:9/v1", "endpoint_model": "m", "request_timeout_s": 5.0,
             "max_concurrency": None, "client_workers": None, "video_route": "vllm-omni"}
    settings = endpoint_settings(_Backend(http, given))
    assert settings is not None and settings.url == "http://127.0.0.1:9/v1"
    other = next(b for b in BACKENDS if b != http)
    with pytest.raises(AppConfigError, match="--input endpoint_url needs the endpoint backend"):
        endpoint_settings(_Backend(other, given))
