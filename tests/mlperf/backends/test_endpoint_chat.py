"""A conversation behind an endpoint: each chat (Qwen3-VL's messages, its image among them) is one non-streaming
POST /v1/chat/completions in every scenario, answered with the reply's text and the server's token count; a chat the
server refuses is answered empty and counted, as the reference answers a failed request.

Against a fake server that records each body and answers as vLLM's chat route does. The real route, on the tiny
Qwen3-VL, is the qwen3-vl row's e2e test in tests/mlperf/test_app_benchmarks.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from cmx.mlperf.backends.base import BackendError, ChatPrompt, GenRequest, GenResult, Sampling
from cmx.mlperf.backends.batching import QueueSink
from cmx.mlperf.backends.endpoint import WARMUP_CHAT, EndpointBackend
from cmx.mlperf.backends.endpoint_client import EndpointConfig
from cmx.mlperf.backends.openai_api import chat_body, chat_result
from tests.fake_openai import FakeOpenAIServer

QWEN = Sampling(temperature=0.7, top_p=0.8, top_k=20)
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/JPEG;base64,/9j/4AAQ"}}


def product(i: int) -> ChatPrompt:
    return ChatPrompt(({"role": "system", "content": "Answer in JSON."},
                       {"role": "user", "content": [{"type": "text", "text": f"product {i}"}, IMAGE]}))


def answer(content: str | None, tokens: int, finish: str = "stop") -> dict[str, Any]:
    return {"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                                      "finish_reason": finish}],
            "usage": {"prompt_tokens": 900, "completion_tokens": tokens, "total_tokens": 900 + tokens}}


def test_a_chat_goes_as_it_is_unstreamed_with_the_sampling_and_no_max_tokens_unless_it_sets_one():
    body = chat_body(product(3), "qwen", QWEN)
    assert body["messages"] == list(product(3).messages) and body["messages"][1]["content"][1] == IMAGE
    assert (body["model"], body["stream"], body["temperature"], body["top_p"], body["top_k"]) == \
        ("qwen", False, 0.7, 0.8, 20)
    assert (body["repetition_penalty"], body["presence_penalty"], body["frequency_penalty"], body["min_p"]) == \
        (1.0, 0.0, 0.0, 0.0)
    assert "max_tokens" not in body and "seed" not in body  # the reference bounds nothing: the context does
    assert chat_body(WARMUP_CHAT, "qwen", Sampling(seed=7))["max_tokens"] == 8
    assert chat_body(WARMUP_CHAT, "qwen", Sampling(seed=7))["seed"] == 7


def test_a_chat_answer_is_its_text_with_the_servers_count():
    request = GenRequest(id=4, prompt_ids=[], chat=product(4))
    result = chat_result(request, answer('{"category": "A > B"}', 9))
    assert (result.text, result.n_tokens, result.token_ids, result.finish_reason) == ('{"category": "A > B"}', 9, [],
                                                                                      "stop")
    assert chat_result(request, answer(None, 0)).text == ""  # no content: an empty reply, scored as unparsable
    with pytest.raises(ValueError, match=r"usage\.completion_tokens"):
        chat_result(request, {"choices": answer("x", 1)["choices"]})
    bounded = GenRequest(id=5, prompt_ids=[], chat=WARMUP_CHAT)
    with pytest.raises(BackendError, match="more than the chat's max_tokens 8"):
        chat_result(bounded, answer("x y z", 9))


def test_a_chat_request_carries_no_token_ids():
    with pytest.raises(ValueError, match="whole prompt in its messages"):
        GenRequest(id=1, prompt_ids=[5], chat=product(1))
    with pytest.raises(ValueError, match="empty prompt"):
        GenRequest(id=1, prompt_ids=[])
    with pytest.raises(ValueError, match="at least one message"):
        ChatPrompt(())


class ChatServer(FakeOpenAIServer):
    """Answers each chat with a reply naming its user text; refuses `product 2` as over its context length, and
    fails `product 3` with a 500 when `crash` is set."""

    def __init__(self, crash: bool = False) -> None:
        super().__init__()
        self.bodies: list[dict[str, Any]] = []
        self.crash = crash

    async def chat(self, request: Any) -> Any:
        from aiohttp import web

        body = await request.json()
        self.bodies.append(body)
        content = body["messages"][-1]["content"]
        text = content if isinstance(content, str) else content[0]["text"]
        if text == "product 2":
            return web.json_response({"object": "error", "message": "This model's maximum context length is 4096 "
                                      "tokens. However, you requested 5000 tokens.", "code": 400}, status=400)
        if text == "product 3" and self.crash:
            return web.json_response({"object": "error", "message": "engine failed"}, status=500)
        return web.json_response(answer(json.dumps({"category": text}), 7))


def chats(*ids: int) -> list[GenRequest]:
    return [GenRequest(id=i, prompt_ids=[], chat=product(i)) for i in ids]


def test_offline_chats_come_back_as_text_and_a_refused_one_is_answered_empty_and_counted():
    with ChatServer() as server, EndpointBackend(EndpointConfig(url=server.url, chat=True, sampling=QWEN,
                                                                warmup_requests=2)) as backend:
        assert backend.token_ids_source == "chat"
        warmups = [b for b in server.bodies if b.get("max_tokens") == 8]
        assert len(warmups) == 3 and server.completions == 0  # two Offline, one Server; never /v1/completions
        results = {r.id: r for r in backend.generate(chats(1, 2, 4))}
        details = backend.details()
    assert (results[1].text, results[1].n_tokens) == ('{"category": "product 1"}', 7)
    assert (results[2].text, results[2].n_tokens, results[2].finish_reason) == ("", 0, "refused")
    assert details == {"refused_requests": 1}
    assert all(b["temperature"] == 0.7 and b["top_k"] == 20 and "max_tokens" not in b for b in server.bodies[3:])


def test_a_server_chat_completes_whole_without_a_first_token():
    class Sink(QueueSink):
        def __init__(self) -> None:
            super().__init__()
            self.firsts: list[int] = []

        def on_first_token(self, request_id: int, token_id: int) -> None:
            self.firsts.append(request_id)

    with ChatServer() as server, EndpointBackend(EndpointConfig(url=server.url, chat=True, warmup_requests=1)) \
            as backend:
        sink = Sink()
        backend.submit(chats(5)[0], sink)
        result = sink.queue.get(timeout=10)
    assert isinstance(result, GenResult) and result.text == '{"category": "product 5"}' and sink.firsts == []


def test_a_server_failure_other_than_a_refusal_fails_the_batch():
    with ChatServer(crash=True) as server, EndpointBackend(EndpointConfig(url=server.url, chat=True,
                                                                          warmup_requests=1)) as backend, \
            pytest.raises(BackendError, match="HTTP 500"):
        list(backend.generate(chats(3)))


def test_a_refused_warm_up_is_an_error_not_an_empty_answer():
    class Refuses(ChatServer):
        async def chat(self, request: Any) -> Any:
            from aiohttp import web

            return web.json_response({"message": "no"}, status=400)

    with Refuses() as server, pytest.raises(BackendError, match="warm-up request 1"):
        EndpointBackend(EndpointConfig(url=server.url, chat=True, warmup_requests=1)).start()
