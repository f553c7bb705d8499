"""An OpenAI-compatible server over HTTP (cmx.mlperf.backends.endpoint): the one endpoint_url names, or a
`vllm serve` of the model that cmx starts for the run and stops after it. A text-to-video benchmark's server is a video
server (vllm-omni or trtllm-serve, EndpointSettings.video_route) that endpoint_url must name: cmx starts none."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from cmx.mlperf.app_plan import AppConfigError
from cmx.mlperf.engines.base import AppRun, Served, no_preflight, refuse_replicas, takes_any_benchmark, vllm_profile
from cmx.mlperf.loadgen.harness_config import API_KEY_ENV, EndpointSettings, endpoint_url

if TYPE_CHECKING:
    from cmx.mlperf.backends.base import Backend
    from cmx.mlperf.backends.profiles import EngineOptions
    from cmx.mlperf.backends.vllm_server import VllmServerConfig
    from cmx.mlperf.loadgen.harness_config import HarnessConfig
    from cmx.mlperf.run_summary import RunSummary


name = "endpoint"
backend = "endpoint"
modules: tuple[str, ...] = ()  # the HTTP client is cmx's own dependency; vllm serve, when cmx starts it, is vllm's
preflight = no_preflight
refuse = takes_any_benchmark
profile = vllm_profile  # the vllm serve cmx starts (a server behind endpoint_url brings its own)
SERVED_MODEL_NAME = "cmx-sut"  # what the vllm serve cmx starts calls the model


def asked(run: AppRun) -> bool:
    """The endpoint backend's engine unless another of its engines is asked for."""
    return True


def asked_by(config: HarnessConfig) -> bool:
    return config.endpoint is not None


def check(run: AppRun) -> None:
    """No Ray replicas; a text-to-video benchmark only with the URL of its video server."""
    refuse_replicas(run)
    refuse_video_without_url(run.benchmark, url_given=run.endpoint is not None)


def refuse_video_without_url(benchmark: str, *, url_given: bool) -> None:
    """cmx starts `vllm serve` for a model, which serves no video route: vllm-omni's (`vllm serve MODEL --omni`) is
    not installed here and has no CPU platform, and trtllm-serve is NVIDIA's; the user starts either and names it.
    Asked when the app step starts, after its dependencies: the plan imports no benchmark module to know it sooner."""
    from cmx.mlperf.benchmarks import benchmark_for

    if not url_given and benchmark_for(benchmark).generation.video is not None:
        raise AppConfigError(f"{benchmark} with _endpoint needs a video server's URL: cmx starts vllm serve, which "
                             "has no video route",
                             hint="start `vllm serve MODEL --omni` (vllm-omni; --input video_route=vllm-omni) or "
                                  "trtllm-serve (--input video_route=trtllm-serve) and pass --input "
                                  "endpoint_url=http://HOST:PORT/v1")


def server_config(run: AppRun, tokenizer: bool, options: EngineOptions) -> VllmServerConfig:
    """The `vllm serve` cmx starts for the run: the device profile's `options`. A speech model's samples go
    to its transcription route, which tokenizes and reads audio files; a chat benchmark's to the chat route, which
    applies the chat template; `tokenizer`: text prompts too (MLCommons' client sends text), where cmx sends ids."""
    from cmx.mlperf.backends.machine import read_model_facts
    from cmx.mlperf.backends.vllm_server import VllmServerConfig
    from cmx.mlperf.benchmarks import benchmark_for

    e = run.engine
    bench = benchmark_for(run.benchmark)
    speech = read_model_facts(run.model).audio_decoder_start is not None
    if speech:
        require_audio_decoder()
    return VllmServerConfig(model=run.model, options=options,
                            log_path=(run.server_log_dir or run.results_dir) / "vllm-server.log",
                            served_model_name=SERVED_MODEL_NAME, max_model_len=e.max_model_len,
                            skip_tokenizer_init=not (speech or bench.chat or tokenizer), sampling=run.sampling,
                            extra_args=bench.server_flags, python_path=run.server_python_path)


def require_audio_decoder() -> None:
    """vLLM's transcription route reads the uploaded clip with soundfile (or PyAV): refused before the server
    starts when this interpreter, which runs it, has neither."""
    import importlib.util

    if importlib.util.find_spec("soundfile") is None and importlib.util.find_spec("av") is None:
        raise AppConfigError("vLLM's transcription route reads audio files with soundfile or PyAV, and neither is "
                             "installed in the interpreter that would run vllm serve",
                             hint="pip install soundfile (vLLM's audio extra: pip install 'vllm[audio]'); cmx's cpu "
                                  "extra has it")


@contextmanager
def serve(run: AppRun, log: logging.Logger, tokenizer: bool) -> Iterator[Served | None]:
    """Nothing when endpoint_url names the server; otherwise a vllm serve of the model, always stopped."""
    if run.endpoint is not None:
        yield None
        return
    from cmx.mlperf.backends.vllm_server import VllmServer

    config = server_config(run, tokenizer, profile(run.engine, run.device))
    with VllmServer(config, log) as server:
        log.info("started vllm serve for %s at %s (log %s)", run.model, server.url, config.log_path)
        yield Served(endpoint=EndpointSettings(url=server.url, model=SERVED_MODEL_NAME), server_log=config.log_path)
    log.info("stopped vllm serve at %s", server.url)


def build(config: HarnessConfig, logger: logging.Logger, environ: Mapping[str, str]) -> Backend:
    """The endpoint's client, with its API key from `environ` (never from a file or the command line)."""
    from cmx.mlperf.backends.endpoint import EndpointBackend
    from cmx.mlperf.backends.endpoint_client import EndpointConfig
    from cmx.mlperf.benchmarks import benchmark_for
    from cmx.secrets import Secret

    e = config.endpoint
    assert e is not None, "asked_by chose this engine for a config with an endpoint"
    key = environ.get(API_KEY_ENV)
    bench = benchmark_for(config.benchmark)
    video = videos = None
    if bench.generation.video is not None:  # the settings the in-process engine would run, sent with every prompt
        from cmx.mlperf.backends.base import VIDEO_FOLDER
        from cmx.mlperf.engines.diffusion import video_settings

        video, videos = video_settings(config), config.output / VIDEO_FOLDER
    return EndpointBackend(EndpointConfig(url=endpoint_url(e, environ), model=e.model,
                                          api_key=Secret(key) if key else None,
                                          request_timeout_s=e.request_timeout_s,
                                          max_concurrency=e.max_concurrency, workers=e.workers,
                                          send_min_tokens=e.send_min_tokens, tokenizer=config.model,
                                          sampling=config.sampling, chat=bench.chat, video=video, videos=videos,
                                          video_route=e.video_route),
                           logger)


def record(run: AppRun, runs: Sequence[RunSummary]) -> dict[str, Any]:
    """The server's software and version as the server reported them."""
    details = next((r.details for r in runs if r.details.get("transport") == "http"), {})
    keys = ("url", "model", "server_software", "server_version", "server_max_model_len", "token_ids_source")
    # a video run's route and whether the reference's fixed latent reached the server (no route carries it)
    video: dict[str, Any] = {k: details[k] for k in ("video_route", "video_path", "fixed_latent", "fixed_latent_sent")
                             if k in details}
    return {"kind": "endpoint", "transport": "http", **{k: details.get(k) for k in keys},
            "started_by_cmx": run.server_log is not None,
            "server_log": str(run.server_log) if run.server_log else None,
            "stack": run.serving_stack.to_json() if run.serving_stack else None,
            # a server with no GET /v1/models (vLLM's disaggregation proxy): the model is the one named, and the facts
            # a listing gives (software, max_model_len) are unknown; a topology cmx started has its instances' facts
            **({"server_lists_models": False} if details.get("server_lists_models") is False else {}),
            **({"topology": run.topology().to_json()} if run.topology else {}), **video,
            **({"min_tokens_sent": False} if run.endpoint is not None and not run.endpoint.send_min_tokens
               else {})}


