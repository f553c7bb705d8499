"""A streamed completion chunk's typed decode: only the fields StreamAssembler reads, from the event's bytes.

msgspec decodes the JSON straight into these structs, skipping every field not named here (ids, logprobs, the
model's name, ...), with no dict and no str for the payload: about a fifth of json.loads plus parse_answer's checks
per event. It takes a chunk only where its types say exactly what parse_answer would read from it; anything else
(`typed_chunk` answers None) goes to openai_api.stream_answer, whose rules and messages are the one definition of a
chunk's meaning: an error object (`error`, `message`, `detail`, which are kept here only to see that they are
there), a field of another type (ids that are not integers, a text that is not a string), bytes that are not JSON
or not UTF-8. msgspec comes with vLLM, as aiohttp does; it is imported only here.
"""

from __future__ import annotations

import msgspec


class Usage(msgspec.Struct, gc=False):
    completion_tokens: int | None = None


class Delta(msgspec.Struct, gc=False):
    """A chat or transcription chunk's delta, or a chat answer's message: its text."""

    content: str | None = None


class Choice(msgspec.Struct, gc=False):
    text: str | None = None
    delta: Delta | None = None
    message: Delta | None = None
    token_ids: list[int] | None = None
    finish_reason: str | None = None

    def content(self) -> str:
        """The choice's text as parse_answer reads it: a completion's `text`, else its delta's or message's."""
        return (self.text or (self.delta.content if self.delta is not None else None)
                or (self.message.content if self.message is not None else None) or "")


class Chunk(msgspec.Struct, gc=False):
    choices: list[Choice] | None = None
    usage: Usage | None = None
    # present only in an error object, which parse_answer reads (its message is the sample's error)
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    message: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    detail: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_DECODER = msgspec.json.Decoder(Chunk)


def typed_chunk(payload: bytes) -> Chunk | None:
    """`payload` decoded, or None where parse_answer must read it (see the module docstring)."""
    try:
        chunk = _DECODER.decode(payload)
    except ValueError:  # msgspec's DecodeError and ValidationError, and UnicodeDecodeError, are ValueErrors
        return None
    if chunk.error is not msgspec.UNSET or chunk.message is not msgspec.UNSET or chunk.detail is not msgspec.UNSET:
        return None
    return chunk
