#!/usr/bin/env python3
"""An OpenAI-compatible server with no model that answers at once, for measuring a client's own ceiling.

    .venv/bin/python bench/instant_server.py --port 8123 --processes 2   # prints "ready URL" once serving

GET /v1/models lists one model ("instant"); GET /version says "instant"; POST /v1/completions
answers `max_tokens` tokens (the request's; 16 when it names none) the way vLLM does with
`return_token_ids`: streamed (`"stream": true`) as one server-sent event per token with its
`token_ids`, then a chunk with `usage` only (`stream_options.include_usage`), then `[DONE]`;
or not streamed, as one JSON body with every id and the usage. Every request's answer is the
same bytes for the same length, built once, so the server does almost nothing per request.

Raw asyncio (HTTP/1.1 keep-alive, chunked transfer), `--processes` processes on one port with
SO_REUSEPORT, so that the server is not what a client measured against it is waiting for. It
stops on SIGTERM or SIGINT, its processes with it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import multiprocessing.synchronize
import os
import signal
import socket
import sys

MODEL = "instant"
CREATED = 1795547127  # vLLM's answers carry a `created` time, which MLCommons' client requires
DEFAULT_TOKENS = 16


def token_id(i: int) -> int:
    """The i-th output token's id: varied, so the JSON is the size a real answer's is."""
    return 100 + (i * 7919) % 3900


def chunked(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class Answers:
    """The response bytes for each output length, built on first use."""

    def __init__(self) -> None:
        self.streamed: dict[int, bytes] = {}
        self.whole: dict[int, bytes] = {}
        models = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "instant",
                                                          "max_model_len": 4096}]}).encode()
        self.models = self.json_response(models)
        self.version = self.json_response(b'{"version": "instant"}')
        self.not_found = self.json_response(b'{"detail": "Not Found"}', b"404 Not Found")

    @staticmethod
    def json_response(body: bytes, status: bytes = b"200 OK") -> bytes:
        return b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
            status, len(body), body)

    def completion(self, body: bytes) -> bytes:
        request = json.loads(body)
        n = int(request.get("max_tokens") or DEFAULT_TOKENS)
        if request.get("stream"):
            if n not in self.streamed:
                self.streamed[n] = self._stream(n)
            return self.streamed[n]
        if n not in self.whole:
            ids = [token_id(i) for i in range(n)]
            self.whole[n] = self.json_response(json.dumps({
                "id": "cmpl-instant", "object": "text_completion", "created": CREATED, "model": MODEL,
                "choices": [{"index": 0, "text": " x" * n, "token_ids": ids, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}}).encode())
        return self.whole[n]

    @staticmethod
    def _stream(n: int) -> bytes:
        parts = [b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"]
        for i in range(n):
            choice = {"index": 0, "text": " x", "token_ids": [token_id(i)], "logprobs": None,
                      "finish_reason": "length" if i == n - 1 else None}
            event = {"id": "cmpl-instant", "object": "text_completion", "created": CREATED, "model": MODEL,
                     "choices": [choice]}
            parts.append(chunked(b"data: %s\n\n" % json.dumps(event).encode()))
        usage = {"id": "cmpl-instant", "object": "text_completion", "created": CREATED, "model": MODEL, "choices": [],
                 "usage": {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}}
        parts.append(chunked(b"data: %s\n\n" % json.dumps(usage).encode()))
        parts.append(chunked(b"data: [DONE]\n\n"))
        parts.append(b"0\r\n\r\n")
        return b"".join(parts)


class Connection(asyncio.Protocol):
    """One keep-alive connection: requests parsed from the bytes as they come, each answered at once."""

    def __init__(self, answers: Answers) -> None:
        self.answers = answers
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = bytes(self.buffer[:end]).lower()
            length = 0
            for line in head.split(b"\r\n")[1:]:
                if line.startswith(b"content-length:"):
                    length = int(line[15:])
            if len(self.buffer) < end + 4 + length:
                return  # the body is still coming
            body = bytes(self.buffer[end + 4:end + 4 + length])
            del self.buffer[:end + 4 + length]
            assert self.transport is not None
            self.transport.write(self.answer(head.split(b" ", 2), body))
            if b"\r\nconnection: close" in head:
                self.transport.close()
                return

    def answer(self, line: list[bytes], body: bytes) -> bytes:
        path = line[1].split(b"?")[0] if len(line) > 1 else b""
        if path == b"/v1/completions":
            return self.answers.completion(body)
        if path == b"/v1/models":
            return self.answers.models
        if path == b"/version":
            return self.answers.version
        return self.answers.not_found


# the accept queue: create_server listens again with its own backlog (100 unless told), which a client's first
# burst of connections overflowed (each dropped connect retried a second later)
BACKLOG = 4096


def listening_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(BACKLOG)
    return sock


def serve(host: str, port: int, ready: multiprocessing.synchronize.Event | None = None) -> None:
    """One server process: its own socket on the shared port, until SIGTERM."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when its processes stop

    async def main() -> None:
        loop = asyncio.get_running_loop()
        answers = Answers()
        server = await loop.create_server(lambda: Connection(answers), sock=listening_socket(host, port),
                                          backlog=BACKLOG)
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        if ready is not None:
            ready.set()
        async with server:
            await stop.wait()

    asyncio.run(main())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--processes", type=int, default=1, help="server processes on the port (SO_REUSEPORT)")
    args = p.parse_args(argv)
    context = multiprocessing.get_context("fork")  # this process has no threads: fork is safe and quick
    children = []
    for _ in range(args.processes):
        ready = context.Event()
        child = context.Process(target=serve, args=(args.host, args.port, ready), daemon=True)
        child.start()
        if not ready.wait(30):
            raise SystemExit(f"instant server: a process did not start on port {args.port}")
        children.append(child)
    print(f"ready http://{args.host}:{args.port}/v1 pid {os.getpid()}", flush=True)
    stopping = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stopping)  # after the forks: the children keep their own handlers
    try:
        signal.sigwait(stopping)
    finally:
        for child in children:
            child.terminate()
        for child in children:
            child.join(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
