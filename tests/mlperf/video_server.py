"""A stand-in video server for tests: both served text-to-video routes over real HTTP on 127.0.0.1, answered with the
mp4s of a diffusers pipeline (the tiny Wan 2.2) run by cmx's own DiffusionBackend.

It speaks what the real servers speak (cmx.mlperf.backends.video_api's module docstring cites where each is read):
- GET /v1/models: the served model, as vLLM and trtllm-serve list it;
- POST /v1/videos/sync (vllm-omni): multipart form fields, answered with the raw mp4 (video/mp4) and vllm-omni's
  X-Request-Id, X-Model and X-Inference-Time-S headers;
- POST /v1/videos/generations (trtllm-serve, as MLCommons' client sends it): a JSON body, answered with JSON
  {video_id, video_bytes: base64 of the mp4} for response_format video_bytes, else the raw mp4;
- a request it cannot read: HTTP 400 with an error JSON, as both servers answer one.

Neither route carries the fixed initial latent, so the server loads one it is configured with (--latent FILE), as a
real server would have to be for a run to start from the reference's latent; without it, each video starts from a
latent drawn from the request's seed. Run it as `python -m tests.mlperf.video_server --model DIR [--latent FILE]`:
it prints `listening on PORT` once it serves.
"""

from __future__ import annotations

import argparse
import base64
import email.parser
import email.policy
import json
import logging
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

from cmx.errors import CmxError
from cmx.mlperf.backends.base import GenRequest, VideoPrompt
from cmx.mlperf.backends.diffusion import DiffusionBackend, DiffusionBackendConfig, VideoSettings

# what a request leaves out: the reference's shape is never assumed here, only what a real server's defaults would be
DEFAULTS = VideoSettings(height=32, width=32, frames=5, fps=16, steps=2, seed=0, guidance_scale=5.0)


class VideoServer:
    """The pipeline behind both routes: one video at a time, its settings from the request."""

    def __init__(self, model: Path, latent: Path | None, name: str, work: Path) -> None:
        self.name = name
        self.latent = latent
        self.base = DiffusionBackendConfig(model=model, settings=replace(DEFAULTS, latent=latent), videos=work,
                                           warmup=False)
        self.backend = DiffusionBackend(self.base, logging.getLogger("video-server"))
        self.videos = 0

    def generate(self, prompt: str, settings: VideoSettings) -> bytes:
        self.backend.config = replace(self.base, settings=replace(settings, latent=self.latent))
        self.videos += 1
        result = self.backend.video(GenRequest(id=self.videos, prompt_ids=[],
                                               video=VideoPrompt(prompt, f"video-{self.videos}.mp4")))
        assert result.video is not None
        path = Path(result.video.path)
        data = path.read_bytes()
        path.unlink()
        return data


def settings_of(fields: dict[str, Any]) -> VideoSettings:
    """The request's settings over the server's defaults (ValueError: a field of the wrong type or missing)."""
    width, height = DEFAULTS.width, DEFAULTS.height
    if fields.get("size"):
        width, height = (int(v) for v in str(fields["size"]).split("x"))
    width, height = int(fields.get("width", width)), int(fields.get("height", height))
    optional = {k: float(fields[k]) for k in ("guidance_scale_2", "boundary_ratio") if k in fields}
    return replace(DEFAULTS, width=width, height=height, frames=int(fields.get("num_frames", DEFAULTS.frames)),
                   fps=int(fields.get("fps", DEFAULTS.fps)),
                   steps=int(fields.get("num_inference_steps", DEFAULTS.steps)),
                   seed=int(fields.get("seed", DEFAULTS.seed)),
                   guidance_scale=float(fields.get("guidance_scale", DEFAULTS.guidance_scale)),
                   negative_prompt=str(fields.get("negative_prompt", "")), **optional)  # type: ignore[arg-type]


def form_fields(content_type: str, body: bytes) -> dict[str, str]:
    """A multipart/form-data body's text fields."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    if not message.is_multipart():
        raise ValueError("not a multipart/form-data body")
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if name and isinstance(payload, bytes):
            fields[str(name)] = payload.decode("utf-8")
    return fields


def handler(server: VideoServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, data: Any) -> None:
            self._send(status, json.dumps(data).encode(), "application/json")

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": server.name, "object": "model",
                                                              "owned_by": "video-server"}]})
            else:
                self._json(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            content_type = self.headers.get("Content-Type", "")
            began = time.perf_counter()
            try:
                if self.path == "/v1/videos/sync":
                    fields: dict[str, Any] = form_fields(content_type, body)
                elif self.path == "/v1/videos/generations":
                    fields = json.loads(body)
                else:
                    self._json(404, {"detail": "Not Found"})
                    return
                prompt = fields["prompt"]
                settings = settings_of(fields)
            except (ValueError, KeyError, TypeError, CmxError) as exc:
                self._json(400, {"error": {"message": f"bad request: {exc!r}", "type": "BadRequestError",
                                           "code": 400}})
                return
            mp4 = server.generate(prompt, settings)
            video_id = f"video_{uuid.uuid4().hex}"
            if self.path == "/v1/videos/sync":
                self._send(200, mp4, "video/mp4", {"X-Request-Id": video_id, "X-Model": server.name,
                                                   "X-Inference-Time-S": f"{time.perf_counter() - began:.3f}"})
            elif fields.get("response_format") == "video_bytes":
                self._json(200, {"video_id": video_id, "video_bytes": base64.b64encode(mp4).decode()})
            else:
                self._send(200, mp4, "video/mp4")

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a diffusers pipeline folder")
    parser.add_argument("--latent", type=Path, default=None, help="the initial latent every video starts from")
    parser.add_argument("--served-name", default="tiny-wan")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="video-server-") as work:
        video_server = VideoServer(args.model, args.latent, args.served_name, Path(work))
        video_server.backend.start()
        httpd = HTTPServer(("127.0.0.1", args.port), handler(video_server))
        print(f"listening on {httpd.server_address[1]}", flush=True)
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            httpd.server_close()
            video_server.backend.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
