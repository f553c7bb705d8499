"""The endpoint's request routes as data: each one's path, request body, answer reader and whether it streams.

A `Route` is what differs between the four ways the endpoint backend asks an OpenAI-compatible server for a
sample's answer; everything else (the post, the HTTP status, a malformed answer, a lost connection, a dead
server) is the one post path of `endpoint_client.EndpointClient`, the same for all four:

- COMPLETIONS: a text prompt's token ids, one JSON answer (Offline);
- STREAMED: the same body with `stream`, its answer as server-sent events whose first token goes to
  LoadGen at once (Server, Interactive);
- CHAT: a conversation (a benchmark's messages), one JSON answer in every scenario; a refused one (HTTP 400,
  413, 422: over the context length, an image the server cannot read) is answered empty;
- TRANSCRIPTIONS: a speech model's clip as a WAV file, streamed for its last chunk's token count.

`route_for` picks one from the request and the path that sends it. Pure: no I/O here (openai_api's rules
build and read the bytes), so a new route is one more value.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol

from cmx.mlperf.backends.base import Audio, GenRequest, GenResult, Sampling
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
    output token id on the event that brings it, once; `result` the sample's result. ValueError: malformed."""

    def add(self, payload: str) -> int | None: ...

    def result(self) -> GenResult: ...


@dataclass(frozen=True)
class Route:
    """path: appended to the API's base. verb: how messages name the request ("streaming " + its name).
    body: the request's payload. reader: a fresh reader for its answer (from `url`). streams: the answer is
    server-sent events, read as they come; else one JSON body. refused: statuses answered empty (a sample the
    server will not serve, never a warm-up), counted by the backend. text_source, answers: a route whose answers
    are text the server counts, never token ids: the run's token_ids_source ("chat", "transcription") and what
    the log calls its answers; "" for the completions routes, whose ids are the server's or the tokenizer's."""

    path: str
    verb: str
    body: Callable[[GenRequest, RouteContext], Payload]
    reader: Callable[[GenRequest, RouteContext, str], Reader]
    streams: bool
    refused: frozenset[int] = frozenset()
    text_source: str = ""
    answers: str = ""

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

    def result(self) -> GenResult:
        return self._parse(self._data)


class ServerSendsNoIds(Exception):
    """The probe's answer has a choice without token ids: the server does not return them."""


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


COMPLETIONS = Route("/completions", "", _completion_body(stream=False), _completion_reader, streams=False)
STREAMED = Route("/completions", "streaming ", _completion_body(stream=True), _stream_reader, streams=True)
CHAT = Route("/chat/completions", "", _chat_body, _chat_reader, streams=False, refused=REFUSED_STATUSES,
             text_source="chat", answers="chat replies")
TRANSCRIPTIONS = Route("/audio/transcriptions", "transcribing ", _transcription_body, _transcript_reader,
                       streams=True, text_source="transcription", answers="transcription text")
# start()'s first completion, when token_ids is "auto": an answer without ids raises ServerSendsNoIds
IDS_PROBE = replace(COMPLETIONS, reader=_ids_probe_reader)


def route_for(request: GenRequest, *, streamed: bool) -> Route:
    """The route of `request`, sent through submit() (`streamed`) or generate(): a clip to transcriptions, a
    conversation to chat (never streamed: its benchmark judges whole answers), token ids to completions."""
    if request.media:
        return TRANSCRIPTIONS
    if request.chat is not None:
        return CHAT
    return STREAMED if streamed else COMPLETIONS
