"""A fake OpenAI-compatible server for tests: aiohttp.web on 127.0.0.1 in a thread of its own, serving
/v1/models, /v1/completions, /v1/audio/transcriptions and /v1/chat/completions. A subclass answers completions
(`complete`), transcriptions (`transcribe`: 404 unless it does, as a text model's server) and chats (`chat`: 404
unless it does); `stream_or_json` answers a
request the way vLLM does, as one JSON body or, when the request asks for a stream, as server-sent events
(the choice, then the usage, then [DONE])."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cmx.mlperf.backends.vllm_server import free_port


class FakeOpenAIServer:
    """Serves until the `with` block ends; `url` is its /v1 base. `completions` counts the requests."""

    def __init__(self) -> None:
        self.completions = 0
        self.port = free_port()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def models(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response({"data": [{"id": "own", "owned_by": "own-server", "max_model_len": 2048}]})

    async def complete(self, request: Any) -> Any:
        raise NotImplementedError  # each fake answers in its own way

    async def transcribe(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response({"detail": "Not Found"}, status=404)

    async def chat(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response({"detail": "Not Found"}, status=404)

    async def _complete(self, request: Any) -> Any:
        self.completions += 1
        return await self.complete(request)

    @staticmethod
    async def stream_or_json(request: Any, body: dict[str, Any], choices: list[dict[str, Any]],
                             usage: dict[str, Any]) -> Any:
        from aiohttp import web

        if not body.get("stream"):
            return web.json_response({"choices": choices, **usage})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for data in ({"choices": choices}, {"choices": [], **usage}):
            await response.write(f"data: {json.dumps(data)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        return response

    def _run(self) -> None:
        from aiohttp import web

        async def main() -> None:
            app = web.Application()
            app.router.add_get("/v1/models", self.models)
            app.router.add_post("/v1/completions", self._complete)
            app.router.add_post("/v1/audio/transcriptions", self.transcribe)
            app.router.add_post("/v1/chat/completions", self.chat)
            runner = web.AppRunner(app)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", self.port).start()
            self._ready.set()
            await asyncio.Event().wait()

        self.loop = asyncio.new_event_loop()
        self.task = self.loop.create_task(main())
        with contextlib.suppress(asyncio.CancelledError):
            self.loop.run_until_complete(self.task)
        # requests still being answered (a stream held open on purpose) end with the server, not at garbage collection
        left = asyncio.all_tasks(self.loop)
        for task in left:
            task.cancel()
        self.loop.run_until_complete(_ended(left))
        self.loop.close()

    def __enter__(self) -> Any:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.task.cancel)
        self._thread.join(10)


async def _ended(tasks: set[asyncio.Task[Any]]) -> None:
    await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.contextmanager
def script_server(tmp_path: Path, source: str, *args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A server script (`source`, run as `python server.py PORT *args`, printing "ready" once it listens) in a
    process of its own, for a test to kill: its process and its /v1 base; killed at the end."""
    (tmp_path / "server.py").write_text(source)
    port = free_port()
    server = subprocess.Popen([sys.executable, str(tmp_path / "server.py"), str(port), *args],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and "ready" in server.stdout.readline()
        yield server, f"http://127.0.0.1:{port}/v1"
    finally:
        server.kill()
        server.wait()
