"""A diffusers pipeline in the harness process (cmx.mlperf.backends.diffusion): a text-to-video benchmark's engine,
asked for by its model, a diffusers folder (model_index.json), where every other in-process engine takes a
transformers checkpoint. The benchmark's `generation.video` gives the settings and the fixed latent's file.

Its profile is the device kind and the precision of the run's engine settings: the vLLM options of EngineOptions
(KV cache, batching, tensor parallelism) mean nothing to a pipeline, and the backend reads neither. xDiT, AMD's
harness for the published results, would add sequence parallelism inside one video (several GPUs on one sample,
which SingleStream's latency wants) and cached steps; it is not built: docs/benchmarks/wan-2.2-t2v-a14b.md.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.mlperf.app_plan import AppConfigError
from cmx.mlperf.backends.base import VIDEO_FOLDER
from cmx.mlperf.engines.base import AppRun, no_server, refuse_endpoint_url
from cmx.mlperf.loadgen.harness_config import HarnessError

if TYPE_CHECKING:
    from cmx.mlperf.backends.base import Backend
    from cmx.mlperf.backends.diffusion import VideoSettings
    from cmx.mlperf.backends.profiles import EngineOptions
    from cmx.mlperf.loadgen.harness_config import EngineSettings, HarnessConfig
    from cmx.mlperf.run_summary import RunSummary


name = "diffusion"
backend = "vllm"  # the app's in-process backend: the pipeline runs in the harness process
modules: tuple[str, ...] = ("torch", "diffusers", "accelerate", "ftfy", "imageio", "imageio_ffmpeg")
serve = no_server


def _is_pipeline(folder: Path) -> bool:
    from cmx.mlperf.backends.diffusion import is_pipeline

    return is_pipeline(folder)


def asked(run: AppRun) -> bool:
    """The model is a diffusers pipeline."""
    return _is_pipeline(run.model)


def asked_by(config: HarnessConfig) -> bool:
    return config.endpoint is None and _is_pipeline(config.model)


def check(run: AppRun) -> None:
    """No endpoint and no Ray replicas: the pipeline runs in the harness process."""
    refuse_endpoint_url(run)
    if run.engine.on_ray:
        raise AppConfigError("replicas and ray_address start vLLM engines on Ray, and the model is a diffusers "
                             "pipeline", hint="drop them: the diffusion engine runs in the harness process")


def refuse(run: AppRun) -> None:
    """A benchmark with no video settings answers in tokens, which a diffusion pipeline does not make."""
    from cmx.mlperf.benchmarks import benchmark_for

    if benchmark_for(run.benchmark).generation.video is None:
        raise AppConfigError(f"{run.benchmark} answers in tokens, and the model {run.model} is a diffusers "
                             "pipeline (model_index.json), which makes videos",
                             hint="give the benchmark's own model (a transformers checkpoint)")


def preflight(run: AppRun) -> None:
    """The video extra is there, before the first test."""
    from cmx.extras import require_extra

    require_extra("video", "the diffusion engine")


def profile(settings: EngineSettings, device: str) -> EngineOptions:
    """The device kind and the precision asked for; the pipeline's dtype follows from them (bf16 on a GPU unless
    asked otherwise, as the reference; float32 on a CPU)."""
    from cmx.mlperf.backends.profiles import EngineOptions

    return EngineOptions(device=device, precision=settings.precision)


def video_settings(config: HarnessConfig) -> VideoSettings:
    """The benchmark's video settings, in the run's shape where it gives one (HarnessConfig.video), their fixed latent
    found in the dataset's folder. HarnessError for a benchmark with none."""
    from dataclasses import replace

    from cmx.mlperf.benchmarks import benchmark_for

    settings = benchmark_for(config.benchmark).generation.video
    if settings is None:
        raise HarnessError(f"{config.benchmark} has no video settings, and the diffusion engine makes videos",
                           hint="give the benchmark's own model, not a diffusers pipeline")
    shape = config.video
    if shape is not None:  # the run's shape (the tiny model's), checked as the reference's is
        settings = replace(settings, width=shape.width or settings.width, height=shape.height or settings.height,
                           frames=shape.frames or settings.frames, steps=shape.steps or settings.steps)
    if settings.latent is None or settings.latent.is_absolute():
        return settings
    folder = config.dataset if config.dataset.is_dir() else config.dataset.parent
    return replace(settings, latent=folder / settings.latent)


def build(config: HarnessConfig, logger: logging.Logger, environ: Mapping[str, str]) -> Backend:
    from cmx.mlperf.backends.diffusion import DiffusionBackend, DiffusionBackendConfig

    options = profile(config.engine, config.device)
    return DiffusionBackend(DiffusionBackendConfig(model=config.model, settings=video_settings(config),
                                                   videos=config.output / VIDEO_FOLDER, device=options.device,
                                                   precision=options.precision), logger)


def record(run: AppRun, runs: Sequence[RunSummary]) -> dict[str, Any]:
    return {"kind": "diffusers", "transport": "in-process"}
