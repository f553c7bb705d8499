"""The endpoint's request routes as data: each one's path, request body, answer reader and whether it streams.

A `Route` is what differs between the four ways the endpoint backend asks an OpenAI-compatible server for a
sample's answer; everything else (the post, the HTTP status, a malformed answer, a lost connection, a dead
server) is the one post path of `endpoint_client.EndpointClient`, the same for all four:

- COMPLETIONS: a text prompt's token ids, one JSON answer (Offline);
- STREAMED: the same body with `stream`, its answer as server-sent events whose first token goes to
  LoadGen at once (Server, Interactive);
- CHAT: a conversation (a benchmark's messages), one JSON answer in every scenario; a refused one (HTTP 400,
  413, 422: over the context length, an image the server cannot read) is answered empty;
- TRANSCRIPTIONS: a speech model's clip as a WAV file, streamed for its last chunk's token count;
- a text-to-video prompt to one of VIDEO_ROUTES, the registry of video servers a run picks from by name
  (EndpointConfig.video_route): vllm-omni's /v1/videos/sync (form fields) or trtllm-serve's /v1/videos/generations
  (JSON), each answered with an mp4 (`raw`: bytes, not text), which the client writes to the run's videos folder
  (video_api's module docstring says what each sends and takes back).

`route_for` picks one from the request and the path that sends it. Pure: no I/O here (openai_api's and video_api's
rules build and read the bytes; a video is written by the save function the client puts in the context), so a new
route is one more value.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from cmx.mlperf.backends.base import Audio, BackendError, GenRequest, GenResult, Sampling
from cmx.mlperf.backends.openai_api import (
    StreamAssembler,
    TextTokens,
    TranscriptAssembler,
    chat_body,
    chat_result,
    completion_body,
    completion_result,
    parse_answer,
    transcription_form,
    transcription_language,
    wav_bytes,
)
from cmx.mlperf.backends.video_api import mp4_video, omni_form, omni_video, trtllm_body, trtllm_video

if TYPE_CHECKING:
    from cmx.mlperf.backends.diffusion import VideoSettings

# what a server answers a request it will not serve (a prompt over its context length, an image it cannot read):
# a chat so refused is answered empty, as the benchmark's reference answers any failed request
REFUSED_STATUSES = frozenset({400, 413, 422})


@dataclass(frozen=True)
class RouteContext:
    """What the started backend settled that every body and reader needs."""

    model: str
    sampling: Sampling
    tokens: TextTokens | None = None  # re-tokenizes a server's text (it returns no ids); None: the server's ids
    speech: TextTokens | None = None  # a speech model's vocabulary: its decoder prompts' language
    min_tokens: bool = True  # EndpointConfig.send_min_tokens
    video: VideoSettings | None = None  # a text-to-video run's settings (a warm-up's: fewer steps)
    save_video: SaveVideo | None = None  # writes a video's mp4 where the run keeps it (the client's I/O)


class SaveVideo(Protocol):
    """Writes one request's mp4 (its bytes and frame count) and returns the request's result."""

    def __call__(self, request: GenRequest, mp4: bytes, frames: int) -> GenResult: ...


class FilePart(NamedTuple):
    """A file sent as a multipart form field."""

    name: str
    data: bytes
    content_type: str


@dataclass(frozen=True)
class Payload:
    """A request body: a JSON object, or form fields with a file."""

    json: dict[str, Any] | None = None
    fields: dict[str, str] | None = None
    file: FilePart | None = None


class Reader(Protocol):
    """One answer's reader: `add` takes a streamed event's payload (or a whole answer's body) and returns the first
    output token id on the event that brings it, once (`add_bytes`: the same from a streamed event's bytes); `result`
    the sample's result. ValueError: malformed."""

    def add(self, payload: str) -> int | None: ...

    def add_bytes(self, payload: bytes) -> int | None:
        """`add` of a streamed event's payload as the stream's bytes (the hot path decodes no str)."""
        ...

    def result(self) -> GenResult: ...


@dataclass(frozen=True)
class Route:
    """path: appended to the API's base. verb: how messages name the request ("streaming " + its name).
    body: the request's payload. reader: a fresh reader for its answer (from `url`). streams: the answer is
    server-sent events, read as they come; else one JSON body. refused: statuses answered empty (a sample the
    server will not serve, never a warm-up), counted by the backend. text_source, answers: a route whose answers
    are text the server counts, never token ids: the run's token_ids_source ("chat", "transcription") and what
    the log calls its answers; "" for the completions routes, whose ids are the server's or the tokenizer's.
    raw: the answer is a file's bytes (an mp4), handed to the reader's `add_body` with its content type.
    hint: what a malformed answer's message advises (None: openai_api's, for OpenAI's routes).
    lean: a hot route (a JSON body, a JSON or server-sent-events answer) that the client sends through its lean
    HTTP/1.1 client (endpoint_client's module docstring), not aiohttp."""

    path: str
    verb: str
    body: Callable[[GenRequest, RouteContext], Payload]
    reader: Callable[[GenRequest, RouteContext, str], Reader]
    streams: bool
    refused: frozenset[int] = frozenset()
    text_source: str = ""
    answers: str = ""
    raw: bool = False
    hint: str | None = None
    lean: bool = False

    def what(self, request: GenRequest) -> str:
        return f"{self.verb}{request.name}"


class WholeAnswer:
    """A non-streaming answer: its one body, read by `parse` (ValueError when malformed)."""

    def __init__(self, parse: Callable[[Any], GenResult]) -> None:
        self._parse = parse
        self._data: Any = None

    def add(self, payload: str) -> int | None:
        self._data = json.loads(payload)
        return None

    def add_bytes(self, payload: bytes) -> int | None:
        return self.add(payload.decode("utf-8"))

    def result(self) -> GenResult:
        return self._parse(self._data)


class ServerSendsNoIds(Exception):
    """The probe's answer has a choice without token ids: the server does not return them."""


class VideoAnswer:
    """A video route's answer: its body's bytes, read by `read` (ValueError when it carries no mp4), its frames counted
    and its size read and both checked against the run's (a server that ignored a field made another video than the
    run's), then saved by the context's save function."""

    def __init__(self, request: GenRequest, ctx: RouteContext, read: Callable[[bytes, str], bytes]) -> None:
        self._request, self._ctx, self._read = request, ctx, read
        self._mp4: bytes | None = None

    def add(self, payload: str) -> int | None:
        raise ValueError("a video route's answer is bytes (add_body), not text")

    def add_bytes(self, payload: bytes) -> int | None:
        raise ValueError("a video route's answer is one body (add_body), not events")

    def add_body(self, body: bytes, content_type: str) -> None:
        self._mp4 = self._read(body, content_type)

    def result(self) -> GenResult:
        ctx = self._ctx
        assert self._mp4 is not None and ctx.video is not None and ctx.save_video is not None
        got, want = mp4_video(self._mp4), ctx.video
        if got.frames != want.frames:
            raise ValueError(f"the mp4 has {got.frames} frames, and {want.frames} were asked for")
        if (got.width, got.height) != (want.width, want.height):
            raise ValueError(f"the mp4's frames are {got.width}x{got.height} (width x height), and {want.width}x"
                             f"{want.height} were asked for")
        return ctx.save_video(self._request, self._mp4, got.frames)


def _completion_body(stream: bool) -> Callable[[GenRequest, RouteContext], Payload]:
    def body(request: GenRequest, ctx: RouteContext) -> Payload:
        return Payload(json=completion_body(request, ctx.model, ctx.sampling, stream=stream,
                                            server_token_ids=ctx.tokens is None, min_tokens=ctx.min_tokens))
    return body


def _completion_reader(request: GenRequest, ctx: RouteContext, url: str) -> Reader:
    return WholeAnswer(lambda data: completion_result(request, data, ctx.tokens, url))


def _ids_probe_reader(request: GenRequest, ctx: RouteContext, url: str) -> Reader:
    def parse(data: Any) -> GenResult:
        # only an answer with a choice tells whether the server returns ids; an empty `choices` is its own error
        # (completion_result's), not a server without ids
        if (answer := parse_answer(data)).has_choice and answer.token_ids is None:
            raise ServerSendsNoIds
        return completion_result(request, data, ctx.tokens, url)
    return WholeAnswer(parse)


def _stream_reader(request: GenRequest, ctx: RouteContext, url: str) -> Reader:
    return StreamAssembler(request, ctx.tokens, url)


def _chat_body(request: GenRequest, ctx: RouteContext) -> Payload:
    assert request.chat is not None
    return Payload(json=chat_body(request.chat, ctx.model, ctx.sampling))


def _chat_reader(request: GenRequest, ctx: RouteContext, url: str) -> Reader:
    return WholeAnswer(lambda data: chat_result(request, data, url))


def _transcription_body(request: GenRequest, ctx: RouteContext) -> Payload:
    clip = request.media[0]
    assert isinstance(clip, Audio) and ctx.speech is not None
    language = transcription_language([ctx.speech.token(i) for i in request.prompt_ids])
    return Payload(fields=transcription_form(request, ctx.model, ctx.sampling, language),
                   file=FilePart(f"sample-{request.id}.wav", wav_bytes(clip), "audio/wav"))


def _transcript_reader(request: GenRequest, ctx: RouteContext, url: str) -> Reader:
    return TranscriptAssembler(request, url)  # its add() gives no first token: a transcription is sent Offline


def _video(request: GenRequest, ctx: RouteContext) -> tuple[str, VideoSettings]:
    assert request.video is not None and ctx.video is not None, "a video route takes a video request in a video run"
    return request.video.text, ctx.video


def _omni_body(request: GenRequest, ctx: RouteContext) -> Payload:
    prompt, settings = _video(request, ctx)
    return Payload(fields=omni_form(prompt, ctx.model, settings))


def _trtllm_body(request: GenRequest, ctx: RouteContext) -> Payload:
    prompt, settings = _video(request, ctx)
    return Payload(json=trtllm_body(prompt, settings))


def _omni_reader(request: GenRequest, ctx: RouteContext, url: str) -> Reader:
    return VideoAnswer(request, ctx, omni_video)


def _trtllm_reader(request: GenRequest, ctx: RouteContext, url: str) -> Reader:
    return VideoAnswer(request, ctx, trtllm_video)


COMPLETIONS = Route("/completions", "", _completion_body(stream=False), _completion_reader, streams=False, lean=True)
STREAMED = Route("/completions", "streaming ", _completion_body(stream=True), _stream_reader, streams=True, lean=True)
CHAT = Route("/chat/completions", "", _chat_body, _chat_reader, streams=False, refused=REFUSED_STATUSES,
             text_source="chat", answers="chat replies, with the server's token count")
TRANSCRIPTIONS = Route("/audio/transcriptions", "transcribing ", _transcription_body, _transcript_reader,
                       streams=True, text_source="transcription",
                       answers="transcription text, with the server's token count")
# a video has no first token and no token count: not streamed, its answer the mp4 written to the videos folder
VIDEOS_SYNC = Route("/videos/sync", "generating the video of ", _omni_body, _omni_reader, streams=False,
                    text_source="video", answers="mp4 videos (vllm-omni's /v1/videos/sync)", raw=True,
                    hint="the endpoint must be vllm-omni's (vllm serve MODEL --omni), which answers /v1/videos/sync "
                         "with the mp4")
VIDEO_GENERATIONS = Route("/videos/generations", "generating the video of ", _trtllm_body, _trtllm_reader,
                          streams=False, text_source="video",
                          answers="mp4 videos (trtllm-serve's /v1/videos/generations)", raw=True,
                          hint="the endpoint must be trtllm-serve's, which answers /v1/videos/generations with the "
                               "mp4 or its base64 (video_bytes)")
# the video servers a run picks from by name (EndpointConfig.video_route; the app's --input video_route)
VIDEO_ROUTES: dict[str, Route] = {"vllm-omni": VIDEOS_SYNC, "trtllm-serve": VIDEO_GENERATIONS}
DEFAULT_VIDEO_ROUTE = "vllm-omni"
# start()'s first completion, when token_ids is "auto": an answer without ids raises ServerSendsNoIds
IDS_PROBE = replace(COMPLETIONS, reader=_ids_probe_reader)


def route_for(request: GenRequest, *, streamed: bool, video: Route | None = None) -> Route:
    """The route of `request`, sent through submit() (`streamed`) or generate(): a clip to transcriptions, a
    conversation to chat (never streamed: its benchmark judges whole answers), a text-to-video prompt to the run's
    `video` route (one of VIDEO_ROUTES), token ids to completions."""
    if request.video is not None:
        if video is None:
            raise BackendError(f"{request.name} is a text-to-video prompt, and the endpoint backend was started "
                               "without the run's video settings", hint="a text-to-video benchmark's run gives them")
        return video
    if request.media:
        return TRANSCRIPTIONS
    if request.chat is not None:
        return CHAT
    return STREAMED if streamed else COMPLETIONS
