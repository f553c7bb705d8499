"""OpenAI-compatible servers on 127.0.0.1 that answer the endpoint backend's warm-up and then break, as a server that
starts well and fails under the curve: one answers every later request with HTTP 500 (its body long, and echoing the
request's Authorization header, as some servers' error pages do), one sends its headers and then nothing."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.fake_openai import FakeOpenAIServer


class WarmThenBroken(FakeOpenAIServer):
    """Answers the warm-up (the backend's non-streamed requests, then its first streamed one) with max_tokens tokens;
    every later request goes to `broken`. `broken_requests` counts those. With `key`, a request without it as its
    Bearer token is answered 401."""

    def __init__(self, key: str | None = None) -> None:
        super().__init__()
        self.key = key
        self.streamed = 0
        self.broken_requests = 0

    def refused(self, request: Any) -> Any:
        from aiohttp import web

        if self.key is None or request.headers.get("Authorization") == f"Bearer {self.key}":
            return None
        return web.json_response({"object": "error", "message": "no valid API key", "code": 401}, status=401)

    async def models(self, request: Any) -> Any:
        return self.refused(request) or await super().models(request)

    async def complete(self, request: Any) -> Any:
        if (refusal := self.refused(request)) is not None:
            return refusal
        body = await request.json()
        if body.get("stream"):
            self.streamed += 1
            if self.streamed > 1:
                self.broken_requests += 1
                return await self.broken(request, body)
        n = int(body.get("max_tokens") or 1)
        choices = [{"index": 0, "text": "x" * n, "token_ids": [7] * n, "finish_reason": "length"}]
        return await self.stream_or_json(request, body, choices, {"usage": {"completion_tokens": n}})

    async def broken(self, request: Any, body: dict[str, Any]) -> Any:
        raise NotImplementedError


class Answers500(WarmThenBroken):
    """HTTP 500, the body a JSON error whose message quotes the Authorization header first and is 20 KB long."""

    MESSAGE = "engine core died: " + "CUDA error: an illegal memory access was encountered; " * 400

    async def broken(self, request: Any, body: dict[str, Any]) -> Any:
        from aiohttp import web

        echo = f"request with Authorization={request.headers.get('Authorization', '')}: {self.MESSAGE}"
        return web.json_response({"object": "error", "message": echo, "type": "InternalServerError", "code": 500},
                                 status=500)


class Stalls(WarmThenBroken):
    """Sends 200 and the event-stream headers, then nothing, until the server stops."""

    async def broken(self, request: Any, body: dict[str, Any]) -> Any:
        from aiohttp import web

        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await asyncio.Event().wait()
        return response
