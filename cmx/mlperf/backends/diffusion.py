"""A diffusers text-to-video pipeline in the harness process (Wan 2.2's WanPipeline): a prompt in, an mp4 out.

What it does for each `GenRequest` with a `VideoPrompt`, as the reference does for each sample
(the Wan 2.2 reference's run_mlperf.py and run_inference.py under text_to_video/ in mlcommons/inference at
b66003e):
the pipeline is called with the prompt, the fixed negative prompt, the size, frame count, steps and the two
guidance scales of `VideoSettings`, a generator seeded with the settings' seed, and the fixed initial latent
(the same tensor for every sample); the frames are written with diffusers' `export_to_video` at the settings'
fps (imageio and its ffmpeg, as the reference's run_inference.py writes the videos VBench scores), under the
request's file name in the backend's folder; the result carries the file, its frame count and its sha256.

Why LoadGen is answered with the sha256 of the mp4, not the frames (the reference's run_mlperf.py hands LoadGen
the frames' raw bytes, 81 x 720 x 1280 x 3 = 224 MB a sample, which its accuracy log writes out in hex):
- TEST04 (compliance/TEST04) compares the performance of a run that issues one sample over and over with the
  performance run's; it reads LoadGen's summaries, never a response, so what the response holds cannot change its
  verdict, and a digest costs LoadGen nothing to copy and log.
- Re-scoring reads the mp4 files (VBench scores videos, not LoadGen's log); the accuracy log's digest of each
  sample is the sha256 of the file that sample wrote, so anyone re-scoring checks with `sha256sum` that the videos
  scored are the ones the logged run produced, and a video swapped or re-encoded afterwards no longer matches.
  What the digest does not give is the frames themselves: a lost mp4 cannot be rebuilt from the log, only
  generated again (the fixed latent and seed make that reproducible on the same software and device).
The same seed, latent, prompt and settings give the same frames on the same device and software, and ffmpeg's
encoder then writes the same bytes, so the digest repeats (tests/mlperf/backends/test_diffusion.py).

Threading (cmx.mlperf.backends.base's contract): each pipeline has one worker thread, which runs one video at a time
(the reference's batch is one prompt); `submit()` only queues the request (LoadGen's issue thread does nothing
slow), `generate()` queues a batch and yields each result as a worker finishes it. A video has no first token:
the sink hears `on_done` (or `on_error`) only, so the SUT that drives it must not wait for a first token
(SingleStream and Offline measure whole samples). A sample that fails (the pipeline raised) fails alone.

Data parallel over a node's GPUs, as the reference's run_inference.py is (one process per GPU under
torch.distributed, rank r taking the prompts r, r + world_size, ...): one pipeline per GPU this process sees (the
visibility variables choose them; `pipelines` caps them), each loaded onto its device with its own copy of the
latent and its own worker thread, all pulling from the one request queue, so a batch is spread over the GPUs as they
come free and `generate()` yields in completion order. The GIL is released inside torch's kernels, so threads
suffice where the reference uses processes. A video's bytes do not depend on which pipeline made it (the same
latent, seed and settings). The device kind's profile gives the dtype (bf16 on CUDA and ROCm, as the reference;
float32 on a CPU, where the tiny pipeline runs) and the torch device ("cuda" for both CUDA and ROCm builds of
torch). On a CPU there is one pipeline unless `pipelines` asks for more (the tests do, to run two workers).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmx.extras import require_extra
from cmx.mlperf.backends.base import (
    BackendDefaults,
    BackendError,
    GenRequest,
    GenResult,
    StartInfo,
    StreamSink,
    Video,
)
from cmx.tools.fs import sha256_file

EXTRA = "video"
DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}
WARMUP_STEPS = 2  # one step of each expert: the first step is above Wan 2.2's boundary, the second below it


@dataclass(frozen=True)
class VideoSettings:
    """How every video of a run is generated: the reference's inference_config.yaml (720x1280, 81 frames at 16 fps,
    20 steps, seed 42, guidance 4.0 for the high-noise expert and 3.0 for the low-noise one, boundary_ratio 0.875,
    its negative prompt) and the fixed initial `latent` (a torch file; None: the pipeline draws one from the seed).
    `guidance_scale_2` and `boundary_ratio` are for a pipeline of two experts; None leaves the folder's own."""

    height: int
    width: int
    frames: int
    fps: int
    steps: int
    seed: int
    guidance_scale: float
    guidance_scale_2: float | None = None
    boundary_ratio: float | None = None
    negative_prompt: str = ""
    latent: Path | None = None

    def __post_init__(self) -> None:
        # WanPipeline's own rules (check_inputs: sizes divisible by 16; num_frames - 1 divisible by the VAE's 4)
        if self.height % 16 or self.width % 16 or self.height < 16 or self.width < 16:
            raise BackendError(f"a video of {self.width}x{self.height} cannot be generated",
                               hint="width and height are multiples of 16 (the reference's: 1280x720)")
        if self.frames < 1 or (self.frames - 1) % 4:
            raise BackendError(f"{self.frames} frames cannot be generated", hint="4k + 1 frames (the reference: 81)")
        if self.steps < 1 or self.fps < 1:
            raise BackendError(f"steps ({self.steps}) and fps ({self.fps}) must be at least 1")


@dataclass(frozen=True)
class DiffusionBackendConfig:
    """The pipeline folder (`model`: a diffusers folder with its model_index.json), the run's `settings`, the
    folder the videos are written to, and the device kind and precision the engine's profile gave."""

    model: Path
    settings: VideoSettings
    videos: Path
    device: str = "cpu"
    precision: str | None = None
    warmup: bool = True
    pipelines: int | None = None  # None: one per GPU this process sees, or one on a CPU

    def __post_init__(self) -> None:
        if self.pipelines is not None and self.pipelines < 1:
            raise BackendError(f"pipelines must be at least 1, not {self.pipelines}")

    @property
    def dtype(self) -> str:
        """torch's name of the pipeline's dtype: the precision asked for, else bf16 on a GPU (the reference's) and
        float32 on a CPU. The VAE runs in float32 whatever this is, as the reference loads it."""
        if self.precision is None:
            return "float32" if self.device == "cpu" else "bfloat16"
        if self.precision not in DTYPES:
            raise BackendError(f"the diffusion pipeline does not run in {self.precision}",
                               hint=f"one of {', '.join(DTYPES)}")
        return DTYPES[self.precision]

    @property
    def torch_device(self) -> str:
        """torch's device: ROCm's build of torch names its GPUs cuda too."""
        return "cpu" if self.device == "cpu" else "cuda"


def is_pipeline(folder: Path) -> bool:
    """Whether `folder` is a diffusers pipeline (its model_index.json), not a transformers checkpoint."""
    return (Path(folder) / "model_index.json").is_file()


_Job = tuple[GenRequest, StreamSink]


@dataclass
class _Batch:
    """The sink of one `generate()` call: its results, in the order the worker finished them."""

    results: queue.SimpleQueue[GenResult | BaseException] = field(default_factory=queue.SimpleQueue)

    def on_first_token(self, request_id: int, token_id: int) -> None:
        """A video has none."""

    def on_done(self, result: GenResult) -> None:
        self.results.put(result)

    def on_error(self, request_id: int, error: BaseException) -> None:
        self.results.put(error)


@dataclass
class _Pipeline:
    """One copy of the pipeline on one device, with its own copy of the fixed latent, and what it generated."""

    pipe: Any
    latent: Any
    device: str  # torch's: cpu, cuda:0, cuda:1, ...
    videos: int = 0
    seconds: float = 0.0


class DiffusionBackend(BackendDefaults):
    """A diffusers pipeline per device (see the module docstring); nothing is loaded before `start()`."""

    def __init__(self, config: DiffusionBackendConfig, logger: logging.Logger | None = None) -> None:
        self.config = config
        self.log = logger or logging.getLogger(__name__)
        self._pipelines: list[_Pipeline] = []
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._counts = threading.Lock()  # the pipelines' counters, read by details() from another thread

    # --- the contract ----------------------------------------------------------------------------------------

    def start(self) -> StartInfo:
        if self._workers:
            raise BackendError("the diffusion backend is already started")
        require_extra(EXTRA, "the diffusion engine")  # accelerate and ftfy too: diffusers fails late without them
        began = time.perf_counter()
        for device in self._devices():
            pipe = self._load(device)
            self._pipelines.append(_Pipeline(pipe, self._load_latent(pipe, device), device))
        loaded = time.perf_counter() - began
        warm_began = time.perf_counter()
        self.config.videos.mkdir(parents=True, exist_ok=True)
        if self.config.warmup:  # kernels chosen and memory taken before LoadGen's timed window, as vLLM's warm-up
            self._warm_up()
        warmed = time.perf_counter() - warm_began
        self._workers = [threading.Thread(target=self._work, args=(one,), name=f"cmx-diffusion-{i}", daemon=True)
                         for i, one in enumerate(self._pipelines)]
        for worker in self._workers:
            worker.start()
        s = self.config.settings
        engines = tuple({"kind": "diffusers", "pipeline": type(one.pipe).__name__, "model": str(self.config.model),
                         "device": one.device, "dtype": self.config.dtype,
                         "video": f"{s.width}x{s.height}, {s.frames} frames at {s.fps} fps, {s.steps} steps, "
                                  f"seed {s.seed}",
                         "fixed_latent": str(s.latent) if s.latent else None} for one in self._pipelines)
        return StartInfo(engines=engines, start_seconds=loaded,
                         warmup_requests=len(self._pipelines) if self.config.warmup else 0, warmup_seconds=warmed)

    def generate(self, requests: Sequence[GenRequest]) -> Iterator[GenResult]:
        """Each request's video, in the order they are finished; a failed one raises (the SUT fails the rest)."""
        batch = _Batch()
        for request in requests:
            self._enqueue(request, batch)
        for _ in requests:
            got = batch.results.get()
            if isinstance(got, BaseException):
                raise got
            yield got

    def submit(self, request: GenRequest, sink: StreamSink) -> None:
        """Queued for the next free pipeline, whose worker calls `sink.on_done` (no first token: a video has none)
        or `on_error`."""
        self._enqueue(request, sink)

    def details(self) -> dict[str, Any]:
        with self._counts:
            return {"videos": sum(p.videos for p in self._pipelines),
                    "generation_seconds": round(sum(p.seconds for p in self._pipelines), 3),
                    "videos_per_pipeline": [p.videos for p in self._pipelines]}

    def stop(self) -> None:
        workers, self._workers = self._workers, []
        for _ in workers:
            self._jobs.put(None)
        for worker in workers:
            worker.join(timeout=600)  # a video being generated ends first (a pipeline call cannot be interrupted)
        self._pipelines = []

    # --- the pipelines ---------------------------------------------------------------------------------------

    def _warm_up(self) -> None:
        """A short video on each pipeline, and one mp4 written and removed: the writer's first call starts imageio's
        ffmpeg, which cost the first sample of a run twice a tiny video's time (a SingleStream run's early-stopping
        estimate of 64 queries is their slowest, so TEST04 then seemed 50 % faster than the performance run)."""
        from diffusers.utils import export_to_video

        frames: Any = None
        for one in self._pipelines:
            frames = one.pipe(**{**self._call_args("warm-up", one), "num_inference_steps": WARMUP_STEPS,
                                 "output_type": "np"}).frames[0]
        scratch = self.config.videos / ".warm-up.partial.mp4"
        export_to_video(list(frames), str(scratch), fps=self.config.settings.fps)
        scratch.unlink(missing_ok=True)

    def _devices(self) -> tuple[str, ...]:
        """One torch device per pipeline: every GPU this process sees (CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES
        chose them; ROCm's torch names them cuda too), or the CPU; `pipelines` caps the GPUs, or asks for that many
        pipelines on the CPU."""
        if self.config.torch_device == "cpu":
            return ("cpu",) * (self.config.pipelines or 1)
        import torch

        count = torch.cuda.device_count()
        if count == 0:
            raise BackendError(f"torch sees no GPU for the {self.config.device} run",
                               hint="check the visibility variables (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES) and "
                                    "that torch is the GPU build")
        wanted = self.config.pipelines or count
        if wanted > count:
            raise BackendError(f"{wanted} pipelines asked for, and torch sees {count} GPUs",
                               hint="one pipeline per GPU: ask for at most as many")
        return tuple(f"cuda:{i}" for i in range(wanted))

    def _enqueue(self, request: GenRequest, sink: StreamSink) -> None:
        if not self._workers:
            raise BackendError(f"{request.name}: the diffusion backend is not started")
        if request.video is None:
            raise BackendError(f"{request.name}: the diffusion pipeline takes a text-to-video prompt, not token ids",
                               hint="this engine runs a text-to-video benchmark (its model is a diffusers folder)")
        self._jobs.put((request, sink))

    def _work(self, one: _Pipeline) -> None:
        while (job := self._jobs.get()) is not None:
            request, sink = job
            try:
                result = self.video(request, one)
            except Exception as exc:  # noqa: BLE001 - the sample fails alone; its sink says so
                sink.on_error(request.id, exc if isinstance(exc, BackendError)
                              else BackendError(f"{request.name}: the pipeline failed: {exc}"))
                continue
            sink.on_done(result)

    def video(self, request: GenRequest, one: _Pipeline | None = None) -> GenResult:
        """Generate and write one request's video on pipeline `one` (the first by default; on its worker thread, or
        directly once started)."""
        import torch
        from diffusers.utils import export_to_video

        assert request.video is not None
        one = one or self._pipelines[0]
        began = time.perf_counter()
        with torch.inference_mode():
            frames = one.pipe(**self._call_args(request.video.text, one), output_type="np").frames[0]
        folder = request.video.folder or self.config.videos
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / request.video.file_name
        partial = path.with_name(f".{path.stem}.partial{path.suffix}")  # a file never has its name half-written
        export_to_video(list(frames), str(partial), fps=self.config.settings.fps)
        os.replace(partial, path)
        with self._counts:
            one.seconds += time.perf_counter() - began
            one.videos += 1
        video = Video(str(path), sha256_file(path), len(frames), self.config.settings.fps)
        return GenResult(id=request.id, token_ids=[], finish_reason="stop", video=video)

    def _call_args(self, prompt: str, one: _Pipeline) -> dict[str, Any]:
        import torch

        s = self.config.settings
        args: dict[str, Any] = dict(prompt=prompt, negative_prompt=s.negative_prompt, height=s.height, width=s.width,
                                    num_frames=s.frames, guidance_scale=s.guidance_scale, num_inference_steps=s.steps,
                                    generator=torch.Generator(device=one.device).manual_seed(s.seed))
        if s.guidance_scale_2 is not None:
            args["guidance_scale_2"] = s.guidance_scale_2
        if one.latent is not None:  # a copy each time: the pipeline must not change the run's one latent
            args["latents"] = one.latent.clone()
        return args

    def _load(self, device: str) -> Any:
        """The pipeline from its folder onto `device`, as the reference loads it: the VAE in float32, the rest in
        the dtype."""
        import diffusers
        import torch

        folder = self.config.model
        if not is_pipeline(folder):
            raise BackendError(f"{folder} is not a diffusers pipeline: it has no model_index.json",
                               hint="give the model folder as diffusers saves it (Wan-AI/Wan2.2-T2V-A14B-Diffusers)")
        dtype = getattr(torch, self.config.dtype)
        extra: dict[str, Any] = {}
        if self.config.settings.boundary_ratio is not None:
            extra["boundary_ratio"] = self.config.settings.boundary_ratio
        try:
            index = diffusers.DiffusionPipeline.load_config(str(folder))
            vae_class = getattr(diffusers, index["vae"][1])
            vae = vae_class.from_pretrained(str(folder), subfolder="vae", torch_dtype=torch.float32)
            pipe = diffusers.DiffusionPipeline.from_pretrained(str(folder), vae=vae, torch_dtype=dtype, **extra)
        except (OSError, ValueError, KeyError, AttributeError) as exc:
            raise BackendError(f"the diffusion pipeline in {folder} could not be loaded: {exc}",
                               hint="check the folder is a complete diffusers pipeline") from exc
        pipe.set_progress_bar_config(disable=True)
        return pipe.to(device)

    def _load_latent(self, pipe: Any, device: str) -> Any:
        """The fixed initial latent on `device`, checked against the shape `pipe` makes for the settings."""
        import torch

        s = self.config.settings
        if s.latent is None:
            return None
        if not s.latent.is_file():
            raise BackendError(f"the fixed latent {s.latent} is not there", hint="the dataset step writes it")
        latent = torch.load(s.latent, map_location=device, weights_only=True)
        channels = pipe.transformer.config.in_channels
        wanted = (1, channels, (s.frames - 1) // pipe.vae_scale_factor_temporal + 1,
                  s.height // pipe.vae_scale_factor_spatial, s.width // pipe.vae_scale_factor_spatial)
        if tuple(latent.shape) != wanted:
            raise BackendError(f"the fixed latent {s.latent} has the shape {tuple(latent.shape)}, and "
                               f"{s.width}x{s.height} with {s.frames} frames needs {wanted}",
                               hint="give the latent made for these settings (the reference's: 720x1280, 81 "
                                    "frames)")
        return latent

