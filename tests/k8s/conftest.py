"""Specs and a cmx home whose registry is the repository's own recipes (the llama2 and llama3 apps)."""

from __future__ import annotations

import functools
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from cmx.k8s.crd_schema import CrdSchema
from cmx.k8s.devices import PROFILES
from cmx.k8s.manifests import ServingSpec
from cmx.k8s.served import ServedModel
from cmx.mlperf.loadgen.harness_config import EngineSettings
from cmx.settings import Settings
from tests.conftest import REPO

LLAMA2 = ServedModel(repo="meta-llama/Llama-2-70b-chat-hf", revision="e4b287212771ce25f782ed8636cbea2d7c5ac7e2",
                     recipe="get-ml-model-llama2")


ENGINE_FIELDS = {f.name for f in fields(EngineSettings)}


def make_spec(device: str, **changes: Any) -> ServingSpec:
    values: dict[str, Any] = dict(name="vllm-llama2", profile=PROFILES[device], model=LLAMA2,
                                  serving_image="vllm:1", benchmark_image="registry.example.com/cmx:1",
                                  benchmark_query=f"app mlperf inference llama2 _{device} _endpoint",
                                  gpus=8)
    engine = {"tensor_parallel_size": 8, "precision": "bf16"}
    engine.update({k: changes.pop(k) for k in list(changes) if k in ENGINE_FIELDS})
    values.update(changes)
    return ServingSpec(**values, engine=EngineSettings(**engine))


@pytest.fixture
def repo_settings(tmp_path: Path) -> Settings:
    """Settings resolving the repository's recipes, with a cache and runs of the test's own."""
    registry = tmp_path / "registry.yaml"
    registry.write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n", encoding="utf-8")
    return Settings(registry=registry, cache=tmp_path / "cache", runs=tmp_path / "runs")


@functools.cache
def shared_crd(filename: str) -> CrdSchema:
    """A real CRD of ../shared/k8s-crds (its README names their sources), parsed once per process with the fake
    cluster's (they are megabytes of YAML)."""
    from cmx.k8s.crd_schema import crd_from_object
    from tests.k8s.fake_cluster import SHARED_CRDS, real_crd

    return crd_from_object(real_crd(filename), str(SHARED_CRDS / filename))
