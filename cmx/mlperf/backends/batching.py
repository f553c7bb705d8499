"""What both backends do with requests: their order in a batch, warm-up prompts, their expected cost, and a queue sink.

Shared by the in-process vLLM backend (cmx.mlperf.backends.vllm) and the endpoint backend
(cmx.mlperf.backends.endpoint), so the two order and warm up alike.
"""

from __future__ import annotations

import queue
import random
from collections.abc import Sequence

from cmx.mlperf.backends.base import Audio, GenRequest, GenResult

# Warm-up prompts: token ids drawn from a range every real vocabulary has, at lengths that make
# vLLM run both short and long prefills before the timed window
WARMUP_TOKEN_RANGE = (100, 1000)
WARMUP_PROMPT_LENGTHS = (16, 128, 512, 1024)
WARMUP_MAX_TOKENS = 8


def request_cost(request: GenRequest, output_tokens_estimate: int) -> int:
    """The tokens a request is expected to cost an engine: its prompt plus its likely output."""
    return len(request.prompt_ids) + min(request.max_tokens, output_tokens_estimate)


def longest_first(requests: Sequence[GenRequest]) -> list[GenRequest]:
    """`requests` by decreasing prompt length (stable), the order an engine is handed them in.

    vLLM admits waiting requests first come, first served while KV-cache blocks are free. Long
    prompts first is first-fit-decreasing packing: the big ones take the empty cache at the
    start, and the short ones fill the gaps finished sequences leave. It is also
    longest-processing-time-first scheduling: the run ends on short requests, so the tail where
    the batch drains and the device idles is short. Neighbours of similar length also make
    evenly sized prefill chunks.
    """
    return sorted(requests, key=lambda r: -len(r.prompt_ids))


def warmup_requests(count: int, max_model_len: int, seed: int = 0) -> list[GenRequest]:
    """`count` synthetic requests of varied lengths that fit in `max_model_len` (negative ids,
    never a caller's sample)."""
    rng = random.Random(seed)
    limit = max_model_len - WARMUP_MAX_TOKENS
    lengths = [min(WARMUP_PROMPT_LENGTHS[i % len(WARMUP_PROMPT_LENGTHS)], limit) for i in range(count)]
    return [GenRequest(id=-1 - i, prompt_ids=[rng.randrange(*WARMUP_TOKEN_RANGE) for _ in range(n)],
                       max_tokens=WARMUP_MAX_TOKENS) for i, n in enumerate(lengths)]


def audio_warmup_requests(count: int, decoder_start: int, sample_rate: int = 16000) -> list[GenRequest]:
    """`count` requests for a speech model (negative ids): its decoder's start token, with a second of silence as
    the clip, the shape of every real request (the encoder always sees a 30 s window)."""
    import numpy as np

    silence = Audio(np.zeros(sample_rate, dtype=np.float32), sample_rate)
    return [GenRequest(id=-1 - i, prompt_ids=[decoder_start], max_tokens=WARMUP_MAX_TOKENS, media=(silence,))
            for i in range(count)]


def token_list(ids: Sequence[int]) -> list[int]:
    """Token ids as a list of Python ints, which vLLM's prompt and a JSON body take (numpy arrays from the dataset
    convert in C)."""
    tolist = getattr(ids, "tolist", None)
    return tolist() if tolist is not None else [int(i) for i in ids]


class QueueSink:
    """A StreamSink that hands results (or errors) to a thread waiting on a queue."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[GenResult | BaseException] = queue.SimpleQueue()

    def on_first_token(self, request_id: int, token_id: int) -> None:
        pass

    def on_done(self, result: GenResult) -> None:
        self.queue.put(result)

    def on_error(self, request_id: int, error: BaseException) -> None:
        self.queue.put(error)
