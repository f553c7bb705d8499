"""What a LoadGen SUT needs from an inference engine: token ids (and media: audio) in, token ids out; or a
conversation (chat messages, an image among them) in and text out, through an endpoint's chat route; or a text
prompt in and a video out (a diffusion pipeline: the mp4 written to a file, its digest answered).

A SUT (Offline, Server, Interactive) talks to one `Backend`; each engine (vLLM today) is one
module implementing it, the way pre-commit's languages implement `lang_base`. The contract:

- `start()` builds the engine(s) and warms them up, so that loading, compilation and graph
  capture all happen before LoadGen's timed window opens. It returns what it did (`StartInfo`)
  for the run record. Nothing is started before it (no threads in constructors).
- `generate(requests)` is the Offline path: the whole batch is handed to the engine at once, so
  its scheduler, not the harness, decides what runs together. Results come back as they are
  ready, in any order; match them by `GenResult.id`.
- `submit(request, sink)` is the Server / Interactive path: it returns at once (LoadGen's issue
  thread holds the GIL and latency counts from LoadGen's scheduled time, so nothing slow may
  happen there). The backend then calls `sink.on_first_token` once, before `sink.on_done`, which
  is the order LoadGen needs (FirstTokenComplete before QuerySamplesComplete). The sink's methods
  run on a thread the backend owns: keep them short (LoadGen's *Complete calls are).
- `details()` says what the backend did during the run that `StartInfo` could not know yet (the
  Ray replicas' samples and tokens), for the run record; read it before `stop()`.
- `stop()` shuts the engine(s) down; in-flight streaming requests are cancelled without a
  callback. A backend is also a context manager that starts and stops itself.
- A backend that knows it can serve nothing more (its server stopped answering, its last replica
  died) fails requests with `BackendDead`, never for one slow or failed request; a SUT that hears
  it stops the test at once instead of failing every sample LoadGen still has scheduled.

A backend that streams runs its requests on one `loop_thread.LoopThread` (an asyncio loop on a
thread the backend owns) and stops through its `close()`, whose order is the same for every
backend: take no new requests, cancel those in flight, close the engine or connections (its close
hooks), end the loop and its thread; each wait is bounded.

Token ids are plain ints below 2**31, so a SUT can hand LoadGen `int32` arrays of them. How each
output token is chosen is the backend's `Sampling`, one for the whole run (its warm-up included).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, TypeVar

from cmx.errors import CmxError

# LoadGen computes TPOT as (latency - TTFT) / (n_tokens - 1) and writes an error into the log
# (which fails the accuracy check) for a response of fewer than 2 tokens, the first included.
MIN_OUTPUT_TOKENS = 2


class BackendError(CmxError):
    """The engine could not start, or a request failed or came back malformed."""

    counted = False  # the message already counts a batch's samples (completed, lost in flight, not sent)


class BackendDead(BackendError):
    """The backend can serve nothing more: its server stopped answering, or its last replica died. Raised
    (or given to `StreamSink.on_error`) only on proof; `message` names what died and how, as the first
    words of the test's failure."""


class SamplingError(CmxError):
    """Sampling parameters an engine would refuse (a negative temperature, top_p outside (0, 1])."""


@dataclass(frozen=True)
class Sampling:
    """How each output token is chosen, in vLLM's terms (SamplingParams, and the OpenAI server's fields).

    temperature 0 is greedy (top_p and top_k then do nothing); top_k 0 or -1 is off (every token
    may be drawn), and top_k 1 is greedy at any temperature. `seed` seeds each request's own
    generator (the same seed for every request, as the references' SamplingParams have it); None
    leaves the draw unseeded, so a sampled run differs from the next one.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None

    def __post_init__(self) -> None:
        # vLLM's own bounds (SamplingParams._verify_args): refused here, before an engine starts
        if not math.isfinite(self.temperature) or not 0.0 <= self.temperature <= 2.0:
            raise SamplingError(f"temperature {self.temperature} is outside [0, 2]",
                                hint="0 is greedy; the references use 0 or 1")
        if not 0.0 < self.top_p <= 1.0:
            raise SamplingError(f"top_p {self.top_p} is outside (0, 1]", hint="1.0 keeps every token (off)")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < -1:
            raise SamplingError(f"top_k {self.top_k!r} is not an integer of at least -1",
                                hint="0 or -1 is off; 1 is greedy")

    @property
    def greedy(self) -> bool:
        """Every token is a most likely one. top_k 1 at a temperature above 0 still draws between tokens tied
        for the top logit (vLLM's top-k keeps ties), so there the seed picks among equals."""
        return self.temperature == 0.0 or self.top_k == 1

    @property
    def seeded_draws(self) -> bool:
        """vLLM keeps a seeded generator per request (SamplingType.RANDOM_SEED): a seed and a temperature above 0,
        whatever top_k is."""
        return self.seed is not None and self.temperature > 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Sampling:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def differences(self, other: Sampling) -> tuple[str, ...]:
        """The fields whose values differ from `other`'s, in field order."""
        return tuple(f.name for f in fields(self) if getattr(self, f.name) != getattr(other, f.name))

    def describe(self) -> str:
        """One line for logs and summaries: `temperature 1.0, top_p 1.0, top_k off, no seed`."""
        top_k = "off" if self.top_k <= 0 else str(self.top_k)
        seed = "no seed" if self.seed is None else f"seed {self.seed}"
        return f"temperature {self.temperature:g}, top_p {self.top_p:g}, top_k {top_k}, {seed}"


GREEDY = Sampling()


@dataclass(frozen=True, eq=False)
class Audio:
    """A clip the model hears with its prompt (Whisper's encoder input): mono float32 `samples` in [-1, 1) at
    `sample_rate` Hz. Compared by identity: its samples are a numpy array (base.py does not import numpy)."""

    samples: Any
    sample_rate: int


Media = Audio  # what a request can carry besides its tokens


@dataclass(frozen=True, eq=False)
class ChatPrompt:
    """A conversation for an OpenAI chat route, sent as it is: `messages` of roles and content (Qwen3-VL's system
    prompt, then its text part and its image as a data URL). `max_tokens` bounds the answer where it is set; None
    sends no bound, as Qwen3-VL's reference does (the server's context length bounds it). Its answer is text with
    the server's count of its tokens (GenResult.text, count). Compared by identity: its messages may hold megabytes
    of image."""

    messages: tuple[Mapping[str, Any], ...]
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if not self.messages:
            raise ValueError("a chat prompt needs at least one message")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"a chat prompt's max_tokens must be at least 1, not {self.max_tokens}")


VIDEO_FOLDER = "videos"  # where a test's videos go, in its output folder (the harness's SUT names it per request)


@dataclass(frozen=True)
class VideoPrompt:
    """A text-to-video request: the prompt's `text`, as the model reads it (no token ids: the pipeline tokenizes it
    with its own text encoder's tokenizer), `file_name`, what its video is written as (the benchmark's name for it:
    VBench reads each video's prompt from its file name), and `folder`, where (the test's videos folder: one backend
    serves a scenario's tests in turn, each writing into its own; None: the backend's own folder)."""

    text: str
    file_name: str
    folder: Path | None = None

    def __post_init__(self) -> None:
        if not self.text.strip():
            raise ValueError("a video prompt needs text")
        if not self.file_name or "/" in self.file_name or self.file_name in (".", ".."):
            raise ValueError(f"a video's file name must be a plain name in the backend's folder, not "
                             f"{self.file_name!r}")


@dataclass(frozen=True)
class Video:
    """A generated video as written: its file, the sha256 of the file's bytes (what the SUT answers LoadGen with),
    its frame count and frame rate."""

    path: str
    sha256: str
    frames: int
    fps: int

    @property
    def digest(self) -> bytes:
        """The sha256 as the 32 bytes LoadGen logs (hex in its accuracy log: the same text as `sha256sum`)."""
        return bytes.fromhex(self.sha256)


@dataclass(frozen=True)
class GenRequest:
    """One prompt. `id` is the caller's (a LoadGen query id or sample index) and comes back in
    the result; `prompt_ids` are token ids (an encoder-decoder model's decoder prompt), and `media`
    what the model takes besides them (Whisper's clip). Generation stops at the model's EOS or after
    `max_tokens`; `min_tokens` (at least 2, see MIN_OUTPUT_TOKENS) holds EOS back.

    A `chat` request is a conversation instead (no token ids): it goes to a chat route with the chat's own
    bound, and `max_tokens` and `min_tokens` are not sent (an engine that takes token ids refuses it). A `video`
    request is a text-to-video prompt (no token ids either), for a diffusion pipeline, which ignores both bounds.

    `sample` is the dataset row (LoadGen's sample index) a SUT's request is for: messages name the request by it
    (`request_name`), since LoadGen's query id is an address that means nothing to a reader."""

    id: int
    prompt_ids: Sequence[int]
    max_tokens: int = 1024
    min_tokens: int = MIN_OUTPUT_TOKENS
    media: tuple[Media, ...] = ()
    chat: ChatPrompt | None = None
    sample: int | None = None
    video: VideoPrompt | None = None

    def __post_init__(self) -> None:
        if len(self.prompt_ids) == 0 and self.chat is None and self.video is None:
            raise ValueError(f"{self.name}: empty prompt")
        if self.chat is not None and (len(self.prompt_ids) or self.media):
            raise ValueError(f"{self.name}: a chat request carries its whole prompt in its messages")
        if self.video is not None and (len(self.prompt_ids) or self.media or self.chat is not None):
            raise ValueError(f"{self.name}: a video request carries its whole prompt in its text")
        if self.min_tokens < MIN_OUTPUT_TOKENS:
            raise ValueError(f"{self.name}: min_tokens {self.min_tokens} < {MIN_OUTPUT_TOKENS}: "
                             "LoadGen rejects a response of fewer than 2 tokens")
        if self.max_tokens < self.min_tokens:
            raise ValueError(f"{self.name}: max_tokens {self.max_tokens} < min_tokens {self.min_tokens}")

    @property
    def name(self) -> str:
        """How messages name this request (`request_name`)."""
        return request_name(self.id, self.sample)


def request_name(request_id: int, sample: int | None = None) -> str:
    """How messages name a request: by its sample index ("sample 7") when a SUT sent it for one; the backend's
    warm-up requests (start(), before LoadGen's test) have negative ids, "warm-up request 1" for id -1; any other
    by its id ("request 17")."""
    if request_id < 0:
        return f"warm-up request {-request_id}"
    return f"sample {sample}" if sample is not None else f"request {request_id}"


@dataclass(frozen=True)
class GenResult:
    """The generated token ids of one request (the prompt not included; a final EOS included,
    as the accuracy checker and TEST06 expect). `finish_reason` is the engine's ("stop" at EOS,
    "length" at max_tokens), for logs.

    An engine that answers with text only and a count of its tokens (vLLM's transcription route, a chat route)
    gives `text` and `count`, and no token ids: the benchmark's ResponseEncoder reads the text, and LoadGen's
    n_tokens is the engine's count. A diffusion pipeline gives the `video` it wrote, and no tokens."""

    id: int
    token_ids: list[int]
    finish_reason: str = ""
    text: str | None = None
    count: int | None = None
    video: Video | None = None

    @property
    def n_tokens(self) -> int:
        """What LoadGen's QuerySampleResponse calls n_tokens: every output token, the first included."""
        return len(self.token_ids) if self.count is None else self.count


@dataclass(frozen=True)
class StartInfo:
    """What `start()` did, for the run record: engines built, how long that took, and the
    warm-up requests served before returning. `engines` describes each engine (its devices,
    arguments and environment) in the backend's own terms."""

    engines: tuple[Mapping[str, Any], ...]
    start_seconds: float
    warmup_requests: int
    warmup_seconds: float
    details: Mapping[str, Any] = field(default_factory=dict)


class StreamSink(Protocol):
    """Receives one streaming request's progress, on the backend's thread."""

    def on_first_token(self, request_id: int, token_id: int) -> None:
        """The first generated token, as soon as the engine has it (before on_done)."""

    def on_done(self, result: GenResult) -> None:
        """All tokens; `result.token_ids[0]` is the token given to on_first_token."""

    def on_error(self, request_id: int, error: BaseException) -> None:
        """The request failed; no on_done follows. LoadGen would wait for it forever, so a SUT
        should stop the test. A `BackendDead` error says no later request can succeed either."""


class Backend(Protocol):
    """An inference engine as a SUT uses it (see the module docstring for the contract)."""

    def start(self) -> StartInfo: ...

    def generate(self, requests: Sequence[GenRequest]) -> Iterator[GenResult]: ...

    def submit(self, request: GenRequest, sink: StreamSink) -> None: ...

    def details(self) -> Mapping[str, Any]: ...

    def stop(self) -> None: ...


_S = TypeVar("_S", bound="StartStop")


class StartStop(ABC):
    """A context manager over `start()` and `stop()`: a `with` block starts it and stops it however the
    block ends (the backends and the vLLM server process)."""

    @abstractmethod
    def start(self) -> object: ...

    @abstractmethod
    def stop(self) -> None: ...

    def __enter__(self: _S) -> _S:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class BackendDefaults(StartStop):
    """What a `Backend` that has nothing more to say may inherit: the context manager and empty `details()`."""

    def details(self) -> dict[str, Any]:
        """Nothing beyond what start() returned."""
        return {}


def check_result(request: GenRequest, result: GenResult) -> GenResult:
    """`result` if it has at least the tokens the request asked for; a BackendError otherwise
    (an engine stops early when the prompt leaves no room below max_model_len)."""
    if result.n_tokens < request.min_tokens:
        raise BackendError(
            f"{request.name}: the engine returned {result.n_tokens} tokens "
            f"(finish reason {result.finish_reason or 'unknown'}), fewer than min_tokens {request.min_tokens}",
            hint="the prompt may be too long for max_model_len; raise max_model_len or shorten the prompt")
    return result
