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

HTTP: one aiohttp session (one connection pool, keep-alive) on an asyncio event loop in a thread
the backend owns (`loop_thread.LoopThread`): `start()` creates both, `stop()` cancels what is in
flight, closes the session and ends the loop, in the order loop_thread sets. `submit()` only schedules onto that
loop (thread-safe, microseconds), so nothing slow happens on LoadGen's issue thread.

Failures are never retried: a retried request would be timed from its retry, not from when
LoadGen issued it, so every failure (HTTP 5xx, a timeout, a lost connection, a malformed answer)
fails the sample with a BackendError that says why; Offline stops the batch at the first one
and says how many samples were lost. A streaming request that lost its connection (or had it
refused) makes the backend ask whether the server is gone (`_raise_if_dead`): it is when a fresh
connection for GET /models is refused, finds no route to the host, or is reset before any answer.
Then the request fails with BackendDead, and the SUT stops the test. A timeout, or any HTTP answer
at all (a 5xx included), is no proof: a live server may be slow or shedding load. The API key is a
`cmx.secrets.Secret`: sent as `Authorization: Bearer`, never logged, never in an error or in StartInfo.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import json
import logging
import queue
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.mlperf.backends.base import (
    GREEDY,
    Audio,
    BackendDead,
    BackendDefaults,
    BackendError,
    ChatPrompt,
    GenRequest,
    GenResult,
    Sampling,
    StartInfo,
    StreamSink,
)
from cmx.mlperf.backends.batching import QueueSink, audio_warmup_requests, longest_first, warmup_requests
from cmx.mlperf.backends.loop_thread import LoopThread
from cmx.mlperf.backends.openai_api import (
    SseBuffer,
    StreamAssembler,
    TextTokens,
    TranscriptAssembler,
    api_base,
    chat_body,
    chat_result,
    completion_body,
    completion_result,
    http_error,
    malformed,
    parse_answer,
    public_url,
    refuse_two_credentials,
    server_root,
    transcription_form,
    transcription_language,
    transport_error,
    unreachable_error,
    wav_bytes,
)
from cmx.secrets import Secret

if TYPE_CHECKING:
    from cmx.mlperf.backends.endpoint_workers import WorkerPool

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
CLOSE_TIMEOUT_S = 30.0  # for closing the session when the backend stops
DEFAULT_MAX_MODEL_LEN = 2048  # for sizing warm-up prompts when /v1/models does not say
# Whether the server is gone, after a streaming request lost its connection: a fresh GET /models
# that gets no connection at all is proof; one still unanswered after this long is not (a slow server)
DEAD_PROBE_TIMEOUT_S = 5.0
GONE_ERRNOS = {errno.ECONNREFUSED: "connection refused", errno.EHOSTUNREACH: "no route to the host",
               errno.ENETUNREACH: "network unreachable", errno.ECONNRESET: "connection reset"}
TOKEN_IDS_SOURCES = ("auto", "server", "tokenizer")
JSON = {"Content-Type": "application/json"}
# what a server answers a request it will not serve (a prompt over its context length, an image it cannot read):
# a chat so refused is answered empty, as Qwen3-VL's reference answers any failed request
REFUSED_STATUSES = frozenset({400, 413, 422})
WARMUP_CHAT = ChatPrompt(({"role": "user", "content": "Name three colours."},), max_tokens=8)


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


def lost_connection(exc: BaseException) -> bool:
    """`exc` is a refused or lost connection (not a timeout, not an answer): the server may be gone."""
    import aiohttp

    return isinstance(exc, (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError,
                            ConnectionError))


# --- the backend ---------------------------------------------------------------------------------------


@dataclass
class _Batch:
    """One generate() call's progress (counted on the loop; read once it has ended)."""

    total: int
    sent: int = 0
    done: int = 0
    failed: BackendError | None = None
    results: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)


_FINISHED = object()  # the batch's last item on its results queue


class EndpointBackend(BackendDefaults):
    """The Backend protocol (cmx.mlperf.backends.base) over an OpenAI-compatible HTTP server.
    Construction only stores the config; `start()` connects, checks and warms up."""

    def __init__(self, config: EndpointConfig, logger: logging.Logger | None = None) -> None:
        self.config = config
        self.log = logger or logging.getLogger(__name__)
        self.model: str | None = None
        self.token_ids_source: str | None = None  # "server" or "tokenizer", once started
        self._tokens: TextTokens | None = None  # set when the ids come from re-tokenizing
        self._loop: LoopThread | None = None
        self._session: Any = None
        self._in_flight = 0  # requests sent and not answered; touched on the loop only
        self._gone: str | None = None  # why the server is known dead (on the loop only)
        self._dead_probe: asyncio.Future[str | None] | None = None  # the probe the failing streams share
        self._speech: TextTokens | None = None  # a speech model's vocabulary (its prompts' language), once started
        self._refused = 0  # chats the server refused, answered empty (on the loop only)
        self._pool: WorkerPool | None = None  # config.workers > 0: the worker processes, once started

    @property
    def url(self) -> str:
        return api_base(self.config.url)

    @property
    def worker_pids(self) -> list[int]:
        """The client worker processes' ids, once started (none in-process): to measure what the client costs."""
        return self._pool.pids if self._pool is not None else []

    # -- start ------------------------------------------------------------------------------------------

    async def _open_session(self) -> None:
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
        self._session = aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers)

    async def _close_session(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def start(self) -> StartInfo:
        if self._loop is not None:
            raise BackendError("the endpoint backend is already started")
        began = time.monotonic()
        loop = self._loop = LoopThread("cmx-endpoint-loop", self.log, close_timeout_s=CLOSE_TIMEOUT_S)
        loop.start()
        loop.on_close(self._close_session)
        try:
            loop.call(self._open_session())
            server, max_model_len = loop.call(self._probe())
            connected = time.monotonic()
            warmups = self._warm_up(max_model_len)
            if self.config.workers:
                warmups += self._start_workers(max_model_len)
        except BaseException:
            self.stop()
            raise
        warmed = time.monotonic()
        output = ("transcription text, with the server's token count" if self.token_ids_source == "transcription"
                  else "chat replies, with the server's token count" if self.token_ids_source == "chat"
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
                                  "token_ids_source": self.token_ids_source})

    async def _get(self, url: str) -> tuple[int, str, Any]:
        async with self._session.get(url) as response:
            return response.status, await response.text(), response.headers

    async def _probe(self) -> tuple[dict[str, Any], int | None]:
        """Check that the server answers and serves the model; what it says it is, and the
        model's max_model_len where it says (vLLM does)."""
        import aiohttp

        url = f"{self.url}/models"
        try:
            status, text, headers = await self._get(url)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise unreachable_error(exc, url=self.url, key_given=bool(self.config.api_key)) from None
        if status == 404 and self.config.model is not None:
            # a router with no listing (vLLM's disaggregation proxy has only the completion routes): the model is
            # the one named, and the server says nothing of itself; a wrong URL fails at the first request instead
            self.log.warning("%s has no GET /models (HTTP 404): using the model named, %s; the server's software and "
                             "max_model_len are unknown", public_url(url), self.config.model)
            self.model = self.config.model
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
        self.model = wanted
        entry = listed[wanted]
        max_model_len = entry.get("max_model_len")
        return await self._server_facts(entry, headers), max_model_len if isinstance(max_model_len, int) else None

    async def _server_facts(self, entry: dict[str, Any], headers: Any) -> dict[str, Any]:
        """The server's software and version as it reports them: vLLM lists its models as
        owned_by "vllm" and has GET /version; other servers give what they give."""
        owner = entry.get("owned_by")
        version = None
        try:
            status, text, _ = await self._get(f"{server_root(self.url)}/version")
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
        if self.config.chat:  # conversations only, on both paths; their answers are text with the server's count
            self.token_ids_source = "chat"
            return self._on_both_paths([GenRequest(id=-(i + 1), prompt_ids=[], chat=WARMUP_CHAT)
                                        for i in range(max(1, self.config.warmup_requests))])
        start = speech_decoder_start(self.config.tokenizer)
        if start is not None:
            assert self.config.tokenizer is not None
            vocab = self._speech = TextTokens(self.config.tokenizer)
            self.token_ids_source = "transcription"  # no ids: the route's text, with the server's token count
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
            if self._started().call(self._complete(requests[0], probe=wanted == "auto")) is None:
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
        from cmx.mlperf.backends.endpoint_workers import WorkerPool, WorkerSetup

        if self.token_ids_source in ("chat", "transcription"):
            raise BackendError(f"client worker processes ({self.config.workers}) send text completions only, not "
                               f"{'chats' if self.token_ids_source == 'chat' else 'transcriptions'}",
                               hint="run this benchmark with client_workers=0 (the HTTP in the harness process)")
        assert self.model is not None
        setup = WorkerSetup(config=replace(self.config, api_key=None), model=self.model,
                            tokenizer=self._tokens.folder if self._tokens is not None else None, index=0)
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

    def _use_tokenizer(self) -> None:
        assert self.config.tokenizer is not None
        self._tokens = TextTokens(self.config.tokenizer)
        self.token_ids_source = "tokenizer"

    def _started(self) -> LoopThread:
        if self._loop is None or self._session is None:
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
        refuse_media(requests, speech=self._speech is not None)
        if self._pool is not None:
            return self._pool.generate(requests, self.config.max_concurrency)
        batch = _Batch(total=len(requests))
        future = loop.submit(self._run_batch(longest_first(requests), batch))
        return self._results(batch, future)

    def _results(self, batch: _Batch, future: concurrent.futures.Future[None]) -> Iterator[GenResult]:
        try:
            while (item := batch.results.get()) is not _FINISHED:
                yield item
            future.result()
        finally:
            future.cancel()  # when the caller stopped early; a no-op once the batch has ended
        if batch.failed is not None:
            lost = batch.sent - batch.done
            raise BackendError(f"{batch.failed.message}; {batch.done} of {batch.total} samples completed, {lost} in "
                               f"flight were lost, {batch.total - batch.sent} not sent", where=batch.failed.where,
                               hint=batch.failed.hint)

    async def _run_batch(self, ordered: list[GenRequest], batch: _Batch) -> None:
        pending = iter(ordered)  # shared by the workers: each takes the next request when it is free

        async def worker() -> None:
            for request in pending:
                batch.sent += 1
                try:
                    result = await self._complete(request)
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
            batch.results.put(_FINISHED)

    async def _complete(self, request: GenRequest, probe: bool = False) -> GenResult | None:
        """One non-streaming request. With `probe` (start()'s first request when config.token_ids
        is "auto"), an answer without token ids gives None instead of an error."""
        import aiohttp

        if request.media:
            return await self._transcribe(request)
        if request.chat is not None:
            return await self._chat(request)
        url, what = f"{self.url}/completions", request.name
        body = completion_body(request, self.model or "", self.config.sampling, stream=False,
                               server_token_ids=self._tokens is None, min_tokens=self.config.send_min_tokens)
        self._in_flight += 1
        try:
            async with self._session.post(url, data=json.dumps(body), headers=JSON) as response:
                text = await response.text()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise transport_error(exc, url=url, what=what, timeout_s=self.config.request_timeout_s) from None
        finally:
            self._in_flight -= 1
        if response.status != 200:
            raise http_error(response.status, text, url=url, what=what, key_given=bool(self.config.api_key))
        try:
            data = json.loads(text)
            # only an answer with a choice tells whether the server returns ids; an empty `choices`
            # is its own error (completion_result's), not a server without ids
            if probe and (answer := parse_answer(data)).has_choice and answer.token_ids is None:
                return None
            return completion_result(request, data, self._tokens, url)
        except ValueError as exc:
            raise malformed(what, url, str(exc)) from None

    async def _transcribe(self, request: GenRequest) -> GenResult:
        """One clip through the transcription route, streamed (its last chunk holds the token count)."""
        import aiohttp

        url, what = f"{self.url}/audio/transcriptions", f"transcribing {request.name}"
        clip = request.media[0]
        assert isinstance(clip, Audio) and self._speech is not None
        language = transcription_language([self._speech.token(i) for i in request.prompt_ids])
        form = aiohttp.FormData()
        for name, value in transcription_form(request, self.model or "", self.config.sampling, language).items():
            form.add_field(name, value)
        form.add_field("file", wav_bytes(clip), filename=f"sample-{request.id}.wav", content_type="audio/wav")
        answer, events = TranscriptAssembler(request, url), SseBuffer()
        self._in_flight += 1
        try:
            async with self._session.post(url, data=form) as response:
                if response.status != 200:
                    raise http_error(response.status, await response.text(), url=url, what=what,
                                     key_given=bool(self.config.api_key))
                async for chunk in response.content.iter_any():
                    for payload in events.feed(chunk):
                        answer.add(payload)
            return answer.result()
        except ValueError as exc:
            raise malformed(what, url, str(exc)) from None
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise transport_error(exc, url=url, what=what, timeout_s=self.config.request_timeout_s) from None
        finally:
            self._in_flight -= 1

    async def _chat(self, request: GenRequest) -> GenResult:
        """One conversation through the chat route, not streamed; a sample the server refuses (REFUSED_STATUSES) is
        answered empty and counted (a warm-up request's refusal is an error: nothing would run)."""
        import aiohttp

        assert request.chat is not None
        url, what = f"{self.url}/chat/completions", request.name
        body = chat_body(request.chat, self.model or "", self.config.sampling)
        self._in_flight += 1
        try:
            async with self._session.post(url, data=json.dumps(body), headers=JSON) as response:
                text = await response.text()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            await self._raise_if_dead(exc)
            raise transport_error(exc, url=url, what=what, timeout_s=self.config.request_timeout_s) from None
        finally:
            self._in_flight -= 1
        if response.status != 200:
            error = http_error(response.status, text, url=url, what=what, key_given=bool(self.config.api_key))
            if response.status not in REFUSED_STATUSES or request.id < 0:
                raise error
            self._refused += 1
            self.log.warning("%s; it is answered empty, as the reference answers a failed request, and scores as an "
                             "unparsable reply", error.message)
            return GenResult(id=request.id, token_ids=[], finish_reason="refused", text="", count=0)
        try:
            return chat_result(request, json.loads(text), url)
        except ValueError as exc:
            raise malformed(what, url, str(exc)) from None

    def details(self) -> dict[str, Any]:
        """The chats the server refused so far (answered empty), for a chat run."""
        return {"refused_requests": self._refused} if self.config.chat else {}

    # -- Server / Interactive -------------------------------------------------------------------------

    def submit(self, request: GenRequest, sink: StreamSink) -> None:
        """Send one streaming request and return at once (the request starts on the backend's loop)."""
        refuse_media([request], speech=self._speech is not None, streamed=True)
        if self._pool is not None:
            self._pool.submit(request, sink)
            return
        self._started().spawn(self._stream(request, sink))

    async def _stream(self, request: GenRequest, sink: StreamSink) -> None:
        try:  # a chat is not streamed: no first token, the whole answer at once
            result = await (self._chat(request) if request.chat is not None else self._stream_request(request, sink))
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

    async def _stream_request(self, request: GenRequest, sink: StreamSink) -> GenResult:
        import aiohttp

        url, what = f"{self.url}/completions", f"streaming {request.name}"
        body = completion_body(request, self.model or "", self.config.sampling, stream=True,
                               server_token_ids=self._tokens is None, min_tokens=self.config.send_min_tokens)
        stream, events = StreamAssembler(request, self._tokens, url), SseBuffer()
        self._in_flight += 1
        try:
            async with self._session.post(url, data=json.dumps(body), headers=JSON) as response:
                if response.status != 200:
                    raise http_error(response.status, await response.text(), url=url, what=what,
                                     key_given=bool(self.config.api_key))
                async for chunk in response.content.iter_any():
                    for payload in events.feed(chunk):
                        if (first := stream.add(payload)) is not None:
                            sink.on_first_token(request.id, first)
            return stream.result()
        except ValueError as exc:
            raise malformed(what, url, str(exc)) from None
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            await self._raise_if_dead(exc)
            error = transport_error(exc, url=url, what=what, timeout_s=self.config.request_timeout_s)
            raise BackendError(f"{error.message} ({self._in_flight} streaming requests were in flight)",
                               where=error.where, hint=error.hint) from None
        finally:
            self._in_flight -= 1

    # -- a dead server ------------------------------------------------------------------------------------

    async def _raise_if_dead(self, exc: BaseException) -> None:
        """BackendDead when `exc` lost the connection (or had it refused) and the server no longer takes a fresh
        one; nothing when it does. The streams that fail together wait for one probe."""
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

    # -- in a worker process (endpoint_workers) -------------------------------------------------------

    async def attach(self, model: str, tokens: TextTokens | None) -> None:
        """Serve completions on the running event loop, without start()'s thread, probe and warm-up: a worker
        process's use, with what the started backend found (the model; the tokenizer where ids are re-tokenized)."""
        self.model, self._tokens = model, tokens
        self.token_ids_source = "server" if tokens is None else "tokenizer"
        await self._open_session()

    async def completion(self, request: GenRequest, sink: StreamSink | None) -> GenResult:
        """One text completion on the running loop: streamed, its first token to `sink`, or (None) not streamed."""
        if sink is not None:
            return await self._stream_request(request, sink)
        result = await self._complete(request)
        assert result is not None  # only a probe gives None
        return result

    async def detach(self) -> None:
        """Close what attach() opened."""
        await self._close_session()

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
