"""What a LoadGen SUT needs from an inference engine: token ids in, token ids out.

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

Token ids are plain ints below 2**31, so a SUT can hand LoadGen `int32` arrays of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cmx.errors import CmxError

# LoadGen computes TPOT as (latency - TTFT) / (n_tokens - 1) and writes an error into the log
# (which fails the accuracy check) for a response of fewer than 2 tokens, the first included.
MIN_OUTPUT_TOKENS = 2


class BackendError(CmxError):
    """The engine could not start, or a request failed or came back malformed."""


@dataclass(frozen=True)
class GenRequest:
    """One prompt. `id` is the caller's (a LoadGen query id or sample index) and comes back in
    the result; `prompt_ids` are token ids. Generation is greedy and stops at the model's EOS or
    after `max_tokens`; `min_tokens` (at least 2, see MIN_OUTPUT_TOKENS) holds EOS back."""

    id: int
    prompt_ids: Sequence[int]
    max_tokens: int = 1024
    min_tokens: int = MIN_OUTPUT_TOKENS

    def __post_init__(self) -> None:
        if len(self.prompt_ids) == 0:
            raise ValueError(f"request {self.id}: empty prompt")
        if self.min_tokens < MIN_OUTPUT_TOKENS:
            raise ValueError(f"request {self.id}: min_tokens {self.min_tokens} < {MIN_OUTPUT_TOKENS}: "
                             "LoadGen rejects a response of fewer than 2 tokens")
        if self.max_tokens < self.min_tokens:
            raise ValueError(f"request {self.id}: max_tokens {self.max_tokens} < min_tokens {self.min_tokens}")


@dataclass(frozen=True)
class GenResult:
    """The generated token ids of one request (the prompt not included; a final EOS included,
    as the accuracy checker and TEST06 expect). `finish_reason` is the engine's ("stop" at EOS,
    "length" at max_tokens), for logs."""

    id: int
    token_ids: list[int]
    finish_reason: str = ""

    @property
    def n_tokens(self) -> int:
        """What LoadGen's QuerySampleResponse calls n_tokens: every output token, the first included."""
        return len(self.token_ids)


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
        should stop the test."""


class Backend(Protocol):
    """An inference engine as a SUT uses it (see the module docstring for the contract)."""

    def start(self) -> StartInfo: ...

    def generate(self, requests: Sequence[GenRequest]) -> Iterator[GenResult]: ...

    def submit(self, request: GenRequest, sink: StreamSink) -> None: ...

    def details(self) -> Mapping[str, Any]: ...

    def stop(self) -> None: ...


def check_result(request: GenRequest, result: GenResult) -> GenResult:
    """`result` if it has at least the tokens the request asked for; a BackendError otherwise
    (an engine stops early when the prompt leaves no room below max_model_len)."""
    if result.n_tokens < request.min_tokens:
        raise BackendError(
            f"request {request.id}: the engine returned {result.n_tokens} tokens "
            f"(finish reason {result.finish_reason or 'unknown'}), fewer than min_tokens {request.min_tokens}",
            hint="the prompt may be too long for max_model_len; raise max_model_len or shorten the prompt")
    return result
