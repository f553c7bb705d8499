"""OpenAI's /v1/completions (and, for a speech model, /v1/audio/transcriptions; for a conversation,
/v1/chat/completions) as the endpoint backend speaks it: request bodies, answers, streams, errors.

Pure functions and small classes, no I/O (the backend, cmx.mlperf.backends.endpoint, does the
HTTP), so that every rule here is unit-tested with bytes a real server sends.

An answer's output token count is what LoadGen's tokens/s is made of, so it is checked, never
taken on trust: the server's ids against its own `usage.completion_tokens`, exactly; text that
cmx re-tokenizes (a server that returns no ids) against `usage.completion_tokens` within
`retokenize_slack`; either against the request's max_tokens. A count that fails a check fails the
sample with a BackendError that says both counts and the URL.

A transcription (`transcription_form`) sends the clip as a 16-bit WAV file and the decoder prompt's
language, and streams its answer, because only the stream's last chunk carries the token count
(`usage.completion_tokens`; the non-streaming answer counts seconds of audio). Its result is the text
with that count (GenResult.text, count): the text is not re-tokenized, since its tokens are not what
LoadGen counts and the benchmark answers with the text.

A chat (`chat_body`) sends a benchmark's conversation as it is (Qwen3-VL's system prompt, text and image),
not streamed: its benchmark judges each answer's whole latency, not its first token. Its result is the
reply's text with the server's `usage.completion_tokens` (`chat_result`).
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import wave
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmx.mlperf.backends.base import Audio, BackendError, ChatPrompt, GenRequest, GenResult, Sampling
from cmx.mlperf.backends.batching import token_list
from cmx.secrets import masked_url, public_url

NO_RETRY = ("cmx never retries a request: a retried sample would be timed from its retry, not from when "
            "LoadGen issued it")

# Re-tokenizing a server's decoded text need not give its token count back. For natural text the two
# differ at the edges: a leading space the tokenizer's normalizer doubles, an EOS kept as text, a
# word cut by max_tokens that encodes in fewer pieces; and, rarely, where the model produced a
# split that is not the tokenizer's own. So a re-tokenized count may differ from the server's by
# RETOKENIZE_SLACK_TOKENS plus RETOKENIZE_SLACK_SHARE of the server's count (2 of 16, 12 of 1024).
# Beyond that the text is not what the count says: the wrong tokenizer, a server that counts
# wrongly, or text no tokenizer round-trips (a random-weight model's, whose arbitrary tokens
# re-encode in up to a quarter more pieces).
RETOKENIZE_SLACK_TOKENS = 2
RETOKENIZE_SLACK_SHARE = 0.01


# --- URLs --------------------------------------------------------------------------------------------


def api_base(url: str) -> str:
    """The API's base URL, to which /models and /completions are appended."""
    return url.rstrip("/")


def server_root(url: str) -> str:
    """Where /health and /version live: the API base without its trailing /v1."""
    return api_base(url).removesuffix("/v1")


def refuse_two_credentials(url: str, key_given: bool) -> None:
    """An endpoint URL with credentials (http://user:PASS@host/v1) is sent as HTTP Basic auth, an API key as a
    Bearer token: a request carries one Authorization header, so the two together are refused before anything
    starts (rather than aiohttp's traceback on the first request)."""
    if key_given and masked_url(url) != url:
        raise BackendError(f"the endpoint URL {masked_url(url)} holds credentials and an API key is given too: a "
                           "request carries one Authorization header (Basic for the URL's, Bearer for the key)",
                           hint="drop the user:password@ from endpoint_url, or drop endpoint_api_key (and unset "
                                "$OPENAI_API_KEY)")


def curl_line(url: str, with_key: bool) -> str:
    """A command a user can paste to see whether the server answers (the key from the environment)."""
    auth = ' -H "Authorization: Bearer $OPENAI_API_KEY"' if with_key else ""
    return f"curl -sS{auth} {public_url(api_base(url))}/models"


# --- requests ----------------------------------------------------------------------------------------


def completion_body(request: GenRequest, model: str, sampling: Sampling, *, stream: bool,
                    server_token_ids: bool = True, min_tokens: bool = True) -> dict[str, Any]:
    """The /v1/completions request for one sample.

    `sampling` in full, and every penalty neutral, as the in-process backend's SamplingParams have
    them: vLLM fills a field the request leaves out from the model's generation_config.json (a
    top_k, min_p or repetition_penalty there would change the answer), so every one is sent.
    `top_k`, `min_p`, `min_tokens`, `ignore_eos`, `repetition_penalty` and `return_token_ids` are
    vLLM's extensions; a server that does not know one ignores it (and without `return_token_ids`
    returns no ids: see TextTokens). `seed` is OpenAI's, sent only when the sampling has one. `min_tokens`
    False leaves min_tokens out (EndpointConfig.send_min_tokens).
    """
    body: dict[str, Any] = {
        "model": model,
        "prompt": token_list(request.prompt_ids),
        "max_tokens": request.max_tokens,
        **({"min_tokens": request.min_tokens} if min_tokens else {}),
        **sampling_fields(sampling),
        "ignore_eos": False,
        "stream": stream,
    }
    if server_token_ids:
        body["return_token_ids"] = True
    else:
        body["skip_special_tokens"] = False  # keep EOS in the text, so that re-tokenizing finds it
    if stream:
        body["stream_options"] = {"include_usage": True}  # the token count, in a last chunk
    return body


def sampling_fields(sampling: Sampling) -> dict[str, Any]:
    """`sampling` in full, every penalty neutral, one choice, and the seed where it has one: what every request body
    carries, so that no server default (generation_config.json) chooses a token."""
    fields: dict[str, Any] = {"temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": sampling.top_k,
                              "min_p": 0.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
                              "repetition_penalty": 1.0, "n": 1}
    if sampling.seed is not None:
        fields["seed"] = sampling.seed
    return fields


def chat_body(chat: ChatPrompt, model: str, sampling: Sampling) -> dict[str, Any]:
    """The /v1/chat/completions request for one conversation: its messages as they are, not streamed, a max_tokens
    only where the chat sets one, and `sampling` in full with every penalty neutral, as completion_body sends them.

    Qwen3-VL's reference sends its sampling fields as null, which a server fills from the model's
    generation_config.json; its benchmark's sampling is those values (temperature 0.7, top_p 0.8, top_k 20), sent
    here, so that a server started with other defaults (vLLM's `--generation-config vllm`) still samples as the
    reference's did, and a user's override reaches the server."""
    body: dict[str, Any] = {"model": model, "messages": list(chat.messages), **sampling_fields(sampling),
                            "stream": False}
    if chat.max_tokens is not None:
        body["max_tokens"] = chat.max_tokens
    return body


# Whisper's special tokens that are not a language (a language token is <|en|>, <|yue|>, ...)
_NOT_LANGUAGES = frozenset({"startoftranscript", "transcribe", "translate", "notimestamps", "nospeech", "startoflm",
                            "startofprev", "endoftext", "nocaptions"})
_SPECIAL = re.compile(r"<\|([a-z]+(?:[-_][a-z]+)?)\|>")


def wav_bytes(audio: Audio) -> bytes:
    """The clip as a 16-bit mono WAV file: its float32 samples times 32768, rounded (exact for samples read from
    a 16-bit file, as int16 / 32768)."""
    import numpy as np

    samples = np.clip(np.rint(np.asarray(audio.samples, dtype=np.float64) * 32768.0), -32768, 32767)
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(int(audio.sample_rate))
        w.writeframes(samples.astype("<i2").tobytes())
    return out.getvalue()


def transcription_language(prompt_tokens: Sequence[str | None]) -> str:
    """The language of a Whisper decoder prompt (its tokens: <|startoftranscript|><|en|><|transcribe|>
    <|notimestamps|>), which the transcription route takes to build the same prompt. Refused for a prompt that is
    not a transcription without timestamps: the route would build another one."""
    names = [m.group(1) for t in prompt_tokens if t and (m := _SPECIAL.fullmatch(t))]
    languages = [n for n in names if n not in _NOT_LANGUAGES]
    shown = "".join(t or "?" for t in prompt_tokens)
    if "transcribe" not in names or "notimestamps" not in names or len(languages) != 1:
        raise BackendError(f"the decoder prompt {shown} is not one language's transcription without timestamps, the "
                           "prompt a transcription route builds from a language",
                           hint="the endpoint backend sends speech only as /v1/audio/transcriptions requests")
    return languages[0]


def transcription_form(request: GenRequest, model: str, sampling: Sampling, language: str | None) -> dict[str, str]:
    """The form fields of one /v1/audio/transcriptions request (the clip goes as the `file` field beside them):
    the language, `sampling`, the request's max_tokens, and a stream that ends with its usage. The route takes no
    min_tokens: a transcript shorter than the request's min_tokens fails the sample (TranscriptAssembler)."""
    fields = {"model": model, "response_format": "json", "temperature": str(sampling.temperature),
              "top_p": str(sampling.top_p), "top_k": str(sampling.top_k),
              "max_completion_tokens": str(request.max_tokens), "stream": "true", "stream_include_usage": "true"}
    if language is not None:  # None: the server detects it
        fields["language"] = language
    if sampling.seed is not None:
        fields["seed"] = str(sampling.seed)
    return fields


# --- answers -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """What the first choice of a completion, or of one streamed chunk, carried."""

    token_ids: list[int] | None = None
    text: str = ""
    finish_reason: str | None = None
    completion_tokens: int | None = None  # usage.completion_tokens, where the server sent it
    has_choice: bool = True  # False for the usage-only chunk that ends a stream


def server_error_text(data: Any) -> str | None:
    """The message of an error object ({"error": {"message": ...}}, {"error": "..."}, {"message": ...}, or FastAPI's
    {"detail": "..."}, which vllm-omni's video routes raise)."""
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or error)
    if error:
        return str(error)
    if "message" in data and "choices" not in data:
        return str(data["message"])
    if isinstance(data.get("detail"), str):
        return str(data["detail"])
    return None


def parse_answer(data: Any) -> Answer:
    """A completion, or one streamed chunk of one, as JSON data; ValueError when it is neither."""
    if not isinstance(data, dict):
        raise ValueError("the answer is not a JSON object")
    if (error := server_error_text(data)) is not None:
        raise ValueError(f"the server reported an error: {error}")
    usage = data.get("usage")
    count = usage.get("completion_tokens") if isinstance(usage, dict) else None
    count = count if isinstance(count, int) else None
    choices = data.get("choices")
    if not choices:
        return Answer(completion_tokens=count, has_choice=False)
    choice = choices[0] if isinstance(choices, list) else None
    if not isinstance(choice, dict):
        raise ValueError("'choices' is not a list of objects")
    ids = choice.get("token_ids")
    if ids is not None and not (isinstance(ids, list) and all(isinstance(t, int) for t in ids)):
        raise ValueError("'token_ids' is not a list of integers")
    # a completion's text is `text`; a transcription chunk's, its delta's content; a chat answer's, its message's
    delta, message = choice.get("delta"), choice.get("message")
    text = (choice.get("text") or (delta.get("content") if isinstance(delta, dict) else None)
            or (message.get("content") if isinstance(message, dict) else None))
    return Answer(token_ids=ids, text=str(text or ""), finish_reason=choice.get("finish_reason"),
                  completion_tokens=count)


class TextTokens:
    """Re-tokenizes generated text with the model's tokenizer.json, for a server that returns no
    token ids (the `tokenizers` library: quick to load, no transformers import).

    Not always the server's ids: a byte-fallback BPE decodes ids to text that can encode to other
    ids of the same text, so the count can differ from the server's. StartInfo says when a run
    took its ids from here."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        path = folder / "tokenizer.json"
        if not path.is_file():
            raise BackendError(f"no tokenizer.json in {folder}", hint="give the model's folder as the tokenizer")
        self._tokenizer = Tokenizer.from_file(str(path))
        self.folder = folder

    def ids(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def token(self, token_id: int) -> str | None:
        """The token `token_id` stands for (<|en|>), None when the vocabulary has no such id."""
        return self._tokenizer.id_to_token(int(token_id))

    def id_of(self, token: str) -> int | None:
        """The id of `token` (<|transcribe|>), None when the vocabulary has no such token."""
        found = self._tokenizer.token_to_id(token)
        return None if found is None else int(found)


def retokenize_slack(count: int) -> int:
    """How far a re-tokenized count may be from the server's `count` (see RETOKENIZE_SLACK_TOKENS)."""
    return RETOKENIZE_SLACK_TOKENS + int(count * RETOKENIZE_SLACK_SHARE)


def server_ids(request: GenRequest, ids: list[int], count: int | None, url: str) -> list[int]:
    """The server's own output ids, checked against its usage count (exactly: both are its own) and max_tokens."""
    if count is not None and count != len(ids):
        raise ValueError(f"{len(ids)} token ids but a usage count of {count}")
    if len(ids) > request.max_tokens:
        raise BackendError(f"{request.name}: the server returned {len(ids)} output token ids, more than "
                           f"the request's max_tokens {request.max_tokens}", where=public_url(url) or None,
                           hint="the server does not honour max_tokens; cmx counts no tokens beyond what was asked")
    return ids


def retokenized_ids(request: GenRequest, text: str, count: int | None, tokens: TextTokens, url: str) -> list[int]:
    """Text from a server that returns no ids, re-tokenized, and the count checked against the server's
    usage.completion_tokens (within retokenize_slack) and max_tokens. Without a usage count nothing
    could check it: a ValueError that says what cmx had."""
    ids = tokens.ids(text)
    if count is None:
        raise ValueError(f"neither token ids nor a token count (usage.completion_tokens): only text, which "
                         f"re-tokenizes to {len(ids)} tokens with {tokens.folder}, and nothing to check that count "
                         "against")
    where, what = public_url(url) or None, request.name
    if count > request.max_tokens:
        raise BackendError(f"{what}: the server counted {count} output tokens (usage.completion_tokens), more than "
                           f"the request's max_tokens {request.max_tokens}", where=where,
                           hint="the server does not honour max_tokens, or miscounts; cmx counts no tokens beyond "
                                "what was asked")
    slack = retokenize_slack(count)
    if abs(len(ids) - count) > slack:
        more = f"{len(ids) - count} more" if len(ids) > count else f"{count - len(ids)} fewer"
        raise BackendError(f"{what}: the server counted {count} output tokens (usage.completion_tokens), but its "
                           f"text re-tokenizes to {len(ids)} with {tokens.folder} ({more}; re-tokenizing may "
                           f"differ by {slack})", where=where,
                           hint="give the served model's own tokenizer (tokenizer), or use a server that returns "
                                "token ids (vLLM's return_token_ids); cmx reports no token count the server did not "
                                "generate")
    return ids


def checked_length(request: GenRequest, result: GenResult, url: str, *, count: int | None = None,
                   tokens: TextTokens | None = None) -> GenResult:
    """`result` if it has at least min_tokens; else a BackendError naming the URL and the cause its
    finish reason (or the re-tokenizing, `tokens`, and the server's `count`) points to."""
    n = result.n_tokens
    if n >= request.min_tokens:
        return result
    reason = result.finish_reason or "none"
    head = (f"{request.name}: the server returned {n} output tokens (finish reason {reason}), "
            f"fewer than min_tokens {request.min_tokens}")
    if tokens is not None and count is not None and count >= request.min_tokens:
        cause = (f": it counted {count}, but its text re-tokenizes to {n} with {tokens.folder}",
                 "use a server that returns token ids (vLLM's return_token_ids): LoadGen needs each sample's own count")
    elif reason == "stop":
        cause = (": it stopped at the end-of-sequence token although min_tokens held that back, so it does not "
                 "honour min_tokens (vLLM's extension of the OpenAI API)",
                 "use a server that passes min_tokens to its engine (vLLM's OpenAI server does); LoadGen rejects a "
                 f"response of fewer than {request.min_tokens} tokens")
    elif reason == "length":
        cause = (f": it reached a length limit, so the prompt ({len(request.prompt_ids)} tokens) leaves fewer than "
                 "min_tokens below the server's max_model_len",
                 "raise the server's --max-model-len, or shorten the prompts (rows, or the dataset's)")
    else:
        cause = ("", "see the server's log for why it stopped")
    raise BackendError(head + cause[0], where=public_url(url) or None, hint=cause[1])


def completion_result(request: GenRequest, data: Any, tokens: TextTokens | None, url: str = "") -> GenResult:
    """The result of a non-streaming answer from `url` (ValueError when malformed; BackendError when its
    count fails a check or is shorter than min_tokens)."""
    answer = parse_answer(data)
    if not answer.has_choice:
        raise ValueError("the answer has no choices (an empty 'choices' list): the server generated nothing")
    if tokens is None:
        if answer.token_ids is None:
            raise ValueError("no token_ids in the answer (vLLM's return_token_ids)")
        ids = server_ids(request, answer.token_ids, answer.completion_tokens, url)
    else:
        ids = retokenized_ids(request, answer.text, answer.completion_tokens, tokens, url)
    return checked_length(request, GenResult(id=request.id, token_ids=ids, finish_reason=answer.finish_reason or ""),
                          url, count=answer.completion_tokens, tokens=tokens)


def chat_result(request: GenRequest, data: Any, url: str = "") -> GenResult:
    """A chat answer's result: the reply's text (empty where the message has no content) with the server's token
    count, which LoadGen's n_tokens is (ValueError when the answer is malformed or has no count; BackendError when
    the count exceeds the chat's max_tokens)."""
    answer = parse_answer(data)
    if not answer.has_choice:
        raise ValueError("the answer has no choices (an empty 'choices' list): the server generated nothing")
    if answer.completion_tokens is None:
        raise ValueError("no token count (usage.completion_tokens), which LoadGen's n_tokens is")
    bound = request.chat.max_tokens if request.chat is not None else None
    if bound is not None and answer.completion_tokens > bound:
        raise BackendError(f"{request.name}: the server counted {answer.completion_tokens} output tokens "
                           f"(usage.completion_tokens), more than the chat's max_tokens {bound}",
                           where=public_url(url) or None, hint="the server does not honour max_tokens, or miscounts")
    return GenResult(id=request.id, token_ids=[], finish_reason=answer.finish_reason or "", text=answer.text,
                     count=answer.completion_tokens)


# --- streams -----------------------------------------------------------------------------------------


class SseBuffer:
    """Server-sent events from a byte stream: `feed_bytes(bytes)` returns the `data:` payloads of the events it
    completed, as bytes (an event ends at a blank line, and a network chunk may end mid-event); `feed` the same
    decoded. Comments (":" lines, keep-alive pings) and other fields are skipped.

    Bytes, so that the hot path never decodes an event to str (StreamAssembler.add_bytes decodes its JSON from the
    bytes). A chunk's trailing CR is held back until the next chunk says whether it began a CRLF, so that the events
    are the same wherever the network cut the stream."""

    def __init__(self) -> None:
        self._pending = b""
        self._cr = False  # the last chunk ended in a CR, not yet normalized

    def feed_bytes(self, chunk: bytes) -> list[bytes]:
        if self._cr:
            chunk, self._cr = b"\r" + chunk, False
        if chunk.endswith(b"\r"):
            chunk, self._cr = chunk[:-1], True
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n")
        pending = self._pending + chunk
        if b"\n\n" not in pending:
            self._pending = pending
            return []
        *events, self._pending = pending.split(b"\n\n")
        if pending.count(b"\n") == 2 * len(events) + self._pending.count(b"\n"):
            # no event holds a line break of its own: each is one line, as every server sends them
            return [event[5:].lstrip(b" ") for event in events if event.startswith(b"data:")]
        payloads = []
        for event in events:
            if event.startswith(b"data:") and b"\n" not in event:  # the one-line event every server sends
                payloads.append(event[5:].lstrip(b" "))
                continue
            data = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
            if data:
                payloads.append(b"\n".join(data))
        return payloads

    def feed(self, chunk: bytes) -> list[str]:
        return [payload.decode("utf-8") for payload in self.feed_bytes(chunk)]


def stream_answer(payload: str) -> Answer | None:
    """One server-sent event's payload: its answer, None for the [DONE] that ends a stream (ValueError when it is
    neither)."""
    if payload.strip() == "[DONE]":
        return None
    try:
        return parse_answer(json.loads(payload))
    except json.JSONDecodeError as exc:
        raise ValueError(f"a streamed chunk is not JSON: {exc}") from None


class StreamAssembler:
    """One streamed completion's chunks into its result. `add(payload)` (or `add_bytes`, the hot path) returns the
    first output token id on the chunk that brings it (once), for LoadGen's FirstTokenComplete; `result()` gives the
    whole answer. A malformed stream is a ValueError; a count that fails a check (see the module docstring), a
    BackendError naming `url`.

    `add_bytes` reads a chunk with a typed decode of only the fields read here (cmx.mlperf.backends.chunks); a chunk
    that decode does not take as it is (an error object, a field of another type, not JSON, a [DONE] with spaces)
    goes to `add`, whose parse_answer rules and messages are the one definition of what a chunk means."""

    def __init__(self, request: GenRequest, tokens: TextTokens | None = None, url: str = "") -> None:
        from cmx.mlperf.backends.chunks import typed_chunk

        self.request = request
        self.tokens = tokens  # None: the server's ids
        self.url = url
        self.choices = 0  # chunks that carried a choice
        self.ids: list[int] = []
        self.text: list[str] = []
        self.finish_reason = ""
        self.count: int | None = None
        self.done = False
        self.first_sent = False
        self._typed = typed_chunk

    def add(self, payload: str) -> int | None:
        answer = stream_answer(payload)
        if answer is None:
            self.done = True
            return None
        if not answer.has_choice:
            self._take_count(answer.completion_tokens)
            return None
        return self._take(answer.completion_tokens, answer.token_ids, answer.text, answer.finish_reason)

    def add_bytes(self, payload: bytes) -> int | None:
        if payload == b"[DONE]":
            self.done = True
            return None
        chunk = self._typed(payload)
        if chunk is None:
            return self.add(payload.decode("utf-8"))
        count = chunk.usage.completion_tokens if chunk.usage is not None else None
        if not chunk.choices:
            self._take_count(count)
            return None
        choice = chunk.choices[0]
        return self._take(count, choice.token_ids, choice.content(), choice.finish_reason)

    def _take_count(self, count: int | None) -> None:
        if count is not None:
            self.count = count

    def _take(self, count: int | None, ids: list[int] | None, text: str, finish_reason: str | None) -> int | None:
        """A chunk with a choice: its count, ids or text and finish reason; the first token id when it brings it."""
        if count is not None:
            self.count = count
        self.choices += 1
        self.finish_reason = finish_reason or self.finish_reason
        if self.tokens is None:
            if ids is None:
                raise ValueError("a streamed chunk without token_ids (vLLM's return_token_ids)")
            self.ids.extend(ids)
            first = self.ids[0] if self.ids else None
        else:
            self.text.append(text)
            first = next(iter(self.tokens.ids(text)), None) if text and not self.first_sent else None
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


class TranscriptAssembler:
    """One streamed transcription's chunks into its result: the text, and the token count the stream ends with
    (usage.completion_tokens), checked against the request's max_tokens and min_tokens."""

    def __init__(self, request: GenRequest, url: str = "") -> None:
        self.request = request
        self.url = url
        self.choices = 0
        self.text: list[str] = []
        self.finish_reason = ""
        self.count: int | None = None
        self.done = False

    def add_bytes(self, payload: bytes) -> None:
        """A transcription is one request per clip, Offline: its events are decoded as they come (not the hot path)."""
        self.add(payload.decode("utf-8"))

    def add(self, payload: str) -> None:
        answer = stream_answer(payload)
        if answer is None:
            self.done = True
            return
        if answer.completion_tokens is not None:
            self.count = answer.completion_tokens
        if answer.has_choice:
            self.choices += 1
            self.text.append(answer.text)
            self.finish_reason = answer.finish_reason or self.finish_reason

    def result(self) -> GenResult:
        if not self.done:
            raise ValueError("the stream ended without its [DONE] event")
        if not self.choices:
            raise ValueError("no streamed chunk carried a choice: the server transcribed nothing")
        if self.count is None:
            raise ValueError("the stream ended without a token count (usage.completion_tokens, which "
                             "stream_include_usage asks for)")
        if self.count > self.request.max_tokens:
            raise BackendError(f"{self.request.name}: the server counted {self.count} output tokens "
                               f"(usage.completion_tokens), more than the request's max_completion_tokens "
                               f"{self.request.max_tokens}", where=public_url(self.url) or None,
                               hint="the server does not honour max_completion_tokens, or miscounts")
        if self.count < self.request.min_tokens:
            raise BackendError(f"{self.request.name}: the server transcribed it in {self.count} output "
                               f"tokens, fewer than {self.request.min_tokens}, which LoadGen needs (it rejects a "
                               "response of one token), and the transcription route takes no min_tokens",
                               where=public_url(self.url) or None,
                               hint="run this benchmark with vLLM in the harness process (drop _endpoint), which "
                                    "holds the end of the transcript back for one token")
        return GenResult(id=self.request.id, token_ids=[], finish_reason=self.finish_reason, text="".join(self.text),
                         count=self.count)


# --- errors ------------------------------------------------------------------------------------------


def http_error(status: int, body: str, *, url: str, what: str, key_given: bool) -> BackendError:
    """The error for an HTTP answer other than 200, by status. `what` names the request."""
    try:
        detail = server_error_text(json.loads(body)) or body
    except ValueError:
        detail = body
    detail = " ".join(detail.split())[:500]
    where = public_url(url)
    if status in (401, 403):
        if key_given:
            return BackendError(f"the server refused the API key (HTTP {status}) for {what}", where=where,
                                hint="check endpoint_api_key / $OPENAI_API_KEY (the key is not shown)")
        return BackendError(f"the server wants an API key (HTTP {status}) for {what}", where=where,
                            hint="give endpoint_api_key, or set $OPENAI_API_KEY")
    if status >= 500:
        return BackendError(f"the server failed {what} with HTTP {status}: {detail}", where=where,
                            hint=f"see the server's log for the cause; {NO_RETRY}")
    if status == 404:
        return BackendError(f"the server has no such route or model for {what} (HTTP 404): {detail}", where=where,
                            hint="the endpoint url must be the API's base (ending in /v1), and the model one "
                                 "that GET /v1/models lists")
    return BackendError(f"the server rejected {what} with HTTP {status}: {detail}", where=where,
                        hint="a prompt longer than the server's max_model_len, or a parameter it does not accept")


def unreachable_error(exc: BaseException, *, url: str, key_given: bool) -> BackendError:
    """The error for a first request (GET /models) that got no answer: TLS spoken to a server that does
    not speak it, a certificate not trusted, or no server there at all."""
    import aiohttp

    where = public_url(url)
    plain = "http://" + where.removeprefix("https://")
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return BackendError(f"the server at {where} has a TLS certificate this machine does not trust: "
                            f"{exc.certificate_error}",
                            hint="install the CA that signed it into this machine's trust store, or use the "
                                 "server's http:// URL on a trusted network")
    if isinstance(exc, aiohttp.ClientSSLError):
        # an https:// URL to a plain-HTTP server: the server answers the TLS hello with plain HTTP,
        # which OpenSSL reads as a wrong version number or a bad record
        return BackendError(f"the server at {where} does not speak TLS (the TLS handshake failed: "
                            f"{exc.os_error or exc}), so it may serve plain HTTP",
                            hint=f"if it serves plain HTTP, give its http:// URL: {plain}")
    return BackendError(f"the server at {where} is unreachable: {type(exc).__name__}: {exc}",
                        hint=f"is it running? try: {curl_line(url, key_given)}")


def transport_error(exc: BaseException, *, url: str, what: str, timeout_s: float) -> BackendError:
    """The error for a request that got no complete answer: a timeout, or a lost connection."""
    import aiohttp

    from cmx.mlperf.backends.http1 import ConnectFailed

    where = public_url(url)
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        return BackendError(f"{what} got no complete answer within request_timeout_s = {timeout_s:g} s", where=where,
                            hint=f"raise request_timeout_s, or lower max_concurrency or the target QPS; {NO_RETRY}")
    if isinstance(exc, (aiohttp.ClientConnectorError, ConnectFailed)):  # aiohttp's, or the lean client's
        return BackendError(f"cannot connect to the server for {what}: {exc.os_error or exc}", where=where,
                            hint="the server is not (or no longer) running; see its log")
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientOSError,
                        ConnectionError)):
        return BackendError(f"the connection to the server was lost during {what} ({type(exc).__name__}): "
                            "the server stopped or crashed", where=where,
                            hint=f"see the server's log for why; {NO_RETRY}")
    return BackendError(f"{what} failed: {type(exc).__name__}: {exc}", where=where, hint=NO_RETRY)


def malformed(what: str, url: str, problem: str, hint: str | None = None) -> BackendError:
    """The error for an answer that is not what the route sends (`hint`: what to check; by default, that the server
    speaks OpenAI's /v1/completions)."""
    return BackendError(f"the server's answer to {what} is malformed: {problem}", where=public_url(url),
                        hint=hint or "the endpoint must speak OpenAI's /v1/completions")
