"""The engine registry (cmx.mlperf.engines): which engine an app run and a harness config ask for, that the
registry lists every engine module, and that the app and the harness name no engine themselves."""

from __future__ import annotations

import ast
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from cmx.extras import EXTRAS
from cmx.mlperf.app import AppConfig, harness_config
from cmx.mlperf.app_plan import AppConfigError
from cmx.mlperf.backends import routes
from cmx.mlperf.backends.disaggregated import PrefillDecode
from cmx.mlperf.backends.profiles import EngineOptions
from cmx.mlperf.backends.ray_replicas import RayReplicaBackend
from cmx.mlperf.backends.vllm import VllmBackend
from cmx.mlperf.engines import BACKENDS, ENGINES, engine_for_harness
from cmx.mlperf.engines import ray as ray_engine
from cmx.mlperf.engines import vllm as vllm_engine
from cmx.mlperf.loadgen.harness import build_backend
from cmx.mlperf.loadgen.harness_config import EndpointSettings, EngineSettings
from cmx.mlperf.serving_stack import KINDS
from tests.conftest import REPO

ENGINES_DIR = REPO / "cmx" / "mlperf" / "engines"


def config(tmp_path: Path, **kw: object) -> AppConfig:
    base: dict[str, object] = dict(round="v6.0", benchmark="llama2-70b-99", device="cpu", scenarios=("Offline",),
                                   modes=("performance",), model=tmp_path, tokenizer=tmp_path, dataset=tmp_path,
                                   results_dir=tmp_path / "r", system="box", target_qps={"Offline": 1.0})
    return AppConfig(**{**base, **kw})


def harness_engine(app: AppConfig, tmp_path: Path) -> str:
    return engine_for_harness(harness_config(app, "Offline", "performance", tmp_path / "user.conf")).name


def test_an_app_run_gets_the_engine_its_backend_and_inputs_ask_for(tmp_path: Path):
    url = EndpointSettings(url="http://gw:8000/v1")
    pair = PrefillDecode(1, 1, tmp_path / "proxy.py")
    assert config(tmp_path).chosen_engine.name == "vllm"
    assert config(tmp_path, engine=EngineSettings(replicas=2)).chosen_engine.name == "ray"
    assert config(tmp_path, engine=EngineSettings(ray_address="h:6379")).chosen_engine.name == "ray"
    assert config(tmp_path, backend="endpoint").chosen_engine.name == "endpoint"
    assert config(tmp_path, backend="endpoint", endpoint=url).chosen_engine.name == "endpoint"
    assert config(tmp_path, backend="endpoint", prefill_decode=pair).chosen_engine.name == "disaggregated"


def test_the_harness_builds_for_the_engine_the_app_chose_and_a_topology_is_reached_as_an_endpoint(tmp_path: Path):
    url = EndpointSettings(url="http://gw:8000/v1")
    assert harness_engine(config(tmp_path), tmp_path) == "vllm"
    assert harness_engine(config(tmp_path, engine=EngineSettings(replicas=2)), tmp_path) == "ray"
    assert harness_engine(config(tmp_path, backend="endpoint", endpoint=url), tmp_path) == "endpoint"
    served = config(tmp_path, backend="endpoint", endpoint=url, prefill_decode=PrefillDecode(1, 1, tmp_path),
                    topology=lambda: pytest.fail("not read"))
    assert served.chosen_engine.name == "disaggregated"
    assert harness_engine(served, tmp_path) == "endpoint"


def test_an_unknown_backend_is_refused_naming_the_registrys_backends(tmp_path: Path):
    with pytest.raises(AppConfigError, match="unknown backend 'tgi'") as info:
        config(tmp_path, backend="tgi")
    assert info.value.hint == "one of vllm, endpoint" and BACKENDS == ("vllm", "endpoint")


def test_replicas_behind_an_endpoint_and_a_topology_behind_a_given_url_are_refused(tmp_path: Path):
    with pytest.raises(AppConfigError, match="replicas and ray_address are for the vllm backend"):
        config(tmp_path, backend="endpoint", engine=EngineSettings(replicas=2))
    with pytest.raises(AppConfigError, match="and an endpoint_url was given"):
        config(tmp_path, backend="endpoint", endpoint=EndpointSettings(url="http://gw:8000/v1"),
               prefill_decode=PrefillDecode(1, 1, tmp_path))
    with pytest.raises(AppConfigError, match="and the backend is vllm"):
        config(tmp_path, prefill_decode=PrefillDecode(1, 1, tmp_path))


def test_the_registry_lists_every_engine_module_once_and_each_needs_only_modules_an_extra_brings():
    modules = {p.stem for p in ENGINES_DIR.glob("*.py")} - {"__init__", "base"}
    names = [e.name for e in ENGINES]
    assert sorted(names) == sorted(modules) and len(set(names)) == len(names)
    brought = {m for extra in EXTRAS.values() for m in extra}
    assert {(e.name, m) for e in ENGINES for m in e.modules if m not in brought} == set()


SETTINGS = EngineSettings(precision="bf16", tensor_parallel_size=2, max_num_seqs=8, max_num_batched_tokens=4096,
                          gpu_memory_utilization=0.8, pipeline_parallel_size=2, distributed_executor_backend="ray")
VLLM_ON_ROCM = EngineOptions(device="rocm", precision="bf16", tensor_parallel_size=2, max_num_seqs=8,
                             max_num_batched_tokens=4096, gpu_memory_utilization=0.8, pipeline_parallel_size=2,
                             distributed_executor_backend="ray")


def test_the_four_vllm_engines_start_it_with_the_device_kinds_profile_under_the_runs_settings():
    """vLLM in-process, its Ray replicas, the vllm serve cmx starts and the pair's instances: one profile (an engine
    of another runtime states its own)."""
    vllm_engines = [e for e in ENGINES if e.name in ("vllm", "ray", "endpoint", "disaggregated")]
    assert len(vllm_engines) == 4
    assert [e.profile(SETTINGS, "rocm") for e in vllm_engines] == [VLLM_ON_ROCM] * 4
    assert [e.profile(EngineSettings(), "cpu") for e in vllm_engines] == [EngineOptions(device="cpu")] * 4


def test_the_harness_builds_an_engines_runner_with_that_engines_own_profile(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch):
    """A new engine states its profile: build uses the engine's hook, not a profile chosen outside it."""
    app = config(tmp_path, engine=SETTINGS)
    harness = replace(harness_config(app, "Offline", "performance", tmp_path / "user.conf"), device="rocm")
    backend = build_backend(harness, logging.getLogger("t"))
    assert isinstance(backend, VllmBackend) and backend.config.options == VLLM_ON_ROCM
    own = EngineOptions(device="rocm", precision="fp8")
    monkeypatch.setattr(vllm_engine, "profile", lambda settings, device: own)
    assert isinstance(backend := build_backend(harness, logging.getLogger("t")), VllmBackend)
    assert backend.config.options == own
    on_ray = replace(harness, engine=replace(SETTINGS, replicas=2))
    monkeypatch.setattr(ray_engine, "profile", lambda settings, device: replace(own, precision="fp16"))
    assert isinstance(backend := build_backend(on_ray, logging.getLogger("t")), RayReplicaBackend)
    assert backend.config.engine.options == replace(own, precision="fp16")


def test_the_app_and_the_harness_name_no_engine_backend_or_server():
    """They reach engines through the registry only: no engine module, backend class, server or engine test."""
    engine_words = {"VllmBackend", "RayReplicaBackend", "EndpointBackend", "VllmServer", "DisaggregatedServer",
                    "on_ray", "replicas_config", "backend_config", "server_config"}
    found = []
    for path in (REPO / "cmx" / "mlperf" / "app.py", REPO / "cmx" / "mlperf" / "loadgen" / "harness.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            word = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
            if word in engine_words:
                found.append(f"{path.name}:{node.lineno} {word}")  # type: ignore[attr-defined]  # Name, Attribute
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cmx.mlperf.engines.") \
                    and node.module != "cmx.mlperf.engines.base":
                found.append(f"{path.name}:{node.lineno} imports {node.module}")
            if isinstance(node, ast.ImportFrom) and (node.module or "") in (
                    "cmx.mlperf.backends.vllm", "cmx.mlperf.backends.ray_replicas", "cmx.mlperf.backends.endpoint",
                    "cmx.mlperf.backends.vllm_server"):
                found.append(f"{path.name}:{node.lineno} imports {node.module}")
    assert found == []


ROUTES = (routes.COMPLETIONS, routes.STREAMED, routes.CHAT, routes.TRANSCRIPTIONS)
# the engines' and backends' words, the stacks' and forms', the routes' paths, names and text sources
PLUG_IN_WORDS = ({e.name for e in ENGINES} | set(BACKENDS) | {w for k in KINDS for w in (k.name, k.form) if w}
                 | {w for r in ROUTES for w in (r.path, r.path.strip("/"), r.text_source) if w}
                 | {"completions", "streamed", "chat", "transcriptions"})
# vLLM's model listing says owned_by "vllm": the endpoint names the server's software by it, not cmx's engine
NOT_A_PLUG_IN = {("endpoint.py", "vllm")}


def _name_branches(path: Path) -> list[str]:
    """Comparisons and match cases with an engine's, a stack's or a route's word."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        operands = ([node.left, *node.comparators] if isinstance(node, ast.Compare)
                    else [node.value] if isinstance(node, ast.MatchValue) else [])
        for o in list(operands):
            if isinstance(o, ast.Tuple | ast.Set | ast.List):
                operands += o.elts
        words = {o.value for o in operands if isinstance(o, ast.Constant) and isinstance(o.value, str)}
        found += [f"{path.name}:{node.lineno} {w}" for w in sorted(words & PLUG_IN_WORDS)
                  if (path.name, w) not in NOT_A_PLUG_IN]
    return found


def test_the_harness_the_app_the_stack_registry_and_the_endpoint_branch_on_no_engine_stack_or_route_name():
    paths = [REPO / "cmx" / p for p in ("mlperf/loadgen/harness.py", "mlperf/app.py", "k8s/stacks.py",
                                        "mlperf/backends/endpoint.py")]
    assert [hit for p in paths for hit in _name_branches(p)] == []


def test_the_branch_scan_sees_an_engine_a_stack_and_a_route_name(tmp_path: Path):
    branchy = tmp_path / "branchy.py"
    branchy.write_text('def f(e, s, source):\n    if e.name == "ray" or s.form in ("pieces",):\n        return 1\n'
                       '    match source:\n        case "transcription":\n            return 2\n', encoding="utf-8")
    assert _name_branches(branchy) == ["branchy.py:2 ray", "branchy.py:2 pieces", "branchy.py:5 transcription"]
