"""The whisper app's TEST01 through a server that answers the warm-up and then 500 to every transcription: every
sample of every run fails (each answered empty), and TEST01's files say TEST FAIL with the reason, not TEST PASS for
16 empty answers compared with 16 empty answers. A real run: the tiny whisper's recipes, LoadGen, the endpoint backend
over HTTP to a server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Home
from tests.fake_openai import FakeOpenAIServer

WARM_UPS = 4  # the endpoint backend's warm-up transcriptions (EndpointConfig.warmup_requests)


class TranscribesThen500(FakeOpenAIServer):
    """vLLM's transcription route for the warm-up; HTTP 500 for every transcription after it."""

    def __init__(self) -> None:
        super().__init__()
        self.transcriptions = 0

    async def transcribe(self, request: Any) -> Any:
        from aiohttp import web

        await request.post()
        self.transcriptions += 1
        if self.transcriptions > WARM_UPS:
            return web.json_response({"object": "error", "message": "engine core died", "code": 500}, status=500)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for data in ({"choices": [{"delta": {"content": " a clip"}, "finish_reason": "stop"}]},
                     {"choices": [], "usage": {"prompt_tokens": 196, "completion_tokens": 2, "total_tokens": 198}}):
            await response.write(f"data: {json.dumps(data)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        return response


@pytest.mark.e2e
def test_test01_of_a_run_whose_every_transcription_got_a_500_says_test_fail(builtin: Home, tmp_path: Path) -> None:
    results = tmp_path / "results"
    with TranscribesThen500() as server:
        proc = builtin.cmx("run", "app mlperf inference whisper _cpu _tiny _short _endpoint", "--input", "rows=16",
                           "--input", f"endpoint_url={server.url}", "--input", f"results_dir={results}",
                           "--input", "system_name=cpu-box", "--progress", "none", timeout=1200)
    assert server.transcriptions > WARM_UPS, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.returncode != 0  # the runs failed, and the run says so
    test01 = next(results.rglob("TEST01"), None)
    assert test01 is not None, proc.stdout[-4000:] + proc.stderr[-4000:]
    compared = (test01 / "verify_accuracy.txt").read_text()
    assert "TEST PASS" not in compared and "TEST FAIL: the TEST01 run failed: " in compared, compared
    timed = (test01 / "verify_performance.txt").read_text()
    assert "TEST PASS" not in timed and "TEST FAIL: the TEST01 run failed: " in timed, timed
    assert "engine core died" not in compared + timed  # the reasons are counts, never the server's words
