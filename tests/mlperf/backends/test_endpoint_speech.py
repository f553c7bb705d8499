"""A speech model behind an endpoint: each clip goes to /v1/audio/transcriptions as a WAV file with its decoder
prompt's language, streamed so that the answer ends with its token count; the result is the text with that count.

Against a fake server that records each form and answers as vLLM's transcription route does (the SSE chunks of
`delta.content`, then the usage). The real route, on the tiny Whisper, is the whisper row's e2e test in
tests/mlperf/test_app_benchmarks.py, which compares its transcripts with the in-process engine's.
"""

from __future__ import annotations

import io
import json
import wave
from pathlib import Path

import numpy as np
import pytest

from cmx.mlperf.backends.base import GREEDY, Audio, BackendError, GenRequest, Sampling
from cmx.mlperf.backends.batching import QueueSink
from cmx.mlperf.backends.endpoint import EndpointBackend, speech_decoder_start
from cmx.mlperf.backends.endpoint_client import EndpointConfig
from cmx.mlperf.backends.openai_api import (
    TranscriptAssembler,
    transcription_form,
    transcription_language,
    wav_bytes,
)
from cmx.mlperf.benchmarks.whisper.prompts import decoder_prompt_ids
from cmx.mlperf.benchmarks.whisper.tiny import make_tiny_whisper
from tests.fake_openai import FakeOpenAIServer

PROMPT = ["<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"]


def chunk(content: str | None = None, finish: str | None = None, usage: int | None = None) -> str:
    choices = [] if content is None else [{"delta": {"content": content}, **({"finish_reason": finish} if finish
                                                                            else {})}]
    data: dict = {"object": "transcription.chunk", "choices": choices}
    if usage is not None:
        data["usage"] = {"prompt_tokens": 196, "completion_tokens": usage, "total_tokens": 196 + usage}
    return json.dumps(data)


def test_a_clip_goes_as_a_16_bit_wav_that_reads_back_sample_for_sample():
    ints = np.array([0, 1, -1, 32767, -32768, 1234], dtype=np.int16)
    clip = Audio((ints / 32768.0).astype(np.float32), 16000)  # as the dataset reads a 16-bit file
    with wave.open(io.BytesIO(wav_bytes(clip))) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 16000)
        assert np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").tolist() == ints.tolist()


def test_the_language_is_the_decoder_prompts_and_another_task_is_refused():
    assert transcription_language(PROMPT) == "en"
    assert transcription_language(["<|startoftranscript|>", "<|yue|>", "<|transcribe|>", "<|notimestamps|>"]) == "yue"
    for prompt in (["<|startoftranscript|>", "<|en|>", "<|translate|>", "<|notimestamps|>"],  # another task
                   ["<|startoftranscript|>", "<|en|>", "<|transcribe|>"],  # with timestamps
                   ["<|startoftranscript|>", "<|transcribe|>", "<|notimestamps|>"]):  # no language
        with pytest.raises(BackendError, match="not one language's transcription without timestamps"):
            transcription_language(prompt)


def test_the_form_asks_for_the_sampling_the_length_and_a_stream_that_ends_with_its_usage():
    request = GenRequest(id=3, prompt_ids=[1, 2, 3, 4], max_tokens=200)
    form = transcription_form(request, "whisper", GREEDY, "en")
    assert form == {"model": "whisper", "response_format": "json", "temperature": "0.0", "top_p": "1.0",
                    "top_k": str(GREEDY.top_k), "max_completion_tokens": "200", "stream": "true",
                    "stream_include_usage": "true", "language": "en"}
    assert transcription_form(request, "w", Sampling(temperature=1.0, top_p=0.9, top_k=5, seed=7), None)["seed"] == "7"


def test_a_transcription_stream_gives_the_text_and_the_servers_token_count():
    request = GenRequest(id=5, prompt_ids=[1, 2, 3, 4], max_tokens=24)
    stream = TranscriptAssembler(request, "http://h/v1/audio/transcriptions")
    for payload in (chunk(" Hello"), chunk(" world."), chunk("", finish="stop"), chunk(usage=4), "[DONE]"):
        stream.add(payload)
    result = stream.result()
    assert (result.text, result.count, result.n_tokens, result.token_ids) == (" Hello world.", 4, 4, [])
    assert result.finish_reason == "stop"

    def after(*payloads: str) -> TranscriptAssembler:
        s = TranscriptAssembler(request, "http://h/v1/audio/transcriptions")
        for p in payloads:
            s.add(p)
        return s

    with pytest.raises(ValueError, match="without a token count"):
        after(chunk(" hi"), "[DONE]").result()
    with pytest.raises(ValueError, match="without its \\[DONE\\] event"):
        after(chunk(" hi"), chunk(usage=2)).result()
    with pytest.raises(BackendError, match=r"counted 30 output tokens .* more than the request's max_completion"):
        after(chunk(" hi"), chunk(usage=30), "[DONE]").result()
    with pytest.raises(BackendError, match="transcribed it in 1 output tokens, fewer than 2") as short:
        after(chunk(""), chunk(usage=1), "[DONE]").result()
    assert "drop _endpoint" in str(short.value.hint)


@pytest.fixture(scope="module")
def whisper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_whisper(tmp_path_factory.mktemp("whisper") / "model").path


class TranscribingServer(FakeOpenAIServer):
    """vLLM's transcription route as it answers: each clip's text in SSE chunks, then the usage; `forms` holds
    each request's fields and its file's bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict] = []

    async def transcribe(self, request):
        from aiohttp import web

        form = {k: (v.file.read() if hasattr(v, "file") else v) for k, v in (await request.post()).items()}
        self.forms.append(form)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for payload in (chunk(" a clip"), chunk(" heard", finish="stop"), chunk(usage=3), "[DONE]"):
            await response.write(f"data: {payload}\n\n".encode())
        return response

    async def complete(self, request):
        raise AssertionError("a speech model's requests never go to /v1/completions")


def test_a_speech_models_clips_go_to_the_transcription_route_offline_only(whisper: Path):
    assert speech_decoder_start(whisper) is not None and speech_decoder_start(None) is None
    prompt = list(decoder_prompt_ids(whisper))
    clip = Audio(np.full(8000, 0.25, dtype=np.float32), 16000)
    with TranscribingServer() as server, \
            EndpointBackend(EndpointConfig(url=server.url, tokenizer=whisper, warmup_requests=2)) as backend:
        assert backend.token_ids_source == "transcription" and len(server.forms) == 2  # the warm-ups
        results = sorted(backend.generate([GenRequest(id=i, prompt_ids=prompt, max_tokens=24, media=(clip,))
                                           for i in range(3)]), key=lambda r: r.id)
        sink = QueueSink()
        with pytest.raises(BackendError, match="cannot send in a streamed request"):
            backend.submit(GenRequest(id=9, prompt_ids=prompt, max_tokens=24, media=(clip,)), sink)
    assert [(r.id, r.text, r.n_tokens) for r in results] == [(i, " a clip heard", 3) for i in range(3)]
    sent = server.forms[2:]
    assert [f["language"] for f in server.forms] == ["en"] * 5  # the warm-ups' too: never left to detection
    assert {(f["max_completion_tokens"], f["stream"], f["stream_include_usage"]) for f in sent} == {
        ("24", "true", "true")}
    with wave.open(io.BytesIO(sent[0]["file"])) as w:
        assert w.getnframes() == 8000 and w.getframerate() == 16000
