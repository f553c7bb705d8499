"""A lean HTTP/1.1 keep-alive client for the endpoint's hot routes (completions, streamed or not): pre-encoded request
bytes written on an asyncio.Protocol, answers parsed by httptools (llhttp), a streamed body handed to a callback as
each read arrives.

Per request it costs one write, one parser feed per read, a future and a timer: no per-request session object,
header dict, stream reader or task, which is what aiohttp's ClientSession.post spends most of its time on (issue #42
measured ~430 µs of CPU a request through aiohttp, ~75-120 µs on a raw protocol). It speaks only what those routes
need of HTTP/1.1: POST of a JSON body with a Content-Length, answers with a Content-Length or chunked, keep-alive.
Plain http:// only: the client (endpoint_client) sends an https:// URL, or one with credentials, through aiohttp as
before, since TLS and Basic auth are rare on a benchmark's endpoint and aiohttp's handling of both is tested.

Failures are the exceptions endpoint_client's policy already reads (openai_api.transport_error, lost_connection):
asyncio.TimeoutError for a request past its deadline, ConnectFailed for a connection not made (refused, no route),
ServerDisconnectedError for a connection lost before its answer's head ended and ClientPayloadError after it
(aiohttp's names, which the messages show); an exception raised by the body callback
(a malformed event, a count that fails a check) ends the request with that exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from typing import NamedTuple, cast
from urllib.parse import urlsplit


class ConnectFailed(ConnectionError):
    """No connection could be made to the server (refused, no route, unreachable); `os_error` says why."""

    def __init__(self, os_error: OSError) -> None:
        super().__init__(os_error.errno, str(os_error))
        self.os_error = os_error


class ServerDisconnectedError(ConnectionError):
    """The server closed the connection (or sent bytes that are not HTTP) before its answer's head ended. Named as
    aiohttp's error is, since the message of a lost request names the error's class."""


class ClientPayloadError(ConnectionError):
    """The server closed the connection after its answer's head, before its body ended (aiohttp's name, as above)."""


class Reply(NamedTuple):
    """An answer's status and, unless its body went to the request's callback (a 200 that streams), its body."""

    status: int
    body: bytes


BodyCallback = Callable[[bytes], None]


class _Connection(asyncio.Protocol):
    """One keep-alive connection: one request at a time, its answer parsed as it arrives."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        import httptools  # here, not at the top: vLLM brings it, and a cmx without vLLM imports this module too

        self._loop = loop
        self._parser = httptools.HttpResponseParser(self)
        self._parser_error = httptools.HttpParserError
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._waiter: asyncio.Future[Reply] | None = None
        self._on_body: BodyCallback | None = None
        self._status = 0
        self._parts: list[bytes] = []
        self._reusable = False
        self._failed = False

    # -- asyncio.Protocol -----------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass of asyncio's, but is one
        sock = transport.get_extra_info("socket")
        if sock is not None:
            set_fast_acks(sock)

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._failed:
            return  # bytes after a failed answer, or none asked for: the connection is being closed
        try:
            self._parser.feed_data(data)
        except self._parser_error as exc:
            self._fail(ServerDisconnectedError(f"the server's answer is not HTTP/1.1: {exc}"))
            return
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._status:
            self._fail(ClientPayloadError("the server closed the connection before the answer's body ended"))
        else:
            self._fail(ServerDisconnectedError("the server closed the connection before any answer"))

    # -- httptools' callbacks -------------------------------------------------------------------------------------

    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()
        self._reusable = self._parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        # kept until the read is parsed: a server writes each streamed event as a chunk of its own, and a read
        # holding many goes to the callback at once (_flush), as one read of the bytes would
        self._parts.append(body)

    def on_message_complete(self) -> None:
        if not self._flush() or self._waiter is None:
            return  # the callback failed: the request has its error
        waiter, body = self._waiter, b"".join(self._parts)
        self._waiter, self._on_body, self._parts = None, None, []
        if not self._reusable:
            self.close()
        if waiter is not None and not waiter.done():
            waiter.set_result(Reply(self._status, body))

    # -- the client's side ----------------------------------------------------------------------------------------

    def send(self, data: bytes, on_body: BodyCallback | None) -> asyncio.Future[Reply]:
        assert self.transport is not None and self._waiter is None
        self._waiter = self._loop.create_future()
        self._on_body, self._status, self._parts, self._failed = on_body, 0, [], False
        self.transport.write(data)
        return self._waiter

    def _flush(self) -> bool:
        """A 200's body parsed so far to the request's callback, where it has one; False when the callback raised
        (a malformed event, a failed check), which ends the request with that exception."""
        if self._on_body is None or self._status != 200 or not self._parts:
            return True
        parts, self._parts = self._parts, []
        try:
            self._on_body(parts[0] if len(parts) == 1 else b"".join(parts))
        except Exception as exc:  # noqa: BLE001 - a malformed event, a failed check or a sink that failed: the request's
            self._fail(exc)
            return False
        return True

    def _fail(self, exc: BaseException) -> None:
        """End the request in flight with `exc`; the connection is not used again."""
        self._failed = True
        waiter, self._waiter, self._on_body = self._waiter, None, None
        self.close()
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


def set_fast_acks(sock: socket.socket) -> None:
    """No Nagle delay on what the client writes (asyncio sets TCP_NODELAY itself, uvloop does not), and no delayed
    ACK of what it reads (TCP_QUICKACK, Linux): against a server whose answers go out in several writes with
    Nagle's algorithm on (a socket it was handed without TCP_NODELAY: uvicorn's --workers, bench/instant_server.py),
    each answer otherwise waits for the client's delayed ACK, about 40 ms, and a run's rate falls to its
    concurrency / 40 ms. MLCommons' client sets both for the same reason."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if hasattr(socket, "TCP_QUICKACK"):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)


# connections being opened at once, by one client: a burst of a thousand connects (an Offline run's first requests,
# a Server run's first second) overflows a server's accept queue (bench/instant_server.py's one accepting loop
# dropped 1,644 of them here: each retried a second later, and a 2,000-request run took 1.3 s instead of 0.2)
CONNECTS_AT_ONCE = 32


class Http1Client:
    """Keep-alive connections to one http:// server, opened as requests need them and kept while idle for at most
    `keepalive_s` (below the server's own idle timeout, so that no request is written on a connection the server is
    closing). No limit on connections: the caller bounds its requests in flight; but at most CONNECTS_AT_ONCE are
    being opened at a time, and a request waiting to open one takes a connection another request left idle
    meanwhile. Used on one event loop only."""

    def __init__(self, url: str, headers: dict[str, str], *, connect_timeout_s: float, keepalive_s: float) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.username or parts.password or not parts.hostname:
            raise ValueError(f"the lean client speaks plain http:// without credentials, not {parts.scheme}://")
        self.host, self.port = parts.hostname, parts.port or 80
        self.base = parts.path.rstrip("/")
        host = parts.netloc
        head = "".join(f"{name}: {value}\r\n" for name, value in {"Host": host, **headers}.items())
        self._head = head.encode("latin-1")
        self._connect_timeout_s = connect_timeout_s
        self._keepalive_s = keepalive_s
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._connects: asyncio.Semaphore | None = None  # made on the loop that uses it

    def request_head(self, path: str, content_type: str = "application/json") -> tuple[bytes, bytes]:
        """The bytes of a POST to `path` before and after its Content-Length value (built once per route)."""
        start = f"POST {self.base}{path} HTTP/1.1\r\nContent-Type: {content_type}\r\n".encode("latin-1")
        return start + self._head + b"Content-Length: ", b"\r\n\r\n"

    async def post(self, head: tuple[bytes, bytes], body: bytes, on_body: BodyCallback | None,
                   timeout_s: float) -> Reply:
        """POST `body` (after `head`, from request_head) and wait for the answer, at most `timeout_s` from now,
        connecting included. A 200's body goes to `on_body` as it arrives when one is given (the Reply's body is
        then empty); any other answer's body is the Reply's."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        connection = self._idle_connection(loop.time())
        if connection is None:
            connection = await self._new_or_idle(loop, deadline)
        waiter = connection.send(b"".join((head[0], str(len(body)).encode(), head[1], body)), on_body)
        timer = loop.call_at(deadline, _time_out, connection, waiter)
        try:
            reply = await waiter
        except BaseException:
            connection.close()  # a failed, timed-out or cancelled request's connection is never reused
            raise
        finally:
            timer.cancel()
            if connection.closed:
                self._open.discard(connection)
        if not connection.closed:
            connection.idle_since = loop.time()
            self._idle.append(connection)
        return reply

    def _idle_connection(self, now: float) -> _Connection | None:
        while self._idle:
            connection = self._idle.pop()  # the most recently used: the least likely to be near its idle timeout
            if not connection.closed and now - connection.idle_since < self._keepalive_s:
                return connection
            connection.close()
            self._open.discard(connection)
        return None

    async def _new_or_idle(self, loop: asyncio.AbstractEventLoop, deadline: float) -> _Connection:
        """A new connection, once fewer than CONNECTS_AT_ONCE are being opened, or one left idle while this waited;
        the wait counts against the request's own deadline, as a connect does."""
        if self._connects is None:
            self._connects = asyncio.Semaphore(CONNECTS_AT_ONCE)
        await asyncio.wait_for(self._connects.acquire(), max(0.0, deadline - loop.time()))
        try:
            idle = self._idle_connection(loop.time())
            if idle is not None:
                return idle
            return await self._connect(loop, min(self._connect_timeout_s, max(0.0, deadline - loop.time())))
        finally:
            self._connects.release()

    async def _connect(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> _Connection:
        try:
            _, connection = await asyncio.wait_for(
                loop.create_connection(lambda: _Connection(loop), self.host, self.port), timeout_s)
        except asyncio.TimeoutError:
            raise  # a TimeoutError is an OSError since Python 3.11: a timeout, not a refusal
        except OSError as exc:
            raise ConnectFailed(exc) from None
        self._open.add(connection)
        return connection

    def close(self) -> None:
        """Close every connection, idle or in use (a request still waiting ends with ServerDisconnectedError)."""
        for connection in list(self._open):
            connection.close()
        self._open.clear()
        self._idle.clear()


def _time_out(connection: _Connection, waiter: asyncio.Future[Reply]) -> None:
    if not waiter.done():
        waiter.set_exception(asyncio.TimeoutError())
    connection.close()
