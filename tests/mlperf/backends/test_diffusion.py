"""The diffusion engine on a tiny random Wan 2.2 pipeline (cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.tiny) on the CPU:
each video written as an mp4 of its frames and fps, answered with its sha256, the same seed giving the same bytes;
the engine's place in the registry; the refusals (a token request, a latent of another shape, no video extra)."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cmx.extras import MissingExtra
from cmx.mlperf.app import AppConfig, harness_config
from cmx.mlperf.app_plan import AppConfigError
from cmx.mlperf.backends.base import BackendError, GenRequest, GenResult
from cmx.mlperf.backends.diffusion import DiffusionBackend, DiffusionBackendConfig, VideoSettings
from cmx.mlperf.engines import diffusion, engine_for_harness, engine_for_run
from cmx.mlperf.loadgen.harness import build_backend
from cmx.mlperf.loadgen.harness_config import EngineSettings, HarnessError

if TYPE_CHECKING:
    from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.tiny import TinyPipeline

needs_video = pytest.mark.skipif(importlib.util.find_spec("diffusers") is None
                                 or importlib.util.find_spec("imageio_ffmpeg") is None,
                                 reason="the video extra (diffusers, imageio-ffmpeg) is needed")

PROMPTS = ("a cat drinking water", "a boat sailing on a river")
NEGATIVE = "vivid colors, overexposed, static, blurry details"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> TinyPipeline:
    from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.tiny import make_tiny_wan

    if importlib.util.find_spec("diffusers") is None:
        pytest.skip("the video extra is needed")
    return make_tiny_wan(tmp_path_factory.mktemp("wan") / "tiny", seed=0, corpus=PROMPTS)


def settings(tiny: TinyPipeline, **kw: object) -> VideoSettings:
    base: dict[str, object] = dict(height=tiny.height, width=tiny.width, frames=tiny.frames, fps=16, steps=2, seed=42,
                                   guidance_scale=4.0, guidance_scale_2=3.0, boundary_ratio=0.875,
                                   negative_prompt=NEGATIVE, latent=tiny.latent)
    return VideoSettings(**{**base, **kw})  # type: ignore[arg-type]


def backend(tiny: TinyPipeline, videos: Path, **kw: object) -> DiffusionBackend:
    return DiffusionBackend(DiffusionBackendConfig(model=tiny.path, settings=settings(tiny, **kw), videos=videos,
                                                   warmup=False), logging.getLogger("t"))


def request(i: int, prompt: str) -> GenRequest:
    from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.videos import video_request

    return video_request(i, i, prompt)


@needs_video
def test_each_video_is_an_mp4_of_its_frames_at_its_fps_answered_with_its_sha256(tiny: TinyPipeline, tmp_path: Path):
    import imageio_ffmpeg
    import numpy as np

    from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.videos import digest_answer

    with backend(tiny, tmp_path / "videos") as b:
        results = {r.id: r for r in b.generate([request(0, PROMPTS[0]), request(1, PROMPTS[1])])}
        details = b.details()
    assert sorted(results) == [0, 1] and details["videos"] == 2
    first = results[0].video
    assert first is not None and Path(first.path) == tmp_path / "videos" / f"{PROMPTS[0]}-0.mp4"
    assert sorted(p.name for p in (tmp_path / "videos").iterdir()) == sorted(f"{p}-0.mp4" for p in PROMPTS)
    data = Path(first.path).read_bytes()
    assert first.sha256 == hashlib.sha256(data).hexdigest() and first.frames == 5 and first.fps == 16
    assert bytes(digest_answer(results[0])) == hashlib.sha256(data).digest()
    assert digest_answer(results[0]).dtype == np.uint8 and results[0].n_tokens == 0
    reader = imageio_ffmpeg.read_frames(first.path)
    meta = next(reader)
    frames = list(reader)
    assert meta["fps"] == 16 and meta["size"] == (32, 32) and len(frames) == 5
    assert results[0].video != results[1].video  # another prompt, another video


@needs_video
def test_the_same_seed_gives_the_same_pipeline_files_and_the_same_video_bytes(tiny: TinyPipeline, tmp_path: Path):
    from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.tiny import make_tiny_wan

    again = make_tiny_wan(tmp_path / "again", seed=0, corpus=PROMPTS)
    files = sorted(p.relative_to(tiny.path) for p in tiny.path.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again.path) for p in again.path.rglob("*") if p.is_file())
    assert all((tiny.path / f).read_bytes() == (again.path / f).read_bytes() for f in files)
    other = make_tiny_wan(tmp_path / "other", seed=1, corpus=PROMPTS)
    weights = Path("transformer") / "diffusion_pytorch_model.safetensors"
    assert (other.path / weights).read_bytes() != (tiny.path / weights).read_bytes()

    with backend(tiny, tmp_path / "a") as b:
        (one,) = b.generate([request(0, PROMPTS[0])])
    with backend(again, tmp_path / "b") as b:
        (two,) = b.generate([request(0, PROMPTS[0])])
    with backend(tiny, tmp_path / "c", seed=7) as b:
        (reseeded,) = b.generate([request(0, PROMPTS[0])])
    # with no fixed latent, the seed draws the initial latent: another seed, another video
    drawn = {}
    for seed in (42, 7):
        with backend(tiny, tmp_path / f"drawn{seed}", seed=seed, latent=None) as b:
            (drawn[seed],) = b.generate([request(0, PROMPTS[0])])
    assert one.video and two.video and reseeded.video and drawn[42].video and drawn[7].video
    # the fixed latent is all the randomness of a flow-matching UniPC run: the seed changes nothing beside it
    assert one.video.sha256 == two.video.sha256 == reseeded.video.sha256
    assert len({one.video.sha256, drawn[42].video.sha256, drawn[7].video.sha256}) == 3


class Sink:
    def __init__(self) -> None:
        self.done: list[GenResult] = []
        self.errors: list[BaseException] = []
        self.firsts: list[int] = []
        self.finished = threading.Event()

    def on_first_token(self, request_id: int, token_id: int) -> None:
        self.firsts.append(request_id)

    def on_done(self, result: GenResult) -> None:
        self.done.append(result)
        self.finished.set()

    def on_error(self, request_id: int, error: BaseException) -> None:
        self.errors.append(error)
        self.finished.set()


@needs_video
def test_a_submitted_prompt_is_answered_on_the_backends_thread_with_its_video_and_no_first_token(
        tiny: TinyPipeline, tmp_path: Path):
    sink = Sink()
    with backend(tiny, tmp_path) as b:
        b.submit(request(5, PROMPTS[1]), sink)
        assert sink.finished.wait(120)
    assert sink.errors == [] and sink.firsts == [] and [r.id for r in sink.done] == [5]
    assert sink.done[0].video is not None and Path(sink.done[0].video.path).is_file()


@needs_video
def test_two_pipelines_share_one_queue_and_make_the_same_bytes_as_one(tiny: TinyPipeline, tmp_path: Path):
    """Data parallel as on a node's GPUs (here two pipelines on the CPU): each pipeline has its worker, a batch is
    answered whole, and a prompt's video does not depend on the pipeline that made it."""
    config = DiffusionBackendConfig(model=tiny.path, settings=settings(tiny), videos=tmp_path / "two",
                                    warmup=False, pipelines=2)
    prompts = [*PROMPTS, "a person walking in the city", "the sky at sunset"]
    two = DiffusionBackend(config, logging.getLogger("t"))
    info = two.start()
    try:
        results = list(two.generate([request(i, p) for i, p in enumerate(prompts)]))
        details = two.details()
        workers = {t.name for t in threading.enumerate() if t.name.startswith("cmx-diffusion-")}
        by_pipeline = [two.video(request(9, PROMPTS[0]), one) for one in two._pipelines]
    finally:
        two.stop()
    assert len(info.engines) == 2 and workers == {"cmx-diffusion-0", "cmx-diffusion-1"}
    assert sorted(r.id for r in results) == [0, 1, 2, 3]
    assert details["videos"] == 4 and len(details["videos_per_pipeline"]) == 2
    with backend(tiny, tmp_path / "one") as one:
        alone = {r.id: r for r in one.generate([request(i, p) for i, p in enumerate(prompts)])}
    assert {r.id: r.video.sha256 for r in results if r.video} == {i: r.video.sha256 for i, r in alone.items()
                                                                  if r.video}
    assert by_pipeline[0].video is not None and by_pipeline[1].video is not None
    assert by_pipeline[0].video.sha256 == by_pipeline[1].video.sha256 == alone[0].video.sha256  # type: ignore


def test_a_pipeline_count_below_one_is_refused(tmp_path: Path):
    with pytest.raises(BackendError, match="pipelines must be at least 1"):
        DiffusionBackendConfig(model=tmp_path, settings=VideoSettings(height=32, width=32, frames=5, fps=16, steps=2,
                                                                      seed=0, guidance_scale=1.0),
                               videos=tmp_path, pipelines=0)


@needs_video
def test_a_token_request_and_a_latent_of_another_shape_are_refused(tiny: TinyPipeline, tmp_path: Path):
    with backend(tiny, tmp_path) as b, pytest.raises(BackendError, match="takes a text-to-video prompt"):
        b.submit(GenRequest(id=1, prompt_ids=[1, 2, 3]), Sink())
    with pytest.raises(BackendError, match=r"has the shape \(1, 4, 2, 4, 4\), and 64x32 with 5 frames needs "
                                           r"\(1, 4, 2, 4, 8\)"):
        backend(tiny, tmp_path, width=64).start()


def test_settings_the_pipeline_cannot_take_are_refused_before_it_loads():
    with pytest.raises(BackendError, match="4k \\+ 1 frames"):
        VideoSettings(height=720, width=1280, frames=80, fps=16, steps=20, seed=42, guidance_scale=4.0)
    with pytest.raises(BackendError, match="1280x721 cannot be generated"):
        VideoSettings(height=721, width=1280, frames=81, fps=16, steps=20, seed=42, guidance_scale=4.0)


def test_without_the_video_extra_the_engine_names_the_install_command(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "diffusers", None)  # what find_spec reports for a package not installed
    (tmp_path / "model_index.json").write_text("{}")
    config = DiffusionBackendConfig(model=tmp_path, videos=tmp_path / "v", settings=VideoSettings(
        height=32, width=32, frames=5, fps=16, steps=2, seed=42, guidance_scale=4.0))
    with pytest.raises(MissingExtra, match=r"^the diffusion engine needs the video extra: "
                                           r"pip install 'cmx-bench\[video\]'$"):
        DiffusionBackend(config).start()


def app(tmp_path: Path, model: Path, **kw: object) -> AppConfig:
    base: dict[str, object] = dict(round="v6.0", benchmark="llama2-70b-99", device="cpu", scenarios=("Offline",),
                                   modes=("performance",), model=model, tokenizer=model, dataset=tmp_path,
                                   results_dir=tmp_path / "r", system="box", target_qps={"Offline": 1.0})
    return AppConfig(**{**base, **kw})


def test_a_diffusers_folder_asks_for_the_diffusion_engine_and_a_checkpoint_does_not(tmp_path: Path):
    pipeline = tmp_path / "pipeline"
    pipeline.mkdir()
    (pipeline / "model_index.json").write_text('{"_class_name": "WanPipeline"}')
    assert engine_for_run(app(tmp_path, tmp_path)).name == "vllm"
    assert engine_for_run(app(tmp_path, pipeline)).name == "diffusion"
    hc = harness_config(app(tmp_path, pipeline), "Offline", "performance", tmp_path / "user.conf")
    assert engine_for_harness(hc) is diffusion
    assert engine_for_harness(replace(hc, model=tmp_path)).name == "vllm"
    with pytest.raises(AppConfigError, match="replicas and ray_address start vLLM engines on Ray"):
        app(tmp_path, pipeline, engine=EngineSettings(replicas=2))
    # llama2-70b answers in tokens: refused before anything runs, and by the harness if it gets that far
    with pytest.raises(AppConfigError, match="llama2-70b-99 answers in tokens"):
        diffusion.refuse(app(tmp_path, pipeline))
    with pytest.raises(HarnessError, match="llama2-70b-99 has no video settings"):
        build_backend(hc, logging.getLogger("t"))
    assert diffusion.profile(EngineSettings(precision="bf16", max_num_seqs=8), "rocm").precision == "bf16"
