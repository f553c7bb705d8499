"""The endpoint's two video routes against a scripted server over real HTTP (a process of its own on 127.0.0.1): what
each sends (vllm-omni's form fields, trtllm-serve's JSON, the run's settings, a warm-up's two steps), how each answer
becomes the sample's mp4 in the videos folder with its sha256, and how an answer that is no video, an error status,
a video of other frames, or a dead server fails that sample with a message naming it.

The scripted server answers with a minimal ISO media file of the frames asked for (ftyp, and a video track whose
sample table counts them): what the client reads of an mp4. The stand-in that answers real mp4s made by the tiny
Wan 2.2 is tests/mlperf/video_server.py (the e2e test).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from cmx.mlperf.backends.base import BackendDead, BackendError, GenRequest, VideoPrompt
from cmx.mlperf.backends.diffusion import VideoSettings
from cmx.mlperf.backends.endpoint import EndpointBackend
from cmx.mlperf.backends.endpoint_client import EndpointConfig
from cmx.mlperf.backends.routes import VIDEO_GENERATIONS, VIDEO_ROUTES, VIDEOS_SYNC, route_for
from cmx.mlperf.backends.video_api import Mp4Video, mp4_video
from tests.fake_openai import script_server
from tests.mlperf.backends.test_endpoint import CollectingSink

FAKE_MP4 = r'''
import struct

def box(kind, payload):
    return struct.pack(">I4s", 8 + len(payload), kind) + payload

def fake_mp4(frames, width=48, height=32, handler=b"vide"):
    """An ISO media file whose one track (of `handler`) has `frames` samples of width x height."""
    tkhd = box(b"tkhd", bytes(76) + struct.pack(">II", width << 16, height << 16))
    hdlr = box(b"hdlr", bytes(8) + handler + bytes(12) + b"\0")
    stsz = box(b"stsz", bytes(4) + struct.pack(">II", 0, frames) + bytes(4 * frames))
    trak = box(b"trak", tkhd + box(b"mdia", box(b"mdhd", bytes(24)) + hdlr + box(b"minf", box(b"stbl", stsz))))
    return box(b"ftyp", b"isom" + bytes(4) + b"isomiso2") + box(b"moov", box(b"mvhd", bytes(100)) + trak)
'''
namespace: dict[str, Any] = {}
exec(FAKE_MP4, namespace)  # the same builder the scripted server answers with
fake_mp4 = namespace["fake_mp4"]

SERVER = FAKE_MP4 + r"""
import asyncio, base64, json, sys
from aiohttp import web
PORT, LOG = int(sys.argv[1]), sys.argv[2]

def record(request, fields):
    with open(LOG, "a") as f:
        f.write(json.dumps({"path": request.path, "content_type": request.content_type, "fields": fields}) + "\n")

async def answer(request, fields, trtllm):
    record(request, fields)
    prompt, frames = fields["prompt"], int(fields["num_frames"])
    if "size" in fields:
        width, height = (int(v) for v in fields["size"].split("x"))
    else:
        width, height = int(fields["width"]), int(fields["height"])
    if "TALL" in prompt:
        width, height = height, width
    if "HOLD" in prompt:
        print("holding", flush=True)
        await asyncio.sleep(3600)
    if "FAIL" in prompt:
        return web.json_response({"detail": "Video generation failed: out of memory"}, status=500)
    if "JUNK" in prompt:
        return web.Response(text="<html>a proxy's page</html>", content_type="text/html")
    if "PATH" in prompt:
        return web.json_response({"video_id": "video_1", "video_path": "/lustre/videos/video_1.mp4"})
    mp4 = fake_mp4(frames - 1 if "FEW" in prompt else frames, width, height)
    if trtllm and fields.get("response_format") == "video_bytes":
        return web.json_response({"video_id": "video_1", "video_bytes": base64.b64encode(mp4).decode()})
    return web.Response(body=mp4, content_type="video/mp4", headers={"X-Request-Id": "video_sync-1"})

async def models(request):
    return web.json_response({"data": [{"id": "wan", "owned_by": "vllm-omni"}]})

async def sync(request):
    return await answer(request, dict(await request.post()), False)

async def generations(request):
    return await answer(request, await request.json(), True)

app = web.Application()
app.router.add_get("/v1/models", models)
app.router.add_post("/v1/videos/sync", sync)
app.router.add_post("/v1/videos/generations", generations)
web.run_app(app, host="127.0.0.1", port=PORT, print=lambda *a: print("ready", flush=True))
"""

NEGATIVE = "vivid colors, overexposed, static, blurry details"
SETTINGS = VideoSettings(height=32, width=48, frames=5, fps=16, steps=3, seed=42, guidance_scale=4.0,
                         guidance_scale_2=3.0, boundary_ratio=0.875, negative_prompt=NEGATIVE)


def sample(i: int, prompt: str) -> GenRequest:
    return GenRequest(id=100 + i, prompt_ids=(), video=VideoPrompt(prompt, f"{prompt}-0.mp4"), sample=i)


def config(url: str, route: str, videos: Path, **kw: Any) -> EndpointConfig:
    return EndpointConfig(url=url, video=SETTINGS, videos=videos, video_route=route, **kw)


def requests_seen(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def failure(backend: EndpointBackend, request: GenRequest) -> BackendError:
    with pytest.raises(BackendError) as caught:
        list(backend.generate([request]))
    return caught.value


@pytest.fixture
def server(tmp_path: Path) -> Any:
    log = tmp_path / "requests.jsonl"
    with script_server(tmp_path, SERVER, str(log)) as (process, url):
        yield process, url, log


def test_vllm_omni_route_sends_the_run_settings_as_form_fields_and_keeps_the_mp4(server: Any, tmp_path: Path) -> None:
    _, url, log = server
    videos = tmp_path / "videos"
    backend = EndpointBackend(config(url, "vllm-omni", videos))
    info = backend.start()
    try:
        [result] = list(backend.generate([sample(3, "a cat drinking water")]))
    finally:
        backend.stop()
    seen = requests_seen(log)
    assert [r["path"] for r in seen] == ["/v1/videos/sync"] * 3  # two warm-ups (Offline's path, Server's), the sample
    assert {r["content_type"] for r in seen} == {"multipart/form-data"}
    assert seen[-1]["fields"] == {"prompt": "a cat drinking water", "model": "wan", "width": "48", "height": "32",
                                  "num_frames": "5", "fps": "16", "num_inference_steps": "3", "guidance_scale": "4.0",
                                  "guidance_scale_2": "3.0", "boundary_ratio": "0.875", "seed": "42",
                                  "negative_prompt": NEGATIVE}
    assert [r["fields"]["num_inference_steps"] for r in seen[:2]] == ["2", "2"]  # a warm-up is two steps
    path = videos / "a cat drinking water-0.mp4"
    assert sorted(p.name for p in videos.iterdir()) == [path.name]  # the warm-ups' videos are not kept
    # what the route could not carry is recorded, not dropped in silence
    assert {k: info.details[k] for k in ("video_route", "video_path", "fixed_latent", "fixed_latent_sent")} == \
        {"video_route": "vllm-omni", "video_path": "/videos/sync", "fixed_latent": None, "fixed_latent_sent": False}
    assert info.warmup_requests == 2 and info.details["token_ids_source"] == "video"
    video = result.video
    assert result.id == 103 and video is not None and Path(video.path) == path
    assert path.read_bytes() == fake_mp4(5, 48, 32)
    assert (video.sha256, video.frames, video.fps) == (hashlib.sha256(fake_mp4(5)).hexdigest(), 5, 16)


def test_trtllm_route_sends_mlcommons_json_and_reads_the_base64_video(server: Any, tmp_path: Path) -> None:
    _, url, log = server
    videos = tmp_path / "videos"
    with EndpointBackend(config(url, "trtllm-serve", videos)) as backend:
        sink = CollectingSink(1)
        backend.submit(sample(4, "a boat on a river"), sink)  # SingleStream's path: no first token, the whole video
        assert sink.finished.wait(20) and not sink.errors and not sink.first
    seen = requests_seen(log)
    assert [r["path"] for r in seen] == ["/v1/videos/generations"] * 3
    assert {r["content_type"] for r in seen} == {"application/json"}
    assert seen[-1]["fields"] == {"prompt": "a boat on a river", "size": "48x32", "seconds": 5 / 16, "fps": 16,
                                  "num_frames": 5, "num_inference_steps": 3, "guidance_scale": 4.0, "seed": 42,
                                  "output_format": "mp4", "response_format": "video_bytes",
                                  "negative_prompt": NEGATIVE, "guidance_scale_2": 3.0, "boundary_ratio": 0.875}
    assert (videos / "a boat on a river-0.mp4").read_bytes() == fake_mp4(5)


@pytest.mark.parametrize("route", list(VIDEO_ROUTES))
@pytest.mark.parametrize(("prompt", "message"), [
    ("JUNK", r"the server's answer to generating the video of sample 7 is malformed: (not an mp4|neither an mp4 nor "
             r"JSON) \(text/html; charset=utf-8, 27 bytes: \"<html>a proxy's page</html>\"\)"),
    ("FAIL", r"the server failed generating the video of sample 7 with HTTP 500: Video generation failed: out of "
             r"memory"),
    ("FEW", r"the server's answer to generating the video of sample 7 is malformed: the mp4 has 4 frames, and 5 were "
            r"asked for"),
    ("TALL", r"the server's answer to generating the video of sample 7 is malformed: the mp4's frames are 32x48 "
             r"\(width x height\), and 48x32 were asked for"),
])
def test_an_answer_that_is_not_the_video_asked_for_fails_its_sample_naming_it(route: str, prompt: str, message: str,
                                                                              server: Any, tmp_path: Path) -> None:
    _, url, _ = server
    videos = tmp_path / "videos"
    with EndpointBackend(config(url, route, videos)) as backend:
        error = failure(backend, sample(7, f"{prompt} a dog"))
        [ok] = list(backend.generate([sample(8, "a dog")]))  # the server still serves: only that sample failed
    assert re.match(message, error.message), error.message
    assert error.message.endswith("; 0 of 1 samples completed, 1 in flight were lost, 0 not sent")
    assert sorted(p.name for p in videos.iterdir()) == ["a dog-0.mp4"] and ok.video is not None
    if prompt == "JUNK":
        assert error.hint == VIDEO_ROUTES[route].hint


def test_a_trtllm_answer_with_only_a_path_on_the_server_fails_saying_so(server: Any, tmp_path: Path) -> None:
    _, url, _ = server
    with EndpointBackend(config(url, "trtllm-serve", tmp_path / "videos")) as backend:
        error = failure(backend, sample(2, "PATH a dog"))
    assert "it gives a path on the server (/lustre/videos/video_1.mp4), not the video" in error.message


def test_a_server_killed_under_a_video_route_is_reported_dead(server: Any, tmp_path: Path) -> None:
    process, url, _ = server
    with EndpointBackend(config(url, "vllm-omni", tmp_path / "videos")) as backend:
        outcome: list[BaseException] = []

        def send() -> None:
            try:
                list(backend.generate([sample(5, "HOLD a dog")]))
            except BaseException as exc:  # noqa: BLE001 - the error is what the test looks at
                outcome.append(exc)

        sending = threading.Thread(target=send)
        sending.start()
        assert process.stdout.readline().split() == ["holding"]
        process.kill()
        sending.join(20)
        assert not sending.is_alive()
    [error] = outcome
    assert isinstance(error, BackendDead), error
    assert re.match(rf"the server at {re.escape(url)} stopped answering \(connection (refused|reset)\)",
                    error.message), error.message


def test_video_routes_are_named_as_the_app_input_offers_them() -> None:
    recipe = yaml.safe_load((Path(__file__).parents[3] / "recipes/app-mlperf-inference/recipe.yaml").read_text())
    spec = recipe["inputs"]["video_route"]
    assert spec["choices"] == list(VIDEO_ROUTES) and spec["default"] == "vllm-omni"
    assert VIDEO_ROUTES["vllm-omni"] is VIDEOS_SYNC and VIDEOS_SYNC.path == "/videos/sync"
    assert VIDEO_ROUTES["trtllm-serve"] is VIDEO_GENERATIONS and VIDEO_GENERATIONS.path == "/videos/generations"
    video = sample(1, "a dog")
    assert route_for(video, streamed=True, video=VIDEO_GENERATIONS) is VIDEO_GENERATIONS
    with pytest.raises(BackendError, match="sample 1 is a text-to-video prompt"):
        route_for(video, streamed=False)
    with pytest.raises(BackendError, match="unknown video route 'sglang'"):
        EndpointConfig(url="http://127.0.0.1:1/v1", video_route="sglang")


def test_mp4_video_reads_the_video_tracks_frames_and_size_and_refuses_what_is_not_a_whole_mp4() -> None:
    assert mp4_video(fake_mp4(81, 1280, 720)) == Mp4Video(81, 1280, 720)
    with pytest.raises(ValueError, match="no video track"):
        mp4_video(fake_mp4(81, handler=b"soun"))
    with pytest.raises(ValueError, match="runs past the file's end"):
        mp4_video(fake_mp4(81)[:-40])



@pytest.mark.e2e
def test_endpoint_against_the_stand_in_video_server_gives_the_in_process_videos_byte_for_byte(tmp_path: Path) -> None:
    """_endpoint on the tiny Wan 2.2, on both routes: each prompt's mp4 from the stand-in server
    (tests/mlperf/video_server.py, a process of its own) has the sha256 of the in-process DiffusionBackend's for the
    same prompt and settings. No route carries the fixed latent, so the stand-in loads the same latent file
    (--latent), as a real server would have to be configured to."""
    import importlib.util
    import logging
    import subprocess
    import sys

    if importlib.util.find_spec("diffusers") is None or importlib.util.find_spec("imageio_ffmpeg") is None:
        pytest.skip("the video extra (diffusers, imageio-ffmpeg) is needed")
    from cmx.mlperf.backends.diffusion import DiffusionBackend, DiffusionBackendConfig
    from cmx.mlperf.benchmarks.wan_2_2_t2v_a14b.tiny import make_tiny_wan

    prompts = ("a cat drinking water", "a boat sailing on a river")
    tiny = make_tiny_wan(tmp_path / "tiny", seed=0, corpus=prompts)
    settings = VideoSettings(height=tiny.height, width=tiny.width, frames=tiny.frames, fps=16, steps=2, seed=42,
                             guidance_scale=4.0, guidance_scale_2=3.0, boundary_ratio=0.875, negative_prompt=NEGATIVE,
                             latent=tiny.latent)
    samples = [sample(i, p) for i, p in enumerate(prompts)]
    server = subprocess.Popen([sys.executable, "-m", "tests.mlperf.video_server", "--model", str(tiny.path),
                               "--latent", str(tiny.latent)], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).parents[3])
    try:  # the server loads while the in-process backend generates
        with DiffusionBackend(DiffusionBackendConfig(model=tiny.path, settings=settings,
                                                     videos=tmp_path / "in-process", warmup=False),
                              logging.getLogger("t")) as local:
            expected = {r.id: r.video for r in local.generate(samples)}
        assert server.stdout is not None
        port = int(server.stdout.readline().split()[-1])
        served = {}
        for route in VIDEO_ROUTES:
            with EndpointBackend(EndpointConfig(url=f"http://127.0.0.1:{port}/v1", video=settings,
                                                videos=tmp_path / route, video_route=route, warmup_requests=1)) as b:
                served[route] = {r.id: r.video for r in b.generate(samples)}
    finally:
        server.kill()
        server.wait()
    for route, videos in served.items():
        assert sorted(videos) == sorted(expected) == [100, 101], route
        for i, video in videos.items():
            local_video = expected[i]
            assert video is not None and local_video is not None
            assert (video.sha256, video.frames, video.fps) == (local_video.sha256, 5, 16), (route, i)
            assert Path(video.path).read_bytes() == Path(local_video.path).read_bytes()
            assert Path(video.path) == tmp_path / route / Path(local_video.path).name
    assert expected[100].sha256 != expected[101].sha256  # two prompts, two videos: the comparison can fail


def test_a_video_benchmark_with_endpoint_and_no_url_is_refused_saying_which_server_to_start(tmp_path: Path) -> None:
    """cmx starts vllm serve for _endpoint without a URL, which has no video route: refused before anything runs."""
    from cmx.mlperf.app import AppConfig
    from cmx.mlperf.app_plan import AppConfigError
    from cmx.mlperf.loadgen.harness_config import EndpointSettings

    base: dict[str, Any] = dict(round="v6.1", benchmark="wan-2.2-t2v-a14b", device="cpu", scenarios=("Offline",),
                                modes=("performance",), model=tmp_path, tokenizer=tmp_path, dataset=tmp_path,
                                results_dir=tmp_path / "r", system="box", target_qps={"Offline": 1.0},
                                backend="endpoint")
    with pytest.raises(AppConfigError, match=r"wan-2\.2-t2v-a14b with _endpoint needs a video server's URL") as info:
        AppConfig(**base)
    assert "vllm serve MODEL --omni" in (info.value.hint or "") and "--input endpoint_url=" in (info.value.hint or "")
    given = AppConfig(**base, endpoint=EndpointSettings(url="http://127.0.0.1:8000/v1", video_route="trtllm-serve"))
    assert given.chosen_engine.name == "endpoint"


def test_client_worker_processes_are_refused_for_a_video_run(server: Any, tmp_path: Path) -> None:
    _, url, _ = server
    with pytest.raises(BackendError, match=r"client worker processes \(2\) send text completions only, not videos"):
        EndpointBackend(config(url, "vllm-omni", tmp_path / "videos", workers=2)).start()
