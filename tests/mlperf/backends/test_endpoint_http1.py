"""The endpoint's lean HTTP/1.1 path (cmx/mlperf/backends/http1.py, EndpointClient's hot routes) against a raw HTTP
server of this module's own on 127.0.0.1, and against today's aiohttp path on the same server: the same answers and
the same errors (class, message, where, hint) for every way the server answers, keep-alive connections reused,
the API key sent, a sample's body encoded once.

The server answers by the request's max_tokens (see ANSWERS), in ways aiohttp.web would not: a stream in chunks cut
mid-event, a connection closed before any byte or mid-stream, a Connection: close answer, no answer at all.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from cmx.mlperf.backends import loop_thread
from cmx.mlperf.backends.base import GREEDY, BackendError, GenRequest, GenResult
from cmx.mlperf.backends.endpoint_client import EndpointClient, EndpointConfig
from cmx.mlperf.backends.http1 import Http1Client
from cmx.mlperf.backends.openai_api import completion_body
from cmx.mlperf.backends.routes import COMPLETIONS, STREAMED, Route
from cmx.mlperf.backends.vllm_server import free_port
from cmx.secrets import Secret

T = TypeVar("T")
KEY = "sk-lean-test-41c7"


def event(data: object) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts if p) + b"0\r\n\r\n"


def stream_parts(n: int, ids: list[int] | None = None, count: int | None = None) -> list[bytes]:
    ids = ids if ids is not None else [7] * n
    body = b"".join(event({"choices": [{"text": "x", "token_ids": [i], "finish_reason": None}]}) for i in ids)
    body += event({"choices": [], "usage": {"completion_tokens": n if count is None else count}}) + b"data: [DONE]\n\n"
    return [body[i:i + 13] for i in range(0, len(body), 13)]  # chunks cut mid-event


OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def json_answer(body: object, status: int = 200, close: bool = False) -> bytes:
    data = json.dumps(body).encode()
    connection = b"Connection: close\r\n" if close else b""
    return (b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s"
            % (status, connection, len(data), data))


@dataclass
class RawServer:
    """An HTTP/1.1 server on asyncio streams in a thread of its own: keep-alive, one request at a time per
    connection, each answered by ANSWERS[max_tokens]. Records its connections and every request's head and body."""

    port: int = field(default_factory=free_port)
    connections: int = 0
    heads: list[bytes] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> RawServer:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        async def main() -> None:
            self._stop = asyncio.Event()
            server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
            ready.set()
            await self._stop.wait()
            server.close()
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(main(),), daemon=True)
        self._thread.start()
        assert ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if head.startswith(b"GET /v1/models "):  # the dead-server probe: the server is alive
                    await _write(writer, json_answer({"data": [{"id": "own"}]}))
                    continue
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                body = await reader.readexactly(length)
                self.heads.append(head)
                self.bodies.append(body)
                request = json.loads(body)
                if not await ANSWERS[request["max_tokens"]](writer, bool(request.get("stream"))):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


Answer = Callable[[asyncio.StreamWriter, bool], Awaitable[bool]]  # True: the connection stays open


async def _write(writer: asyncio.StreamWriter, *parts: bytes) -> None:
    for part in parts:
        writer.write(part)
        await writer.drain()


def answer(n: int, *, ids: list[int] | None = None, count: int | None = None, close: bool = False) -> Answer:
    async def respond(writer: asyncio.StreamWriter, stream: bool) -> bool:
        if stream:
            head = OK_HEAD.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n") if close else OK_HEAD
            await _write(writer, head, chunked(*stream_parts(n, ids, count)))
        else:
            choice = {"text": "x", "token_ids": ids if ids is not None else [7] * n, "finish_reason": "length"}
            await _write(writer, json_answer({"choices": [choice], "usage": {"completion_tokens": count or n}},
                                             close=close))
        return not close
    return respond


async def failing(writer: asyncio.StreamWriter, stream: bool) -> bool:
    await _write(writer, json_answer({"object": "error", "message": "the engine is overloaded", "code": 503}, 503))
    return True


async def malformed_event(writer: asyncio.StreamWriter, stream: bool) -> bool:
    if not stream:
        await _write(writer, json_answer({"choices": "none"}))
        return True
    parts = stream_parts(3)
    await _write(writer, OK_HEAD, chunked(parts[0], parts[1], b'data: {"cho\n\n', *parts[2:]))
    return True


async def cut_mid_answer(writer: asyncio.StreamWriter, stream: bool) -> bool:
    await _write(writer, OK_HEAD if stream else b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"choices\"",
                 chunked(stream_parts(3)[0])[:-5] if stream else b"")  # no last chunk
    return False


async def closed_before_answering(writer: asyncio.StreamWriter, stream: bool) -> bool:
    return False


async def silent(writer: asyncio.StreamWriter, stream: bool) -> bool:
    await asyncio.sleep(30)
    return False


ANSWERS: dict[int, Answer] = {
    3: answer(3),
    4: failing,
    5: malformed_event,
    6: cut_mid_answer,
    7: closed_before_answering,
    8: silent,
    9: answer(9, count=8),
    10: answer(10, close=True),
    11: answer(11, ids=[5] * 12, count=12),  # more ids than max_tokens
}


def run(client: EndpointClient, work: Callable[[], Awaitable[T]]) -> T:
    """`work` with the client open, on a loop of the client's config's kind (uvloop's on Linux, by default)."""

    async def main() -> T:
        await client.open()
        client.model = "own"
        try:
            return await work()
        finally:
            await client.close()
    return loop_thread.run(main(), client.config.event_loop)


@dataclass(frozen=True)
class Outcome:
    result: GenResult | None
    error: tuple[str, str, str | None, str | None] | None
    firsts: tuple[int, ...]


class Firsts:
    def __init__(self) -> None:
        self.ids: list[int] = []

    def on_first_token(self, request_id: int, token_id: int) -> None:
        self.ids.append(token_id)

    def on_done(self, result: GenResult) -> None:
        pass

    def on_error(self, request_id: int, error: BaseException) -> None:
        pass


def outcome(url: str, route: Route, n: int, *, lean: bool, timeout_s: float = 600.0, loop: str = "auto") -> Outcome:
    config = EndpointConfig(url, request_timeout_s=timeout_s, event_loop=loop)
    client = EndpointClient(config, logging.getLogger("test"))
    sink = Firsts()

    async def post() -> Outcome:
        if not lean:
            client.lean = None  # today's aiohttp path, as an https:// URL takes
        try:
            result = await client.post(route, GenRequest(id=3, prompt_ids=[1, 2], max_tokens=n, sample=12),
                                       sink if route.streams else None)
            return Outcome(result, None, tuple(sink.ids))
        except BackendError as exc:
            return Outcome(None, (type(exc).__name__, exc.message, exc.where, exc.hint), tuple(sink.ids))
    return run(client, post)


@pytest.mark.parametrize("route", [STREAMED, COMPLETIONS], ids=["streamed", "completions"])
@pytest.mark.parametrize("n", sorted(set(ANSWERS) - {8}))
def test_the_lean_path_answers_and_fails_as_the_aiohttp_path_does(route: Route, n: int):
    with RawServer() as server:
        lean, today = outcome(server.url, route, n, lean=True), outcome(server.url, route, n, lean=False)
    assert lean == today
    if n in (3, 10):
        assert lean.result == GenResult(id=3, token_ids=[7] * n, finish_reason="length" if not route.streams else "")
    else:
        assert lean.error is not None


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
@pytest.mark.parametrize("route", [STREAMED, COMPLETIONS], ids=["streamed", "completions"])
def test_a_request_past_its_timeout_and_a_server_that_is_gone_fail_as_on_the_aiohttp_path(route: Route, loop: str):
    with RawServer() as server:
        lean, today = (outcome(server.url, route, 8, lean=flag, timeout_s=0.5, loop=loop) for flag in (True, False))
        assert lean == today and lean.error is not None
        assert "got no complete answer within request_timeout_s = 0.5 s" in lean.error[1]
        for n in (6, 7):  # the connection lost mid-answer, and before any
            assert outcome(server.url, route, n, lean=True, loop=loop) == outcome(server.url, route, n, lean=False,
                                                                                  loop=loop)
    gone = f"http://127.0.0.1:{free_port()}/v1"
    lean, today = outcome(gone, route, 3, lean=True, loop=loop), outcome(gone, route, 3, lean=False, loop=loop)
    assert lean == today and lean.error is not None
    assert lean.error[:2] == ("BackendDead", "the server at " + gone + " stopped answering (connection refused)")


def test_the_hot_routes_reuse_one_connection_send_the_key_and_encode_a_samples_body_once():
    with RawServer() as server:
        client = EndpointClient(EndpointConfig(server.url, api_key=Secret(KEY)), logging.getLogger("test"))
        request = GenRequest(id=1, prompt_ids=[1, 2, 3], max_tokens=3, sample=40)

        async def posts() -> list[GenResult]:
            results = [await client.post(route, request) for route in (STREAMED, COMPLETIONS, STREAMED, STREAMED)]
            context = client.context(request)
            assert client._body_bytes(STREAMED, request, context) is client._body_bytes(STREAMED, request, context)
            return results

        results = run(client, posts)
    assert [r.token_ids for r in results] == [[7, 7, 7]] * 4
    assert server.connections == 1
    assert all(f"Authorization: Bearer {KEY}".encode() in head for head in server.heads)
    assert all(head.startswith(b"POST /v1/completions HTTP/1.1\r\n") for head in server.heads)
    bodies = [json.loads(body) for body in server.bodies]
    assert [b["stream"] for b in bodies] == [True, False, True, True]
    for body in bodies:  # what today's aiohttp path sends, field for field
        assert body == completion_body(request, "own", GREEDY, stream=body["stream"])


def test_a_connection_the_server_closes_or_that_idled_past_the_keepalive_is_not_reused():
    with RawServer() as server:
        client = EndpointClient(EndpointConfig(server.url), logging.getLogger("test"))
        close = GenRequest(id=1, prompt_ids=[1], max_tokens=10)

        async def posts() -> None:
            await client.post(STREAMED, close)  # Connection: close
            await client.post(COMPLETIONS, close)
            assert client.lean is not None
            client.lean._keepalive_s = 0.2
            await client.post(STREAMED, GenRequest(id=2, prompt_ids=[1], max_tokens=3))
            await asyncio.sleep(0.3)
            await client.post(STREAMED, GenRequest(id=3, prompt_ids=[1], max_tokens=3))

        run(client, posts)
    assert server.connections == 4


def test_https_and_a_url_with_credentials_take_the_aiohttp_path():
    for url in ("https://127.0.0.1:9/v1", "http://user:pw@127.0.0.1:9/v1"):
        client = EndpointClient(EndpointConfig(url), logging.getLogger("test"))
        assert run(client, lambda c=client: _lean_of(c)) is None  # type: ignore[misc]
    with pytest.raises(ValueError, match="plain http:// without credentials"):
        Http1Client("https://h/v1", {}, connect_timeout_s=1, keepalive_s=1)


async def _lean_of(client: EndpointClient) -> Http1Client | None:
    return client.lean


def test_a_burst_of_requests_opens_at_most_a_few_connections_at_once_and_all_are_answered():
    """Three hundred requests at once (a Server run's first second) open their connections CONNECTS_AT_ONCE at a
    time: a server's accept queue would drop the rest of a burst, and each dropped connect costs a second."""
    from cmx.mlperf.backends.http1 import CONNECTS_AT_ONCE

    with RawServer() as server:
        client = EndpointClient(EndpointConfig(server.url), logging.getLogger("test"))
        opening, most = 0, 0

        async def posts() -> list[GenResult]:
            nonlocal opening, most
            await client.post(STREAMED, GenRequest(id=0, prompt_ids=[1], max_tokens=3))  # the lean client exists
            lean = client.lean
            assert lean is not None
            connect = lean._connect

            async def counted(*args: Any) -> Any:
                nonlocal opening, most
                opening += 1
                most = max(most, opening)
                try:
                    return await connect(*args)
                finally:
                    opening -= 1

            lean._connect = counted  # type: ignore[method-assign]
            return await asyncio.gather(*(client.post(STREAMED, GenRequest(id=i, prompt_ids=[1], max_tokens=3))
                                          for i in range(1, 301)))

        results = run(client, posts)
    assert [r.token_ids for r in results] == [[7, 7, 7]] * 300
    assert 1 < most <= CONNECTS_AT_ONCE
