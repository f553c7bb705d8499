"""The endpoint backend's HTTP client: its config, one aiohttp session, and the one post path every route takes.

`EndpointClient.post(route, request)` sends one sample through a `routes.Route` on the running event loop and
reads its answer; the same code for the four routes, in the LoadGen process (`endpoint.EndpointBackend`) and in a
worker process (`endpoint_workers`), so bodies, parsing, checks, messages and the dead-server policy are one:

- an HTTP status other than 200 is `openai_api.http_error` (but a status the route answers empty, `Route.refused`,
  for a sample, not a warm-up: counted in `refused` and logged);
- an answer that is not what the route sends is `openai_api.malformed`;
- a video route's answer (`Route.raw`) is read as bytes: its mp4 is written under the request's file name in the run's
  videos folder (a warm-up's is checked and not kept), and the result carries the file, its sha256 (the one
  cmx.tools.fs.sha256_file the in-process diffusion engine answers with), frame count and fps;
- a request with no complete answer (a timeout, a lost or refused connection) is `openai_api.transport_error`,
  after the dead-server policy: when the connection was lost or refused, a fresh GET /models on a connection of its
  own asks whether the server is gone (refused, no route to the host, reset before any answer). When it is, the
  request, and every later one, fails with BackendDead ("the server at URL stopped answering (why)"), and the SUT
  stops the test. A timeout, or any HTTP answer at all (a 5xx included), is no proof: a live server may be slow or
  shedding load. The requests that fail together wait for one probe.

Failures are never retried (openai_api.NO_RETRY says why).

The hot routes (`Route.lean`: completions, streamed or not, what Offline, Server and Interactive send) go through
http1.Http1Client, not aiohttp, on a plain http:// URL without credentials: their bodies pre-encoded once per sample
(msgspec; `_body_bytes`), their streams split and decoded on bytes as each read arrives. The same checks and errors
follow either way; an https:// URL, or one with credentials, sends them through aiohttp (TLS and Basic auth stay
aiohttp's, tested there, and rare on a benchmark's endpoint). Every other route, the GETs and the dead-server probe
stay on aiohttp.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.mlperf.backends.base import (
    GREEDY,
    BackendDead,
    BackendError,
    GenRequest,
    GenResult,
    Sampling,
    StreamSink,
    Video,
)
from cmx.mlperf.backends.http1 import Http1Client, Reply
from cmx.mlperf.backends.loop_thread import event_loop_factory
from cmx.mlperf.backends.openai_api import (
    SseBuffer,
    TextTokens,
    api_base,
    http_error,
    malformed,
    refuse_two_credentials,
    transport_error,
)
from cmx.mlperf.backends.routes import (
    DEFAULT_VIDEO_ROUTE,
    VIDEO_ROUTES,
    Payload,
    Reader,
    Route,
    RouteContext,
    VideoAnswer,
)
from cmx.secrets import Secret, public_url
from cmx.tools.fs import sha256_file

if TYPE_CHECKING:
    from cmx.mlperf.backends.diffusion import VideoSettings

# Offline: requests in flight at once. Enough to keep any one server's batch full (vLLM's
# max_num_seqs is 256 to 1024 in the published MLPerf set-ups); requests beyond the server's
# batch wait in its queue, where they cost a socket and nothing else.
DEFAULT_MAX_CONCURRENCY = 1024
DEFAULT_REQUEST_TIMEOUT_S = 600.0
CONNECT_TIMEOUT_S = 10.0
# Idle keep-alive connections are dropped before uvicorn's own 5 s timeout (vLLM's default
# VLLM_HTTP_TIMEOUT_KEEP_ALIVE), so the client never sends on a connection the server is closing,
# which would look like a lost server and fail a sample.
KEEPALIVE_TIMEOUT_S = 4.0
# Whether the server is gone, after a request lost its connection: a fresh GET /models that gets no
# connection at all is proof; one still unanswered after this long is not (a slow server)
DEAD_PROBE_TIMEOUT_S = 5.0
GONE_ERRNOS = {errno.ECONNREFUSED: "connection refused", errno.EHOSTUNREACH: "no route to the host",
               errno.ENETUNREACH: "network unreachable", errno.ECONNRESET: "connection reset"}
TOKEN_IDS_SOURCES = ("auto", "server", "tokenizer")
# a video warm-up's denoising steps: one of each of Wan 2.2's experts (the in-process engine's WARMUP_STEPS), so that
# a warm-up costs two steps of the server's time, not a whole video's
VIDEO_WARMUP_STEPS = 2
JSON = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class EndpointConfig:
    """url: the API's base, e.g. http://127.0.0.1:8000/v1 (routes are appended to it).
    model: the served model's name; None takes the only one /v1/models lists.
    api_key: sent as a Bearer token; None sends none.
    request_timeout_s: the most one request may take, from sending it to its last byte.
    max_concurrency: Offline requests in flight at once (Server sends each sample at once).
    tokenizer: the model's folder: its tokenizer.json re-tokenizes text from a server that returns no token
        ids, and its config.json tells a speech model (whose samples go to the transcription route).
    token_ids: "auto" (the server's ids when its answers carry them, else the tokenizer),
        "server" (fail without them) or "tokenizer" (always re-tokenize the text).
    warmup_requests: non-streaming warm-up requests in start() (one streaming request follows).
    sampling: how every request (warm-up included) chooses its tokens, sent in each request body.
    chat: the samples are conversations (the benchmark's ChatSource): warm up through the chat route.
    workers: 0 does the HTTP on a thread of this process; N > 0 in N worker processes (endpoint_workers), for
        more requests and streamed tokens a second than one process parses. Text completions only.
    send_min_tokens: False leaves min_tokens out of the request body (for vLLM's disaggregation proxy, which
        copies it into a max_tokens=1 prefill request that vLLM refuses); an answer shorter than the request's
        min_tokens still fails its sample.
    video: a text-to-video run's settings (the benchmark's, in the run's shape), sent with every prompt; None for a
        run whose answers are tokens. videos: the folder each video is written to (the run's <output>/videos).
    video_route: the video server's route, a name in routes.VIDEO_ROUTES ("vllm-omni" or "trtllm-serve").
    event_loop: the loop the HTTP runs on, in this process and in each worker: "auto" (uvloop's on Linux where it is
        installed, else asyncio's), "uvloop" or "asyncio" (loop_thread.event_loop_factory).
    """

    url: str
    model: str | None = None
    api_key: Secret | None = None
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    tokenizer: Path | None = None
    token_ids: str = "auto"
    warmup_requests: int = 4
    sampling: Sampling = GREEDY
    chat: bool = False
    workers: int = 0
    send_min_tokens: bool = True
    video: VideoSettings | None = None
    videos: Path | None = None
    video_route: str = DEFAULT_VIDEO_ROUTE
    event_loop: str = "auto"

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise BackendError(f"endpoint url {public_url(self.url)!r} is not an http:// or https:// URL",
                               hint="give the API's base, e.g. http://127.0.0.1:8000/v1")
        refuse_two_credentials(self.url, bool(self.api_key))
        if self.max_concurrency < 1:
            raise BackendError(f"max_concurrency must be at least 1, not {self.max_concurrency}")
        if self.workers < 0:
            raise BackendError(f"workers must be 0 (in-process) or more, not {self.workers}",
                               hint="give the number of client worker processes, e.g. the client's cores")
        if self.request_timeout_s <= 0:
            raise BackendError(f"request_timeout_s must be positive, not {self.request_timeout_s}")
        if self.token_ids not in TOKEN_IDS_SOURCES:
            raise BackendError(f"unknown token_ids source {self.token_ids!r}", hint=" or ".join(TOKEN_IDS_SOURCES))
        if self.token_ids == "tokenizer" and self.tokenizer is None:
            raise BackendError("token_ids='tokenizer' needs the model's tokenizer folder",
                               hint="give EndpointConfig(tokenizer=MODEL_DIR)")
        if self.video_route not in VIDEO_ROUTES:
            raise BackendError(f"unknown video route {self.video_route!r}", hint=" or ".join(VIDEO_ROUTES))
        event_loop_factory(self.event_loop)  # refuses an unknown kind, and uvloop asked for where it is missing
        if self.video is not None and self.videos is None:
            raise BackendError("a text-to-video run needs the folder its videos are written to",
                               hint="give EndpointConfig(videos=OUTPUT/videos)")


def lost_connection(exc: BaseException) -> bool:
    """`exc` is a refused or lost connection (not a timeout, not an answer): the server may be gone."""
    import aiohttp

    return isinstance(exc, (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError,
                            ConnectionError))


def batch_failure(failed: BackendError, *, done: int, sent: int, total: int) -> BackendError:
    """An Offline batch's error: its first failure, with the samples completed, lost in flight and never sent; of
    the first failure's class, so that a dead server's batch is a BackendDead as its requests are."""
    error = type(failed)(f"{failed.message}; {done} of {total} samples completed, {sent - done} in flight were lost, "
                         f"{total - sent} not sent", where=failed.where, hint=failed.hint)
    error.counted = True
    return error


class EndpointClient:
    """One aiohttp session on the running event loop (`open()` to `close()`) and the post path of every route. What
    start() settles (the model; the tokenizer where ids are re-tokenized; a speech model's vocabulary) is set on it
    before the first post. Touched on its loop only."""

    def __init__(self, config: EndpointConfig, logger: logging.Logger) -> None:
        self.config = config
        self.log = logger
        self.url = api_base(config.url)
        self.model: str | None = None
        self.tokens: TextTokens | None = None  # set when the ids come from re-tokenizing
        self.speech: TextTokens | None = None  # a speech model's vocabulary (its prompts' language)
        self.refused = 0  # samples the server refused, answered empty
        self.session: Any = None
        self.lean: Http1Client | None = None  # the hot routes' client; None: they go through aiohttp too
        self._heads: dict[str, tuple[bytes, bytes]] = {}  # a lean route's request bytes around its Content-Length
        # a sample's encoded body, by (route path, streams, sample, max_tokens, min_tokens, whether the server's ids
        # are asked for), kept with the prompt ids it was encoded from: LoadGen issues a sample many times, and its
        # ids are the QSL's one sequence. The model and sampling are the run's, settled before the first sample
        self._bodies: dict[tuple[str, bool, int, int, int, bool], tuple[object, bytes]] = {}
        self._in_flight = 0  # requests sent and not answered
        self._gone: str | None = None  # why the server is known dead
        self._dead_probe: asyncio.Future[str | None] | None = None  # the probe the failing requests share

    async def open(self) -> None:
        import aiohttp

        headers = {}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key.reveal()}"
        # no limit on connections: Offline bounds itself (max_concurrency workers), and a Server
        # sample must never wait in the client for a free connection
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE_TIMEOUT_S)
        # one timeout for a whole request, sending to last byte; no read timeout of its own: a
        # long prefill in a full batch may keep a stream silent for a while
        timeout = aiohttp.ClientTimeout(total=self.config.request_timeout_s, sock_connect=CONNECT_TIMEOUT_S)
        self.session = aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers)
        if self.url.startswith("http://") and public_url(self.url) == self.url:
            self.lean = Http1Client(self.url, headers, connect_timeout_s=CONNECT_TIMEOUT_S,
                                    keepalive_s=KEEPALIVE_TIMEOUT_S)

    async def close(self) -> None:
        lean, self.lean = self.lean, None
        if lean is not None:
            lean.close()
        session, self.session = self.session, None
        if session is not None:
            await session.close()

    async def get(self, url: str) -> tuple[int, str, Any]:
        async with self.session.get(url) as response:
            return response.status, await response.text(), response.headers

    def context(self, request: GenRequest | None = None) -> RouteContext:
        """What every body and reader needs; a video warm-up's settings take VIDEO_WARMUP_STEPS steps."""
        video = self.config.video
        if video is not None and request is not None and request.id < 0:
            video = replace(video, steps=min(video.steps, VIDEO_WARMUP_STEPS))
        return RouteContext(model=self.model or "", sampling=self.config.sampling, tokens=self.tokens,
                            speech=self.speech, min_tokens=self.config.send_min_tokens, video=video,
                            save_video=self._save_video)

    async def post(self, route: Route, request: GenRequest, sink: StreamSink | None = None) -> GenResult:
        """One request through `route`; a streamed answer's first token to `sink` (None: nobody waits for it)."""
        import aiohttp

        url, what, context = f"{self.url}{route.path}", route.what(request), self.context(request)
        reader = route.reader(request, context, url)
        self._in_flight += 1
        try:
            if route.lean and self.lean is not None:
                reply = await self._post_lean(self.lean, route, request, context, reader, sink)
                if reply.status != 200:
                    return self._refused(route, request, reply.status, reply.body.decode("utf-8", "replace"), url,
                                         what)
                if not route.streams:
                    reader.add_bytes(reply.body)
                return reader.result()
            payload = route.body(request, context)
            async with self.session.post(url, **self._sent(payload)) as response:
                if response.status != 200:
                    return self._refused(route, request, response.status, await response.text(), url, what)
                if route.raw:
                    assert isinstance(reader, VideoAnswer), "a raw route's reader takes the body's bytes"
                    reader.add_body(await response.read(), response.headers.get("Content-Type", ""))
                elif route.streams:
                    events = SseBuffer()
                    async for chunk in response.content.iter_any():
                        for event in events.feed_bytes(chunk):
                            if (first := reader.add_bytes(event)) is not None and sink is not None:
                                sink.on_first_token(request.id, first)
                else:
                    reader.add(await response.text())
            return reader.result()
        except ValueError as exc:
            raise malformed(what, url, str(exc), hint=route.hint) from None
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            await self._raise_if_dead(exc)
            error = transport_error(exc, url=url, what=what, timeout_s=self.config.request_timeout_s)
            if sink is None:
                raise error from None
            raise BackendError(f"{error.message} ({self._in_flight} streaming requests were in flight)",
                               where=error.where, hint=error.hint) from None
        finally:
            self._in_flight -= 1

    async def _post_lean(self, lean: Http1Client, route: Route, request: GenRequest, context: RouteContext,
                         reader: Reader, sink: StreamSink | None) -> Reply:
        """`request` through the lean client: a streamed answer's events read as each read arrives, its first token
        to `sink` from there."""
        head = self._heads.get(route.path)
        if head is None:
            head = self._heads[route.path] = lean.request_head(route.path)
        body = self._body_bytes(route, request, context)
        if not route.streams:
            return await lean.post(head, body, None, self.config.request_timeout_s)
        events, rid = SseBuffer(), request.id

        def on_body(data: bytes) -> None:
            for event in events.feed_bytes(data):
                if (first := reader.add_bytes(event)) is not None and sink is not None:
                    sink.on_first_token(rid, first)

        return await lean.post(head, body, on_body, self.config.request_timeout_s)

    def _body_bytes(self, route: Route, request: GenRequest, context: RouteContext) -> bytes:
        """`request`'s JSON body through `route`, encoded once per sample (a warm-up's, or a request without a
        sample, every time)."""
        import msgspec

        key = None
        if request.sample is not None:
            key = (route.path, route.streams, request.sample, request.max_tokens, request.min_tokens,
                   context.tokens is None)
            cached = self._bodies.get(key)
            if cached is not None and cached[0] is request.prompt_ids:
                return cached[1]
        payload = route.body(request, context)
        assert payload.json is not None, "a lean route's body is JSON"
        body = msgspec.json.encode(payload.json)
        if key is not None:
            self._bodies[key] = (request.prompt_ids, body)
        return body

    @staticmethod
    def _sent(payload: Payload) -> dict[str, Any]:
        """aiohttp's arguments for `payload`: a JSON body, or a multipart form with its file."""
        import aiohttp

        if payload.json is not None:
            return {"data": json.dumps(payload.json), "headers": JSON}
        form = aiohttp.FormData(default_to_multipart=True)  # multipart even without a file: the servers' forms are
        for name, value in (payload.fields or {}).items():
            form.add_field(name, value)
        if payload.file is not None:
            form.add_field("file", payload.file.data, filename=payload.file.name,
                           content_type=payload.file.content_type)
        return {"data": form}

    def _save_video(self, request: GenRequest, mp4: bytes, frames: int) -> GenResult:
        """`request`'s video: its mp4 written as request.video.file_name in the videos folder (never half-written
        under its name), answered with its sha256; a warm-up's is not kept (its path is empty)."""
        video = self.config.video
        assert request.video is not None and video is not None and self.config.videos is not None
        path: Path | None = None
        if request.id >= 0:
            folder = request.video.folder or self.config.videos  # the test's, which the SUT names
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / request.video.file_name
            partial = path.with_name(f".{path.stem}.partial{path.suffix}")
            partial.write_bytes(mp4)
            os.replace(partial, path)
            digest = sha256_file(path)
        else:
            digest = hashlib.sha256(mp4).hexdigest()
        return GenResult(id=request.id, token_ids=[], finish_reason="stop",
                         video=Video(str(path) if path is not None else "", digest, frames, video.fps))

    def _refused(self, route: Route, request: GenRequest, status: int, body: str, url: str, what: str) -> GenResult:
        """The empty answer to a sample the server will not serve (a status in `route.refused`, as the benchmark's
        reference answers a failed request); any other status, or a warm-up's refusal (nothing would run), fails."""
        error = http_error(status, body, url=url, what=what, key_given=bool(self.config.api_key))
        if status not in route.refused or request.id < 0:
            raise error
        self.refused += 1
        self.log.warning("%s; it is answered empty, as the reference answers a failed request, and scores as an "
                         "unparsable reply", error.message)
        return GenResult(id=request.id, token_ids=[], finish_reason="refused", text="", count=0)

    # -- a dead server ------------------------------------------------------------------------------------

    async def _raise_if_dead(self, exc: BaseException) -> None:
        """BackendDead when `exc` lost the connection (or had it refused) and the server no longer takes a fresh
        one; nothing when it does. The requests that fail together wait for one probe."""
        if self._gone is None and lost_connection(exc):
            if self._dead_probe is None or self._dead_probe.done():
                self._dead_probe = asyncio.ensure_future(self._why_gone())
            reason = await asyncio.shield(self._dead_probe)
            self._gone = self._gone or reason  # an older probe that found the server alive changes nothing
        if self._gone is not None:
            raise BackendDead(f"the server at {public_url(self.url)} stopped answering ({self._gone})",
                              hint="see the server's log for why it stopped; the test stopped at once, since no "
                                   "later sample could be answered") from None

    async def _why_gone(self) -> str | None:
        """Why a fresh GET /models gets no connection (refused, no route, reset before any answer); None
        when it gets an answer, whatever its status, or is still waiting after DEAD_PROBE_TIMEOUT_S."""
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=DEAD_PROBE_TIMEOUT_S)
        # a connection of its own: one from the pool may be a stale keep-alive that proves nothing
        try:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True), timeout=timeout) as s, \
                    s.get(f"{self.url}/models"):
                return None
        except aiohttp.ServerDisconnectedError:
            return "connection closed before any answer"
        except OSError as err:  # aiohttp's connection errors are OSErrors; a timeout is one too, with no errno
            return GONE_ERRNOS.get(err.errno) if err.errno else None
        except aiohttp.ClientError:
            return None
