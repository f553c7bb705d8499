"""The endpoint's streamed-answer parser on bytes (openai_api.SseBuffer.feed_bytes, StreamAssembler.add_bytes and
its typed decode, cmx.mlperf.backends.chunks) against today's parser on the same bytes.

TODAY below is openai_api's SseBuffer, stream_answer and StreamAssembler as they were at commit 0c56b04, before
the bytes path: the str path every event took (split, decode, json.loads, parse_answer, Answer). It is copied here
for this comparison only. A stream is fed to the new parser cut anywhere, in any number of reads, and to today's
in one read; their first tokens, ids, text, finish reason, count and errors (class and message) must be the same.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

from cmx.mlperf.backends.base import BackendError, GenRequest, GenResult
from cmx.mlperf.backends.chunks import typed_chunk
from cmx.mlperf.backends.openai_api import (
    SseBuffer,
    StreamAssembler,
    TextTokens,
    checked_length,
    parse_answer,
    retokenized_ids,
    server_ids,
)

# --- today's parser, as of 0c56b04 (for this comparison only) ---------------------------------------------------


class TodaySseBuffer:
    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> list[str]:
        self._pending += chunk.replace(b"\r\n", b"\n")
        *events, self._pending = self._pending.split(b"\n\n")
        payloads = []
        for event in events:
            data = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
            if data:
                payloads.append(b"\n".join(data).decode("utf-8"))
        return payloads


def today_stream_answer(payload: str):  # type: ignore[no-untyped-def]
    if payload.strip() == "[DONE]":
        return None
    try:
        return parse_answer(json.loads(payload))
    except json.JSONDecodeError as exc:
        raise ValueError(f"a streamed chunk is not JSON: {exc}") from None


class TodayStreamAssembler:
    def __init__(self, request: GenRequest, tokens: TextTokens | None = None, url: str = "") -> None:
        self.request, self.tokens, self.url = request, tokens, url
        self.choices = 0
        self.ids: list[int] = []
        self.text: list[str] = []
        self.finish_reason = ""
        self.count: int | None = None
        self.done = False
        self.first_sent = False

    def add(self, payload: str) -> int | None:
        answer = today_stream_answer(payload)
        if answer is None:
            self.done = True
            return None
        if answer.completion_tokens is not None:
            self.count = answer.completion_tokens
        if not answer.has_choice:
            return None
        self.choices += 1
        self.finish_reason = answer.finish_reason or self.finish_reason
        if self.tokens is None:
            if answer.token_ids is None:
                raise ValueError("a streamed chunk without token_ids (vLLM's return_token_ids)")
            self.ids.extend(answer.token_ids)
            first = self.ids[0] if self.ids else None
        else:
            self.text.append(answer.text)
            first = next(iter(self.tokens.ids(answer.text)), None) if answer.text and not self.first_sent else None
        if first is None or self.first_sent:
            return None
        self.first_sent = True
        return first

    def result(self) -> GenResult:
        if not self.done:
            raise ValueError("the stream ended without its [DONE] event")
        if not self.choices:
            raise ValueError("no streamed chunk carried a choice (only empty 'choices' lists): the server generated "
                             "nothing")
        if self.tokens is not None:
            ids = retokenized_ids(self.request, "".join(self.text), self.count, self.tokens, self.url)
        else:
            ids = server_ids(self.request, self.ids, self.count, self.url)
        return checked_length(self.request, GenResult(id=self.request.id, token_ids=ids,
                                                      finish_reason=self.finish_reason),
                              self.url, count=self.count, tokens=self.tokens)


# --- the streams ---------------------------------------------------------------------------------------------------

URL = "http://gw:8000/v1/completions"


def chunk(ids: list[int] | None = None, text: str = "", finish: str | None = None, **extra: object) -> bytes:
    """One vLLM completion chunk's payload (with the fields cmx does not read, as vLLM 0.32 sends them)."""
    choice: dict[str, object] = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish,
                                 "stop_reason": None, "prompt_token_ids": None}
    if ids is not None:
        choice["token_ids"] = ids
    body = {"id": "cmpl-b01a", "object": "text_completion", "created": 1795547127, "model": "/tmp/tinyllama",
            "choices": [choice], **extra}
    return json.dumps(body).encode()


USAGE = b'{"id":"cmpl-b01a","choices":[],"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3}}'


def sse(*payloads: bytes, eol: bytes = b"\n") -> bytes:
    return b"".join(b"data: " + p + eol + eol for p in payloads)


GOOD = [chunk([483], " he"), chunk([483], " he"), chunk([3874], " bot", "length"), USAGE, b"[DONE]"]
STREAMS: dict[str, bytes] = {
    "vllm": sse(*GOOD),
    "crlf": sse(*GOOD, eol=b"\r\n"),
    "comments and other fields": (b": ping\n\nevent: completion\nid: 4\n" + sse(GOOD[0]) + b":keep-alive\r\n\r\n"
                                  + b"retry: 100\n\n" + sse(*GOOD[1:])),
    "no space after data:, many spaces": (b"data:" + GOOD[0] + b"\n\ndata:    " + GOOD[1] + b"\n\n"
                                          + sse(*GOOD[2:])),
    "data on two lines": b"data: " + GOOD[0][:40] + b"\ndata: " + GOOD[0][40:] + b"\n\n" + sse(*GOOD[1:]),
    "merged: two chunks in one event": b"data: " + GOOD[0] + b"\ndata: " + GOOD[1] + b"\n\n" + sse(*GOOD[2:]),
    "blank lines between events": b"\n\n" + sse(*GOOD).replace(b"\n\n", b"\n\n\n\n"),
    "done with spaces": sse(*GOOD[:-1]) + b"data:  [DONE]  \n\n",
    "partial last event": sse(*GOOD[:-1]) + b"data: [DO",
    "no done": sse(*GOOD[:-1]),
    "nothing": b"",
    "only comments": b": ping\n\n: ping\n\n",
    "error event": sse(GOOD[0], b'{"error": {"message": "CUDA out of memory", "code": 500}}', *GOOD[1:]),
    "server error object mid-stream": sse(GOOD[0], b'{"object": "error", "message": "the engine died", "type": '
                                                   b'"InternalServerError", "code": 500}', *GOOD[1:]),
    "error as a string": sse(b'{"error": "overloaded"}', *GOOD),
    "null error beside choices": sse(chunk([483], " he", error=None), *GOOD[1:]),
    "fastapi detail": sse(b'{"detail": "Not Found"}'),
    "message beside choices": sse(chunk([483], " he", message="hello"), *GOOD[1:]),
    "not json": sse(GOOD[0], b'{"choices": [', *GOOD[1:]),
    "not an object": sse(b'[1, 2]', *GOOD),
    "choices not a list": sse(b'{"choices": {"text": "x"}}', *GOOD),
    "a choice not an object": sse(b'{"choices": ["x"]}', *GOOD),
    "a later choice of another shape": sse(b'{"choices": [{"token_ids": [483], "text": " he"}, 7]}', *GOOD[1:]),
    "ids not integers": sse(chunk(["483"], " he"), *GOOD[1:]),  # type: ignore[list-item]
    "ids as booleans": sse(chunk([True], " he"), *GOOD[1:]),  # type: ignore[list-item]
    "ids as floats": sse(chunk([483.0], " he"), *GOOD[1:]),  # type: ignore[list-item]
    "no ids": sse(chunk(None, " he"), *GOOD[1:]),
    "empty ids": sse(chunk([], ""), *GOOD),
    "count of another type": sse(*GOOD[:3], b'{"choices": [], "usage": {"completion_tokens": "3"}}', b"[DONE]"),
    "count disagrees": sse(*GOOD[:3], b'{"choices": [], "usage": {"completion_tokens": 4}}', b"[DONE]"),
    "count on every chunk": sse(*(chunk([483], " he", usage={"completion_tokens": n}) for n in (1, 2)), b"[DONE]"),
    "usage null": sse(chunk([483], " he", usage=None), *GOOD[1:]),
    "more ids than max_tokens": sse(*GOOD[:3], chunk([9, 9], "x"), b"[DONE]"),
    "fewer than min_tokens": sse(chunk([483], " he", "stop"), b"[DONE]"),
    "only usage": sse(USAGE, b"[DONE]"),
    "finish reason of another type": sse(chunk([483], " he"), chunk([4], "x", finish=7), b"[DONE]"),  # type: ignore
    "text of another type": sse(b'{"choices": [{"token_ids": [483], "text": 5}]}', *GOOD[1:]),
    "delta and message text": sse(b'{"choices": [{"token_ids": [483], "delta": {"content": " he"}}]}',
                                  b'{"choices": [{"token_ids": [483], "text": "", "message": {"content": " he"}}]}',
                                  *GOOD[2:]),
    "delta not an object": sse(b'{"choices": [{"token_ids": [483], "delta": "x"}]}', *GOOD[1:]),
    "duplicate keys": sse(b'{"choices": [{"token_ids": [1]}], "choices": [{"token_ids": [483]}]}', *GOOD[1:]),
    "unicode text": sse(chunk([483], " h\u00e9 \u2603 \ud83d\ude00"), chunk([483], "\\u00e9"), *GOOD[2:]),
    "raw utf-8 text": sse('{"choices": [{"token_ids": [483], "text": " h\u00e9 \u2603"}]}'.encode(), *GOOD[1:]),
    "lone surrogate": sse(b'{"choices": [{"token_ids": [483], "text": "\\ud800"}]}', *GOOD[1:]),
    "invalid utf-8": sse(GOOD[0], b'{"choices": [{"token_ids": [483], "text": "\xff"}]}', *GOOD[2:]),
    "a lone CR inside an event": b"data: " + GOOD[0] + b"\r\r\n\r\n" + sse(*GOOD[1:]),
}


@dataclass(frozen=True)
class Outcome:
    """What a parser made of a stream: the first tokens it handed on, and its result or its error."""

    firsts: tuple[int, ...]
    result: GenResult | None
    error: tuple[str, str] | None  # the class and the message


def error_of(exc: Exception) -> tuple[str, str]:
    return type(exc).__name__, exc.message if isinstance(exc, BackendError) else str(exc)


def today(stream: bytes, request: GenRequest, tokens: TextTokens | None, reads: list[bytes] | None = None) -> Outcome:
    events, reader, firsts = TodaySseBuffer(), TodayStreamAssembler(request, tokens, URL), []
    try:
        for read in reads or [stream]:
            for payload in events.feed(read):
                if (first := reader.add(payload)) is not None:
                    firsts.append(first)
        return Outcome(tuple(firsts), reader.result(), None)
    except (ValueError, BackendError) as exc:
        return Outcome(tuple(firsts), None, error_of(exc))


def new(reads: list[bytes], request: GenRequest, tokens: TextTokens | None) -> Outcome:
    events, reader, firsts = SseBuffer(), StreamAssembler(request, tokens, URL), []
    try:
        for read in reads:
            for payload in events.feed_bytes(read):
                if (first := reader.add_bytes(payload)) is not None:
                    firsts.append(first)
        return Outcome(tuple(firsts), reader.result(), None)
    except (ValueError, BackendError) as exc:
        return Outcome(tuple(firsts), None, error_of(exc))


def cut(stream: bytes, at: list[int]) -> list[bytes]:
    bounds = [0, *sorted(at), len(stream)]
    return [stream[a:b] for a, b in pairwise(bounds)]


def cuttings(stream: bytes, seed: int) -> list[list[bytes]]:
    """The stream in one read, cut once at every byte, byte by byte, and in 20 random cuttings."""
    rng = random.Random(seed)
    ways = [[stream], [stream[i:i + 1] for i in range(len(stream))]]
    ways += [cut(stream, [i]) for i in range(1, len(stream))]
    ways += [cut(stream, rng.sample(range(1, len(stream)), min(len(stream) - 1, rng.randint(2, 12))))
             for _ in range(20) if len(stream) > 2]
    return ways


def tiny_tokenizer(folder: Path) -> Path:
    from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_llama

    return make_tiny_llama(folder, vocab_size=512, hidden_size=64, layers=1, heads=1).path


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> TextTokens:
    return TextTokens(tiny_tokenizer(tmp_path_factory.mktemp("tokenizer")))


REQUEST = GenRequest(id=9, prompt_ids=[1, 5], max_tokens=3, min_tokens=2)


@pytest.mark.parametrize("name", STREAMS)
def test_the_bytes_parser_answers_as_todays_does_wherever_the_reads_cut_the_stream(name: str):
    stream = STREAMS[name]
    want = today(stream, REQUEST, None)
    for reads in cuttings(stream, seed=len(name)):
        got = new(reads, REQUEST, None)
        # today's parser decoded a whole read before reading any of its events: with bytes that are not UTF-8 it
        # failed before handing on a first token that the new one, event by event, hands on; the error is the same
        firsts_comparable = name != "invalid utf-8" or got.error is None
        assert (got.result, got.error) == (want.result, want.error), (name, reads)
        if firsts_comparable:
            assert got.firsts == want.firsts, (name, reads)


@pytest.mark.parametrize("name", ["vllm", "crlf", "delta and message text", "unicode text", "count disagrees",
                                  "fewer than min_tokens", "text of another type", "error event", "no done"])
def test_retokenized_text_is_read_from_bytes_as_todays_parser_reads_it(name: str, tokens: TextTokens):
    stream = STREAMS[name]
    request = GenRequest(id=4, prompt_ids=[1], max_tokens=16, min_tokens=2)
    want = today(stream, request, tokens)
    assert want.result is not None or want.error is not None
    for reads in cuttings(stream, seed=7)[:40]:
        assert new(reads, request, tokens) == want, (name, reads)


def test_a_crlf_cut_between_its_cr_and_its_lf_is_still_one_line_end():
    stream = STREAMS["crlf"]
    crlf_cuts = [i + 1 for i in range(len(stream) - 1) if stream[i:i + 2] == b"\r\n"]
    whole = new([stream], REQUEST, None)
    assert whole.result == GenResult(id=9, token_ids=[483, 483, 3874], finish_reason="length")
    for at in crlf_cuts:
        assert new(cut(stream, [at]), REQUEST, None) == whole
    # today's parser normalized each read alone: a CR at the end of one read and its LF at the start of the next
    # stayed a CR and an LF, and the event ran on into the next one
    assert any(today(stream, REQUEST, None, cut(stream, [at])) != whole for at in crlf_cuts)


def test_the_typed_decode_takes_vllms_chunks_and_leaves_error_objects_and_odd_types_to_parse_answer():
    taken = typed_chunk(GOOD[0])
    assert taken is not None and taken.choices is not None
    assert (taken.choices[0].token_ids, taken.choices[0].content()) == ([483], " he")
    assert typed_chunk(USAGE) is not None
    for left in (b'{"error": {"message": "x"}}', b'{"message": "x"}', b'{"detail": "x"}', b'{"choices": "x"}',
                 b'{"choices": [{"token_ids": [true]}]}', b'[DONE]', b'{', b'"x"', b'{"choices": [{"text": "\xff"}]}'):
        assert typed_chunk(left) is None, left


def test_sse_buffer_feed_still_gives_decoded_payloads():
    events = SseBuffer()
    assert events.feed(b"data: {\"a\": \"\xc3") == []
    assert events.feed(b"\xa9\"}\r") == []
    assert events.feed(b"\n\r\ndata: [DONE]\n\n") == ['{"a": "\u00e9"}', "[DONE]"]
