"""vLLM engine replicas as actors of a Ray cluster (cmx.mlperf.backends.ray_replicas), each with its own devices,
asked for by the engine settings' replicas or ray_address."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cmx.mlperf.engines.base import AppRun, no_server, refuse_chat_in_process, refuse_endpoint_url, vllm_profile
from cmx.mlperf.engines.vllm import backend_config

if TYPE_CHECKING:
    from cmx.mlperf.backends.base import Backend
    from cmx.mlperf.loadgen.harness_config import HarnessConfig
    from cmx.mlperf.run_summary import RunSummary


name = "ray"
backend = "vllm"
modules: tuple[str, ...] = ("vllm", "ray")
serve = no_server
refuse = refuse_chat_in_process
check = refuse_endpoint_url
profile = vllm_profile  # each replica is a vLLM engine


def asked(run: AppRun) -> bool:
    return run.engine.on_ray


def asked_by(config: HarnessConfig) -> bool:
    return config.endpoint is None and config.engine.on_ray


def preflight(run: AppRun) -> None:
    """Join the Ray cluster the engine settings name and check it can hold the replicas (then leave it)."""
    from cmx.mlperf.backends.ray_replicas import preflight as ray_preflight
    from cmx.mlperf.backends.vllm import VllmBackendConfig

    e = run.engine
    ray_preflight(e.replicas_config(VllmBackendConfig(model=run.model, options=profile(e, run.device))))


def build(config: HarnessConfig, logger: logging.Logger, environ: Mapping[str, str]) -> Backend:
    from cmx.mlperf.backends.ray_replicas import RayReplicaBackend

    engine = backend_config(config, profile(config.engine, config.device))
    return RayReplicaBackend(config.engine.replicas_config(engine), logger)


def record(run: AppRun, runs: Sequence[RunSummary]) -> dict[str, Any]:
    """Per replica node, devices and counts are in each run's details."""
    return {"kind": "vllm", "transport": "ray", "ray_address": run.engine.ray_address,
            "replicas": run.engine.replicas or 1}
