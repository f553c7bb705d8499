"""The endpoint's four routes share one post path and one dead-server policy: a server killed (SIGKILL) while a
request waits on any route fails it with the same BackendDead, "the server at URL stopped answering (why)".

The server is a process of its own (aiohttp.web on 127.0.0.1) serving every route; a request asking for HOLD tokens
is held open (a stream after its first token, a whole answer before any byte) and announced on the server's stdout,
so that the test kills the server with the request in flight.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from cmx.mlperf.backends.base import Audio, BackendDead, ChatPrompt, GenRequest, GenResult
from cmx.mlperf.backends.endpoint import EndpointBackend
from cmx.mlperf.backends.endpoint_client import EndpointConfig
from cmx.mlperf.backends.routes import CHAT, COMPLETIONS, STREAMED, TRANSCRIPTIONS, Route, route_for
from cmx.mlperf.benchmarks.whisper.prompts import decoder_prompt_ids
from cmx.mlperf.benchmarks.whisper.tiny import make_tiny_whisper
from tests.fake_openai import script_server
from tests.mlperf.backends.test_endpoint import CollectingSink

HOLD = 99  # a request for this many tokens is held open until the server dies

SERVER = r"""
import asyncio, json, sys
from aiohttp import web
PORT, HOLD = int(sys.argv[1]), int(sys.argv[2])

async def hold(route):
    print(f"holding {route}", flush=True)
    await asyncio.sleep(3600)

def event(data):
    return f"data: {json.dumps(data)}\n\n".encode()

async def stream(request, route, first, n):
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(event(first))
    if n == HOLD:
        await hold(route)
    await response.write(event({"choices": [], "usage": {"completion_tokens": n}}) + b"data: [DONE]\n\n")
    return response

async def models(request):
    return web.json_response({"data": [{"id": "own", "owned_by": "own-server", "max_model_len": 2048}]})

async def complete(request):
    body = await request.json()
    n = body["max_tokens"]
    choice = {"text": "x", "token_ids": [7] * n, "finish_reason": "length"}
    if body.get("stream"):
        return await stream(request, "streamed", {"choices": [choice]}, n)
    if n == HOLD:
        await hold("completions")
    return web.json_response({"choices": [choice], "usage": {"completion_tokens": n}})

async def chat(request):
    n = (await request.json()).get("max_tokens") or 3
    if n == HOLD:
        await hold("chat")
    return web.json_response({"choices": [{"message": {"role": "assistant", "content": "red"},
                                           "finish_reason": "stop"}], "usage": {"completion_tokens": min(n, 3)}})

async def transcribe(request):
    n = int((await request.post())["max_completion_tokens"])
    first = {"choices": [{"delta": {"content": " a clip"}, "finish_reason": "stop"}]}
    return await stream(request, "transcriptions", first, 3 if n != HOLD else n)

app = web.Application()
app.router.add_get("/v1/models", models)
app.router.add_post("/v1/completions", complete)
app.router.add_post("/v1/chat/completions", chat)
app.router.add_post("/v1/audio/transcriptions", transcribe)
web.run_app(app, host="127.0.0.1", port=PORT, print=lambda *a: print("ready", flush=True))
"""


@pytest.fixture(scope="module")
def whisper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_whisper(tmp_path_factory.mktemp("whisper") / "model").path


def every_route_server(tmp_path: Path) -> contextlib.AbstractContextManager[tuple[subprocess.Popen[str], str]]:
    """SERVER on a free port, answering: its process and its /v1 base; killed at the end."""
    return script_server(tmp_path, SERVER, str(HOLD))


def offline(backend: EndpointBackend, request: GenRequest) -> BaseException | None:
    """The request as an Offline batch of one: the batch's error (None if it came back)."""
    try:
        list(backend.generate([request]))
    except Exception as exc:  # noqa: BLE001 - the error is what the test looks at
        return exc
    return None


def streamed(backend: EndpointBackend, request: GenRequest) -> BaseException | None:
    """The request through submit() (Server, Interactive): the error its sink heard (None if it came back)."""
    sink = CollectingSink(1)
    backend.submit(request, sink)
    assert sink.finished.wait(20)
    return sink.errors.get(request.id)


Case = tuple[Route, Callable[[Path], dict], Callable[[Path], GenRequest], Callable[..., BaseException | None]]
CASES: dict[str, Case] = {
    "completions": (COMPLETIONS, lambda _: {}, lambda _: GenRequest(id=1, prompt_ids=[5, 6], max_tokens=HOLD), offline),
    "streamed": (STREAMED, lambda _: {}, lambda _: GenRequest(id=1, prompt_ids=[5, 6], max_tokens=HOLD), streamed),
    "chat": (CHAT, lambda _: {"chat": True},
             lambda _: GenRequest(id=1, prompt_ids=[], chat=ChatPrompt(({"role": "user", "content": "hi"},),
                                                                       max_tokens=HOLD)), offline),
    "transcriptions": (TRANSCRIPTIONS, lambda model: {"tokenizer": model},
                       lambda model: GenRequest(id=1, prompt_ids=list(decoder_prompt_ids(model)), max_tokens=HOLD,
                                                media=(Audio(np.full(8000, 0.25, dtype=np.float32), 16000),)),
                       offline),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_server_killed_under_any_route_is_reported_dead_the_same_way(name: str, tmp_path: Path,
                                                                       request: pytest.FixtureRequest) -> None:
    route, config, make, send = CASES[name]
    model = request.getfixturevalue("whisper") if name == "transcriptions" else tmp_path
    sample = make(model)
    assert route_for(sample, streamed=send is streamed) is route  # the case exercises the route it names
    with (every_route_server(tmp_path) as (server, url),
          EndpointBackend(EndpointConfig(url=url, warmup_requests=1, **config(model))) as backend):
        outcome: list[BaseException | None] = []
        sending = threading.Thread(target=lambda: outcome.append(send(backend, sample)))
        sending.start()
        assert server.stdout is not None
        assert server.stdout.readline().split() == ["holding", name]  # the request waits on its route
        server.kill()  # SIGKILL
        sending.join(20)
        assert not sending.is_alive()
        later = offline(backend, GenRequest(id=2, prompt_ids=[5, 6], max_tokens=4))
    error = outcome[0]
    assert isinstance(error, BackendDead), error
    # refused; or reset, when the probe met the killed process's listening socket before it closed
    assert re.match(rf"the server at {re.escape(url)} stopped answering \(connection (refused|reset)\)",
                    error.message), error.message
    if send is offline:  # the batch counts its samples, as any failed batch does
        assert error.message.endswith("; 0 of 1 samples completed, 1 in flight were lost, 0 not sent")
    # the server is known dead: the next request fails the same way
    assert isinstance(later, BackendDead) and "stopped answering" in later.message, later


def test_a_result_still_comes_back_on_every_route_while_the_server_lives(tmp_path: Path, whisper: Path) -> None:
    """The cases above would pass on a backend that failed every request: here each route answers."""
    with every_route_server(tmp_path) as (_, url):
        for name, (_, config, make, send) in CASES.items():
            model = whisper if name == "transcriptions" else tmp_path
            sample = make(model)
            small = GenRequest(id=sample.id, prompt_ids=sample.prompt_ids, max_tokens=4, media=sample.media,
                               chat=ChatPrompt(sample.chat.messages, max_tokens=4) if sample.chat else None)
            with EndpointBackend(EndpointConfig(url=url, warmup_requests=1, **config(model))) as backend:
                if send is streamed:
                    sink = CollectingSink(1)
                    backend.submit(small, sink)
                    assert sink.finished.wait(20) and sink.done, (name, sink.errors)
                else:
                    results: list[GenResult] = list(backend.generate([small]))
                    assert [r.id for r in results] == [small.id], name
