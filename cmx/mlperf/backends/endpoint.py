"""The endpoint backend: the Backend protocol over an OpenAI-compatible server (`vllm serve`, llm-d, Dynamo).

Every sample is one `POST {url}/completions` with the prompt as token ids, the config's sampling
(temperature, top_p, top_k, seed: the benchmark reference's), no penalties, `max_tokens` and
`min_tokens` from the request and `ignore_eos` false:

- Offline (`generate`): up to `max_concurrency` requests in flight, longest prompt first (as the
  in-process backend orders a batch), non-streaming; results come back as each request finishes.
- Server / Interactive (`submit`): one streaming request per sample, sent at once (no queue in
  the client: LoadGen's latency counts from its scheduled time). The first streamed token is
  `sink.on_first_token`, the end `sink.on_done`.

A speech model's sample (a clip with its decoder prompt: Whisper) is one `POST {url}/audio/transcriptions`
instead, Offline only: the clip as a WAV file, the prompt's language, streamed so that the answer ends
with its token count; its result is the text with that count (openai_api's module docstring says why).
The model folder (`EndpointConfig.tokenizer`) tells a speech model from a text one (its config.json).

A text-to-video prompt (a request with a `video`: Wan 2.2's) is one non-streaming POST to the video server the run
names (EndpointConfig.video_route: vllm-omni's /v1/videos/sync or trtllm-serve's /v1/videos/generations), with the
run's video settings; its answer is the mp4, written under the request's file name in the run's videos folder and
answered with its sha256, as the in-process diffusion engine answers (video_api's module docstring says what each
server takes; the fixed initial latent is not among it, and StartInfo.details says so). Its warm-up is one video of
two steps on each path, checked (frames asked for, an mp4) and not kept.

These ways (completions, streamed completions, transcriptions, chats, videos) are `routes.Route` values, which
`routes.route_for` picks from the request; each goes through the one post path of `endpoint_client.EndpointClient`
(the same in the worker processes of `endpoint_workers`), so no route has failures of its own.

A conversation (a request with a `chat`: Qwen3-VL's messages, its image among them) is one non-streaming
`POST {url}/chat/completions` in every scenario (its benchmark judges whole answers' latency, so Server
sends no first token); its result is the reply's text with the server's token count. A chat the server
refuses (HTTP 400, 413 or 422: a prompt beyond its context length, an image it cannot read) is answered
empty, as Qwen3-VL's reference answers a failed request, counted in `details()["refused_requests"]` and
logged; every other failure fails the sample as below. `EndpointConfig.chat` warms such a server up
through its chat route.

Output token ids come from the server where it returns them (vLLM's `return_token_ids`: the
ids of each streamed delta, or all of them in a non-streaming answer). A server that ignores
that field answers with text only: then the model's tokenizer (`EndpointConfig.tokenizer`)
re-tokenizes the text, and `StartInfo.details["token_ids_source"]` says which of the two a run
used ("server" or "tokenizer"). Every count is checked against the server's usage.completion_tokens
and the request's max_tokens (openai_api's module docstring says how), so a server answering with
neither ids nor a token count is an error, and so is text that re-tokenizes to another count.

HTTP: one aiohttp session (one connection pool, keep-alive; the client's) on an asyncio event loop in a thread
the backend owns (`loop_thread.LoopThread`): `start()` creates both, `stop()` cancels what is in
flight, closes the session and ends the loop, in the order loop_thread sets. `submit()` only schedules onto that
loop (thread-safe, microseconds), so nothing slow happens on LoadGen's issue thread.

Failures are never retried: a retried request would be timed from its retry, not from when
LoadGen issued it, so every failure (HTTP 5xx, a timeout, a lost connection, a malformed answer)
fails the sample with a BackendError that says why; Offline stops the batch at the first one
and says how many samples were lost. A request on any route that lost its connection (or had it
refused) makes the client ask whether the server is gone (endpoint_client's module docstring says how).
When it is, the request fails with BackendDead, and the SUT stops the test (an Offline batch's error is a
BackendDead too). A timeout, or any HTTP answer at all (a 5xx included), is no proof: a live server may
be slow or shedding load. The API key is a
`cmx.secrets.Secret`: sent as `Authorization: Bearer`, never logged, never in an error or in StartInfo.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import queue
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cmx.mlperf.backends.base import (
    Audio,
    BackendDefaults,
    BackendError,
    ChatPrompt,
    GenRequest,
    GenResult,
    StartInfo,
    StreamSink,
    VideoPrompt,
)
from cmx.mlperf.backends.batching import QueueSink, audio_warmup_requests, longest_first, warmup_requests
from cmx.mlperf.backends.endpoint_client import EndpointClient, EndpointConfig, batch_failure
from cmx.mlperf.backends.endpoint_workers import WorkerPool, WorkerSetup
from cmx.mlperf.backends.loop_thread import LoopThread, event_loop_factory
from cmx.mlperf.backends.openai_api import TextTokens, http_error, malformed, server_root, unreachable_error
from cmx.mlperf.backends.routes import (
    CHAT,
    IDS_PROBE,
    TRANSCRIPTIONS,
    VIDEO_ROUTES,
    Route,
    ServerSendsNoIds,
    route_for,
)
from cmx.secrets import public_url

CLOSE_TIMEOUT_S = 30.0  # for closing the session when the backend stops
DEFAULT_MAX_MODEL_LEN = 2048  # for sizing warm-up prompts when /v1/models does not say
WARMUP_CHAT = ChatPrompt(({"role": "user", "content": "Name three colours."},), max_tokens=8)
WARMUP_VIDEO = VideoPrompt("A red ball rolls across a wooden table.", "warm-up.mp4")  # the file is never written


# --- the backend ---------------------------------------------------------------------------------------


@dataclass
class _Batch:
    """One generate() call's progress (counted on the loop; read once it has ended)."""

    total: int
    sent: int = 0
    done: int = 0
    failed: BackendError | None = None
    results: queue.SimpleQueue[GenResult | None] = field(default_factory=queue.SimpleQueue)  # then None


class EndpointBackend(BackendDefaults):
    """The Backend protocol (cmx.mlperf.backends.base) over an OpenAI-compatible HTTP server.
    Construction only stores the config; `start()` connects, checks and warms up."""

    def __init__(self, config: EndpointConfig, logger: logging.Logger | None = None) -> None:
        self.config = config
        self.log = logger or logging.getLogger(__name__)
        self.token_ids_source: str | None = None  # "server" or "tokenizer", once started (or a text route's source)
        self._text_route: Route | None = None  # the route every sample takes when its answers are text, not ids
        self._loop: LoopThread | None = None
        self._client = EndpointClient(config, self.log)  # the session and every route's post, on the loop only
        self._pool: WorkerPool | None = None  # config.workers > 0: the worker processes, once started
        # a text-to-video run's route (its server, by config.video_route); None for a run answered in tokens
        self._video_route = VIDEO_ROUTES[config.video_route] if config.video is not None else None

    @property
    def url(self) -> str:
        return self._client.url

    @property
    def model(self) -> str | None:
        """The served model, once started."""
        return self._client.model

    @property
    def worker_pids(self) -> list[int]:
        """The client worker processes' ids, once started (none in-process): to measure what the client costs."""
        return self._pool.pids if self._pool is not None else []

    # -- start ------------------------------------------------------------------------------------------

    def start(self) -> StartInfo:
        if self._loop is not None:
            raise BackendError("the endpoint backend is already started")
        began = time.monotonic()
        loop = self._loop = LoopThread("cmx-endpoint-loop", self.log, close_timeout_s=CLOSE_TIMEOUT_S,
                                       loop_factory=event_loop_factory(self.config.event_loop))
        loop.start()
        loop.on_close(self._client.close)
        try:
            loop.call(self._client.open())
            server, max_model_len = loop.call(self._probe())
            connected = time.monotonic()
            warmups = self._warm_up(max_model_len)
            if self.config.workers:
                warmups += self._start_workers(max_model_len)
        except BaseException:
            self.stop()
            raise
        warmed = time.monotonic()
        output = (route.answers if (route := self._text_route) is not None
                  else f"token ids from the {self.token_ids_source}")
        self.log.info("endpoint %s: model %s on %s %s; output as %s; warm-up: %d requests in %.1f s",
                      public_url(self.url), self.model, server["software"] or "an unnamed server",
                      server["version"] or "", output, warmups, warmed - connected)
        engine = {"url": public_url(self.url), "model": self.model, "server": server,
                  "max_concurrency": self.config.max_concurrency, "request_timeout_s": self.config.request_timeout_s,
                  "client_workers": self.config.workers}
        # the engine's limits as the server states them (vLLM's /v1/models gives max_model_len; no
        # OpenAI route gives max_num_seqs): cmx's own engine settings are not what a server it
        # did not start runs with
        return StartInfo(engines=(engine,), start_seconds=connected - began, warmup_requests=warmups,
                         warmup_seconds=warmed - connected,
                         details={"transport": "http", "url": public_url(self.url), "model": self.model,
                                  "server_software": server["software"], "server_version": server["version"],
                                  "server_max_model_len": max_model_len,
                                  "server_lists_models": server.get("lists_models", True),
                                  "token_ids_source": self.token_ids_source, **self._video_details()})

    def _video_details(self) -> dict[str, Any]:
        """A text-to-video run's route and what it could not send: the fixed initial latent (no video route carries
        one), so the server's own latent (from the seed, or one it was configured to load) made the videos."""
        if self._video_route is None or self.config.video is None:
            return {}
        latent = self.config.video.latent
        return {"video_route": self.config.video_route, "video_path": self._video_route.path,
                "fixed_latent": str(latent) if latent else None,
                "fixed_latent_sent": False}

    async def _probe(self) -> tuple[dict[str, Any], int | None]:
        """Check that the server answers and serves the model; what it says it is, and the
        model's max_model_len where it says (vLLM does)."""
        import aiohttp

        url = f"{self.url}/models"
        try:
            status, text, headers = await self._client.get(url)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise unreachable_error(exc, url=self.url, key_given=bool(self.config.api_key)) from None
        if status == 404 and self.config.model is not None:
            # a router with no listing (vLLM's disaggregation proxy has only the completion routes): the model is
            # the one named, and the server says nothing of itself; a wrong URL fails at the first request instead
            self.log.warning("%s has no GET /models (HTTP 404): using the model named, %s; the server's software and "
                             "max_model_len are unknown", public_url(url), self.config.model)
            self._client.model = self.config.model
            return {"software": None, "version": None, "owned_by": None, "http_server": headers.get("Server"),
                    "lists_models": False}, None
        if status != 200:
            raise http_error(status, text, url=url, what="GET /models", key_given=bool(self.config.api_key))
        try:
            listed = {str(m["id"]): m for m in json.loads(text)["data"]}
        except (ValueError, KeyError, TypeError):
            raise malformed("GET /models", url, "no 'data' list of models with ids") from None
        wanted = self.config.model
        if wanted is None and len(listed) == 1:
            wanted = next(iter(listed))
        elif wanted is None:
            raise BackendError(f"the server serves {len(listed)} models ({', '.join(listed) or 'none'}) and no "
                               "model was named", where=public_url(self.url),
                               hint="name the served model (endpoint_model)")
        elif wanted not in listed:
            raise BackendError(f"the server does not serve a model {wanted!r}; its /v1/models lists: "
                               f"{', '.join(listed) or 'nothing'}", where=public_url(self.url),
                               hint="name one of those (endpoint_model)")
        self._client.model = wanted
        entry = listed[wanted]
        max_model_len = entry.get("max_model_len")
        return await self._server_facts(entry, headers), max_model_len if isinstance(max_model_len, int) else None

    async def _server_facts(self, entry: dict[str, Any], headers: Any) -> dict[str, Any]:
        """The server's software and version as it reports them: vLLM lists its models as
        owned_by "vllm" and has GET /version; other servers give what they give."""
        owner = entry.get("owned_by")
        version = None
        try:
            status, text, _ = await self._client.get(f"{server_root(self.url)}/version")
            version = json.loads(text).get("version") if status == 200 else None
        except Exception as exc:  # noqa: BLE001 - /version is vLLM's own; another server need not have it
            self.log.debug("no GET /version: %s", exc)
        return {"software": "vLLM" if owner == "vllm" else owner,
                "version": version if isinstance(version, str) else None,
                "owned_by": owner, "http_server": headers.get("Server")}

    def _warm_up(self, max_model_len: int | None) -> int:
        """A few requests on both paths before LoadGen's timed window. The first also shows
        whether the server returns token ids (config.token_ids "auto"). Returns their number.
        A speech model's: transcriptions of a second of silence, the only path it takes, in the
        vocabulary's first language (Whisper's <|en|>, after <|startoftranscript|>): a server left to detect
        the language of silence may fail (vLLM's asserts that a random model's guess is a language)."""
        if self._video_route is not None:  # text-to-video prompts only, on both paths; each answer an mp4
            assert self.config.videos is not None
            self.config.videos.mkdir(parents=True, exist_ok=True)
            self._use_text_route(self._video_route)
            return self._on_both_paths([GenRequest(id=-1, prompt_ids=[], video=WARMUP_VIDEO)])
        if self.config.chat:  # conversations only, on both paths; their answers are text with the server's count
            self._use_text_route(CHAT)
            return self._on_both_paths([GenRequest(id=-(i + 1), prompt_ids=[], chat=WARMUP_CHAT)
                                        for i in range(max(1, self.config.warmup_requests))])
        start = speech_decoder_start(self.config.tokenizer)
        if start is not None:
            assert self.config.tokenizer is not None
            vocab = self._client.speech = TextTokens(self.config.tokenizer)
            self._use_text_route(TRANSCRIPTIONS)  # no ids: the route's text, with the server's token count
            prompt = [start, start + 1, *(vocab.id_of(t) or -1 for t in ("<|transcribe|>", "<|notimestamps|>"))]
            requests = [replace(r, prompt_ids=prompt)
                        for r in audio_warmup_requests(max(1, self.config.warmup_requests), start)]
            for _ in self.generate(requests):
                pass
            return len(requests)
        requests = warmup_requests(max(1, self.config.warmup_requests), max_model_len or DEFAULT_MAX_MODEL_LEN)
        wanted = self.config.token_ids
        if wanted == "tokenizer":
            self._use_tokenizer()
        else:
            self.token_ids_source = "server"
            if not self._started().call(self._server_sends_ids(requests[0], probe=wanted == "auto")):
                if self.config.tokenizer is None:
                    raise BackendError(f"the server at {public_url(self.url)} returns no output token ids "
                                       "(vLLM's return_token_ids)",
                                       hint="give the model's tokenizer folder (tokenizer) to re-tokenize its text")
                self.log.warning("the server returns no token ids: its text is re-tokenized with %s, each count "
                                 "checked against the server's usage.completion_tokens", self.config.tokenizer)
                self._use_tokenizer()
        return self._on_both_paths(requests) + (wanted != "tokenizer")

    def _start_workers(self, max_model_len: int | None) -> int:
        """Start the worker processes (what start() found goes with them) and warm each up; the warm-up requests."""
        if (route := self._text_route) is not None:
            raise BackendError(f"client worker processes ({self.config.workers}) send text completions only, not "
                               f"{route.text_source}s",
                               hint="run this benchmark with client_workers=0 (the HTTP in the harness process)")
        assert self.model is not None
        setup = WorkerSetup(config=replace(self.config, api_key=None), model=self.model,
                            tokenizer=tokens.folder if (tokens := self._client.tokens) is not None else None, index=0)
        key = self.config.api_key.reveal() if self.config.api_key else None
        self._pool = WorkerPool(setup, key, self.config.workers, self.log).start()
        count = max(self.config.warmup_requests, self.config.workers)  # one at least for each worker
        return self._on_both_paths(warmup_requests(count, max_model_len or DEFAULT_MAX_MODEL_LEN))

    def _on_both_paths(self, requests: list[GenRequest]) -> int:
        """`requests` as one Offline batch, then the first again through submit() (Server's path); their number."""
        for _ in self.generate(requests):
            pass
        sink = QueueSink()
        self.submit(requests[0], sink)
        if isinstance(item := sink.queue.get(), BaseException):
            raise item
        return len(requests) + 1

    def _use_text_route(self, route: Route) -> None:
        self._text_route = route
        self.token_ids_source = route.text_source

    def _use_tokenizer(self) -> None:
        assert self.config.tokenizer is not None
        self._client.tokens = TextTokens(self.config.tokenizer)
        self.token_ids_source = "tokenizer"

    def _started(self) -> LoopThread:
        if self._loop is None or self._client.session is None:
            raise BackendError("the endpoint backend is not started", hint="call start() first")
        return self._loop

    # -- Offline ------------------------------------------------------------------------------------------

    def generate(self, requests: Sequence[GenRequest]) -> Iterator[GenResult]:
        """Every request's result as it finishes (any order), `max_concurrency` in flight, longest
        prompt first. The first failure stops the batch with a BackendError that says how many
        samples were completed, lost in flight and never sent."""
        loop = self._started()
        if not requests:
            return iter(())
        refuse_media(requests, speech=self._client.speech is not None)
        if self._pool is not None:
            return self._pool.generate(requests, self.config.max_concurrency)
        batch = _Batch(total=len(requests))
        future = loop.submit(self._run_batch(longest_first(requests), batch))
        return self._results(batch, future)

    def _results(self, batch: _Batch, future: concurrent.futures.Future[None]) -> Iterator[GenResult]:
        try:
            while (item := batch.results.get()) is not None:
                yield item
            future.result()
        finally:
            future.cancel()  # when the caller stopped early; a no-op once the batch has ended
        if batch.failed is not None:
            raise batch_failure(batch.failed, done=batch.done, sent=batch.sent, total=batch.total)

    async def _run_batch(self, ordered: list[GenRequest], batch: _Batch) -> None:
        pending = iter(ordered)  # shared by the workers: each takes the next request when it is free

        async def worker() -> None:
            for request in pending:
                batch.sent += 1
                try:
                    result = await self._client.post(route_for(request, streamed=False, video=self._video_route),
                                                     request)
                except BackendError as exc:
                    if batch.failed is None:
                        batch.failed = exc
                        for task in tasks:  # stop the batch: the others' requests are lost
                            if task is not asyncio.current_task():
                                task.cancel()
                    return
                batch.done += 1
                batch.results.put(result)

        tasks = [asyncio.create_task(worker()) for _ in range(min(self.config.max_concurrency, batch.total))]
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            for task in tasks:
                task.cancel()
            batch.results.put(None)

    async def _server_sends_ids(self, request: GenRequest, *, probe: bool) -> bool:
        """One completion (start()'s first request); with `probe` (config.token_ids "auto"), an answer with a choice
        but without token ids says False instead of failing."""
        try:
            await self._client.post(IDS_PROBE if probe else route_for(request, streamed=False), request)
        except ServerSendsNoIds:
            return False
        return True

    def details(self) -> dict[str, Any]:
        """The chats the server refused so far (answered empty), for a chat run."""
        return {"refused_requests": self._client.refused} if self.config.chat else {}

    # -- Server / Interactive -------------------------------------------------------------------------

    def submit(self, request: GenRequest, sink: StreamSink) -> None:
        """Send one streaming request and return at once (the request starts on the backend's loop)."""
        refuse_media([request], speech=self._client.speech is not None, streamed=True)
        if self._pool is not None:
            self._pool.submit(request, sink)
            return
        self._started().spawn(self._stream(request, sink))

    async def _stream(self, request: GenRequest, sink: StreamSink) -> None:
        try:  # a chat is not streamed: no first token, the whole answer at once
            route = route_for(request, streamed=True, video=self._video_route)
            result = await self._client.post(route, request, sink if route.streams else None)
        except BackendError as exc:
            self.log.error("%s", exc.message)
            sink.on_error(request.id, exc)
            return
        except Exception as exc:  # noqa: BLE001 - any failure goes to the sink, which must hear of it
            what = f"streaming {request.name}"
            self.log.error("%s failed: %s", what, exc)
            sink.on_error(request.id, BackendError(f"{what} failed: {type(exc).__name__}: {exc}"))
            return
        sink.on_done(result)

    # -- stop -----------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the worker processes (if any), cancel the requests in flight (no callback), close the connections
        and end the loop."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop()
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.close()


def refuse_media(requests: Sequence[GenRequest], *, speech: bool, streamed: bool = False) -> None:
    """What the endpoint cannot send is refused before any request is sent, never sent without its media: a clip
    goes only to a speech model's transcription route, Offline (not `streamed`), one clip a request; nothing else
    goes with a prompt."""
    for r in requests:
        if not r.media:
            continue
        if streamed:
            why = "a streamed request (Server, Interactive): it sends clips Offline only"
        elif not speech:
            why = "a text model's request: it posts token ids to /v1/completions"
        elif len(r.media) != 1 or not isinstance(r.media[0], Audio):
            why = f"one request with {len(r.media)} clips: the transcription route takes one audio file"
        else:
            continue
        raise BackendError(f"{r.name} carries {type(r.media[0]).__name__.lower()}, which the endpoint "
                           f"backend cannot send in {why}",
                           hint="run this benchmark with vLLM in the harness process (drop _endpoint)")


def speech_decoder_start(model_dir: Path | None) -> int | None:
    """A speech model's decoder start token, from the config.json in `model_dir`; None for a text model (or no
    folder, or no config.json)."""
    from cmx.mlperf.backends.machine import ProfileError, model_facts

    path = model_dir / "config.json" if model_dir is not None else None
    if path is None or not path.is_file():
        return None
    try:
        return model_facts(json.loads(path.read_text(encoding="utf-8"))).audio_decoder_start
    except (ValueError, ProfileError):
        return None
