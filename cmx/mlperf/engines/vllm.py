"""vLLM in the harness process: one engine (data parallel over its GPU groups) that the harness drives directly."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cmx.mlperf.engines.base import (
    AppRun,
    no_preflight,
    no_server,
    refuse_chat_in_process,
    refuse_endpoint_url,
    vllm_profile,
)
from cmx.mlperf.loadgen.harness_config import HarnessError

if TYPE_CHECKING:
    from cmx.mlperf.backends.base import Backend
    from cmx.mlperf.backends.profiles import EngineOptions
    from cmx.mlperf.backends.vllm import VllmBackendConfig
    from cmx.mlperf.loadgen.harness_config import HarnessConfig
    from cmx.mlperf.run_summary import RunSummary


name = "vllm"
backend = "vllm"
modules: tuple[str, ...] = ("vllm",)
preflight = no_preflight
serve = no_server
refuse = refuse_chat_in_process
check = refuse_endpoint_url
profile = vllm_profile


def asked(run: AppRun) -> bool:
    """The vllm backend's engine unless another of its engines is asked for."""
    return True


def asked_by(config: HarnessConfig) -> bool:
    return config.endpoint is None


def backend_config(config: HarnessConfig, options: EngineOptions) -> VllmBackendConfig:
    """The engine the config asks for, with the device profile's `options` (streaming for Server and Interactive).
    HarnessError for a chat benchmark, whose conversations vLLM in the harness process does not take."""
    from cmx.mlperf.backends.vllm import VllmBackendConfig
    from cmx.mlperf.benchmarks import benchmark_for

    if benchmark_for(config.benchmark).chat:
        raise HarnessError(f"{config.benchmark}'s samples are conversations for a chat route, which vLLM in the "
                           "harness process does not take", hint="run it through an endpoint: add _endpoint (cmx "
                                                                 "starts vllm serve), or give --input endpoint_url")
    return VllmBackendConfig(model=config.model, options=options,
                             streaming=config.scenario != "Offline", max_model_len=config.engine.max_model_len,
                             output_tokens_estimate=min(config.max_tokens, 300), sampling=config.sampling)


def build(config: HarnessConfig, logger: logging.Logger, environ: Mapping[str, str]) -> Backend:
    from cmx.mlperf.backends.vllm import VllmBackend

    return VllmBackend(backend_config(config, profile(config.engine, config.device)), logger)


def record(run: AppRun, runs: Sequence[RunSummary]) -> dict[str, Any]:
    return {"kind": "vllm", "transport": "in-process"}
