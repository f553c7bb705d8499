"""A disaggregated prefill/decode topology cmx starts (cmx.mlperf.backends.disaggregated): vllm serve instances
with a KV connector and vLLM's proxy in front of them, asked for by prefill_decode; the tests reach the proxy as an
endpoint (its build and record are the endpoint engine's)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from cmx.mlperf.app_plan import AppConfigError
from cmx.mlperf.engines.base import AppRun, Served, no_preflight, refuse_replicas, takes_any_benchmark, vllm_profile
from cmx.mlperf.engines.endpoint import SERVED_MODEL_NAME, server_config
from cmx.mlperf.engines.endpoint import build as build
from cmx.mlperf.engines.endpoint import record as record
from cmx.mlperf.loadgen.harness_config import EndpointSettings

if TYPE_CHECKING:
    from cmx.mlperf.loadgen.harness_config import HarnessConfig


name = "disaggregated"
backend = "endpoint"
modules: tuple[str, ...] = ()  # the instances and the proxy run in vllm's interpreter, not cmx's
preflight = no_preflight
refuse = takes_any_benchmark
profile = vllm_profile  # each instance is a vllm serve


def asked(run: AppRun) -> bool:
    return run.prefill_decode is not None


def asked_by(config: HarnessConfig) -> bool:
    """Never: the harness reaches the proxy as the endpoint engine."""
    return False


def check(run: AppRun) -> None:
    refuse_replicas(run)
    if run.endpoint is not None and run.topology is None:  # a URL the user gave, not the one `serve` gives
        raise AppConfigError("prefill_decode starts a disaggregated topology for the endpoint backend, and an "
                             "endpoint_url was given", hint="drop endpoint_url (cmx starts the instances and the "
                                                            "proxy itself) and add _endpoint, or drop "
                                                            "prefill_decode and disagg_proxy")


@contextmanager
def serve(run: AppRun, log: logging.Logger, tokenizer: bool) -> Iterator[Served | None]:
    """The instances (each endpoint.server_config's, with the KV connector) and the proxy in front of them, started
    here and always stopped when the block ends."""
    from cmx.mlperf.backends.disaggregated import DisaggregatedConfig, DisaggregatedServer

    topology = run.prefill_decode
    assert topology is not None, "asked only with prefill_decode"
    if run.endpoint is not None:  # already serving (check refuses a URL the user gave)
        yield None
        return
    config = DisaggregatedConfig(server=server_config(run, tokenizer, profile(run.engine, run.device)),
                                 topology=topology,
                                 work_dir=run.server_log_dir or run.results_dir)
    with DisaggregatedServer(config, log) as pair:
        log.info("started a disaggregated %s topology for %s behind %s at %s", topology.label, run.model,
                 topology.proxy.name, pair.url)
        # vLLM's proxy copies a request's min_tokens into its max_tokens=1 prefill request, which vLLM refuses (and
        # the proxy goes on as if it had prefilled): min_tokens stays out, and the answers are checked for it after
        settings = EndpointSettings(url=pair.url, model=SERVED_MODEL_NAME, send_min_tokens=False)
        yield Served(endpoint=settings, server_log=pair.started.proxy_log, topology=pair.report)
    log.info("stopped the disaggregated topology at %s", pair.url)
