"""The served text-to-video routes' wire formats: a request built from the run's VideoSettings, an answer read back as
the mp4 it carries, and the mp4's frame count. Pure: no I/O here (endpoint_client posts and writes the file).

Two servers, two shapes (both read, none copied; cmx writes its own):

- vllm-omni's `POST /v1/videos/sync` (`vllm serve MODEL --omni`): multipart/form-data fields of its
  VideoGenerationRequest (vllm-project/vllm-omni, vllm_omni/entrypoints/openai/protocol/videos.py at 079d7a56:
  prompt, negative_prompt, width, height, num_frames, fps, num_inference_steps, guidance_scale, guidance_scale_2,
  boundary_ratio, seed, model); it answers with the raw mp4 bytes (video/mp4) and X-Request-Id, X-Model and
  X-Inference-Time-S headers (vllm-omni pull request #2049, "Add synchronous video generation endpoint POST
  /v1/videos/sync", merged 2026-03), an error as JSON with a non-200 status. Its Wan 2.2 pipeline gives
  guidance_scale to the high-noise expert and guidance_scale_2 to the low-noise one, as diffusers' WanPipeline does
  (vllm_omni/diffusion/models/wan2_2/pipeline_wan2_2.py at be81443c, the denoising loop), whatever its protocol's
  field descriptions say, so the reference's 4.0 / 3.0 go in the same two fields.
- trtllm-serve's `POST /v1/videos/generations`, as MLCommons' endpoint client sends it (mlcommons/endpoints at
  ea332753, src/inference_endpoint/videogen/types.py VideoPathRequest and adapter.py VideoGenAdapter): a JSON body of
  prompt, negative_prompt, size "WxH", seconds, fps, num_frames, num_inference_steps, guidance_scale,
  guidance_scale_2, boundary_ratio, seed, output_format and response_format ("video_bytes" here: cmx keeps the
  mp4, it does not read a path on the server's disk). The answer is JSON {video_id, video_bytes (base64)}, or the raw
  mp4 (the adapter's note: some builds send video/mp4 whatever response_format says; NVIDIA/TensorRT-LLM's
  tensorrt_llm/serve/openai_video_routes.py at 0509ccc7 answers its sync route with a FileResponse), an error as
  JSON with a non-200 status.

What neither route carries: the fixed initial latent as a tensor. vllm-omni's form has no latent field; MLCommons'
request has an optional `latent_path`, a file on the server's own storage, which its examples leave unset; cmx sends
neither. A served run's videos therefore start from the server's own latent (drawn from the seed, or one the server
was configured to load), not the reference's fixed one, and the run records that (EndpointBackend's StartInfo).
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from cmx.mlperf.backends.diffusion import VideoSettings

MP4_TYPE = "video/mp4"


def omni_form(prompt: str, model: str, s: VideoSettings) -> dict[str, str]:
    """vllm-omni's /v1/videos/sync form fields for `prompt` under the run's settings (every value a string, as a
    form sends it). Width and height go as two fields, never `size`, which the server would read over them."""
    fields = {"prompt": prompt, "width": str(s.width), "height": str(s.height), "num_frames": str(s.frames),
              "fps": str(s.fps), "num_inference_steps": str(s.steps), "guidance_scale": repr(s.guidance_scale),
              "seed": str(s.seed)}
    if model:
        fields["model"] = model
    if s.negative_prompt:
        fields["negative_prompt"] = s.negative_prompt
    if s.guidance_scale_2 is not None:
        fields["guidance_scale_2"] = repr(s.guidance_scale_2)
    if s.boundary_ratio is not None:
        fields["boundary_ratio"] = repr(s.boundary_ratio)
    return fields


def trtllm_body(prompt: str, s: VideoSettings) -> dict[str, Any]:
    """trtllm-serve's /v1/videos/generations JSON body for `prompt`, as MLCommons' client builds it (no `model`: the
    server serves one). `size` is width x height; `seconds` is what the frames last at the fps (num_frames decides)."""
    body: dict[str, Any] = {"prompt": prompt, "size": f"{s.width}x{s.height}", "seconds": s.frames / s.fps,
                            "fps": s.fps, "num_frames": s.frames, "num_inference_steps": s.steps,
                            "guidance_scale": s.guidance_scale, "seed": s.seed, "output_format": "mp4",
                            "response_format": "video_bytes"}
    if s.negative_prompt:
        body["negative_prompt"] = s.negative_prompt
    if s.guidance_scale_2 is not None:
        body["guidance_scale_2"] = s.guidance_scale_2
    if s.boundary_ratio is not None:
        body["boundary_ratio"] = s.boundary_ratio
    return body


def is_mp4(data: bytes) -> bool:
    """An ISO media file: its first box is `ftyp`."""
    return len(data) >= 8 and data[4:8] == b"ftyp"


def omni_video(body: bytes, content_type: str) -> bytes:
    """The mp4 of a vllm-omni /v1/videos/sync answer. ValueError: not an mp4."""
    if not is_mp4(body):
        raise ValueError(f"not an mp4 ({describe(body, content_type)}); /v1/videos/sync answers with the video's bytes")
    return body


def trtllm_video(body: bytes, content_type: str) -> bytes:
    """The mp4 of a trtllm-serve /v1/videos/generations answer: the raw file, or JSON with `video_bytes` in base64.
    ValueError: neither (an answer with only a `video_path` names a file on the server's disk, which cmx does not
    read)."""
    if is_mp4(body):
        return body
    try:
        data = json.loads(body)
    except ValueError:
        raise ValueError(f"neither an mp4 nor JSON ({describe(body, content_type)})") from None
    encoded = data.get("video_bytes") if isinstance(data, dict) else None
    if not isinstance(encoded, str):
        path = data.get("video_path") if isinstance(data, dict) else None
        if path:
            raise ValueError(f"it gives a path on the server ({path}), not the video: the request asked for "
                             "response_format video_bytes")
        raise ValueError("JSON without video_bytes")
    try:
        video = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("video_bytes is not base64") from None
    if not is_mp4(video):
        raise ValueError(f"video_bytes is not an mp4 ({describe(video, '')})")
    return video


def describe(body: bytes, content_type: str) -> str:
    """A short account of an answer that is not a video, for a message: its type, size and first characters."""
    head = body[:80].decode("utf-8", "replace")
    return f"{content_type or 'no content type'}, {len(body)} bytes: {' '.join(head.split())!r}"


class Mp4Video(NamedTuple):
    """What an mp4's video track says of itself: its frame count and its frames' size in pixels."""

    frames: int
    width: int
    height: int


def mp4_video(data: bytes) -> Mp4Video:
    """The video track of an mp4 (ISO/IEC 14496-12): its frame count, the sample count of its sample table (moov >
    trak > mdia > minf > stbl > stsz), and its size, the track header's (tkhd) last two 16.16 fixed-point fields.
    ValueError: no video track, or a file that is not a complete mp4."""
    for trak in _children(data, 0, len(data), b"moov", b"trak"):
        if _handler(data, trak) != b"vide":
            continue
        tables = [s for s in _children(data, trak[0], trak[1], b"mdia", b"minf", b"stbl", b"stsz") if s[1] - s[0] >= 12]
        headers = [s for s in _children(data, trak[0], trak[1], b"tkhd") if s[1] - s[0] >= 84]
        if tables and headers:
            frames = struct.unpack(">I", data[tables[0][0] + 8:tables[0][0] + 12])[0]
            width, height = struct.unpack(">II", data[headers[0][1] - 8:headers[0][1]])
            return Mp4Video(int(frames), int(width) >> 16, int(height) >> 16)
    raise ValueError("the mp4 has no video track with a header (tkhd) and a sample table (stsz)")


def _boxes(data: bytes, start: int, end: int) -> list[tuple[bytes, int, int]]:
    """The boxes in data[start:end]: (type, payload start, payload end). ValueError: a box runs past the end."""
    found, at = [], start
    while at + 8 <= end:
        size, kind = struct.unpack(">I4s", data[at:at + 8])
        head = 8
        if size == 1:  # a 64-bit size follows the type
            if at + 16 > end:
                raise ValueError("the mp4 ends inside a box header")
            size, head = struct.unpack(">Q", data[at + 8:at + 16])[0], 16
        elif size == 0:  # the last box: to the end
            size = end - at
        if size < head or at + size > end:
            raise ValueError(f"the mp4's {kind.decode('latin-1')!r} box runs past the file's end (truncated?)")
        found.append((kind, at + head, at + size))
        at += size
    return found


def _children(data: bytes, start: int, end: int, *path: bytes) -> list[tuple[int, int]]:
    """The payload spans of every box at `path` below data[start:end] (each step a box type)."""
    spans = [(start, end)]
    for kind in path:
        spans = [(s, e) for (a, b) in spans for (k, s, e) in _boxes(data, a, b) if k == kind]
    return spans


def _handler(data: bytes, trak: tuple[int, int]) -> bytes:
    """A track's handler type ('vide', 'soun'): mdia > hdlr, after its version, flags and pre_defined."""
    for start, end in _children(data, trak[0], trak[1], b"mdia", b"hdlr"):
        if end - start >= 12:
            return data[start + 8:start + 12]
    return b""
