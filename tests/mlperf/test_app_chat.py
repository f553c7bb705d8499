"""A chat benchmark's whole app run on the real parts but the model: the harness process, LoadGen's Offline and Server
tests, the QSL's ProductPrompts (each image re-encoded), the endpoint backend's chat route, the scorer and the
summary, against a small chat server of our own on 127.0.0.1 that answers each product with its true category,
except one whose prompt it refuses as over its context length.

It is where qwen3-vl's Server scenario runs in make test: LoadGen judges it on whole answers (the end-to-end p99
against 12 s), which needs 480 queries for a VALID short run, minutes for the tiny Qwen3-VL on two busy cores and
seconds here. The tiny model behind a real `vllm serve` runs Offline in tests/mlperf/test_app_benchmarks.py.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from cmx.mlperf.app import run_app
from cmx.mlperf.benchmarks import benchmark_for
from cmx.mlperf.benchmarks.qwen3_vl.accuracy import CATEGORY_PAD, SEPARATOR, hierarchical_f1
from cmx.mlperf.benchmarks.qwen3_vl.dataset import load_catalogue
from cmx.mlperf.benchmarks.qwen3_vl.tiny import make_tiny_catalogue
from cmx.mlperf.loadgen.harness_config import EndpointSettings
from cmx.mlperf.loadgen.log import read_loadgen_run
from cmx.mlperf.scoring.accuracy_txt import read_accuracy_txt
from tests.fake_openai import FakeOpenAIServer
from tests.mlperf.test_app_run import app_config

TITLE = re.compile(r"The title of the product is the following:\n```text\n(.*?)\n```", re.S)
REFUSED = 5  # the row whose prompt the server refuses


class CatalogueServer(FakeOpenAIServer):
    """Answers a product's chat with its true category (found by its title) as the reference's JSON, after a few
    milliseconds; refuses row REFUSED's as over its context length (HTTP 400)."""

    def __init__(self, truths: dict[str, str], refused: str) -> None:
        super().__init__()
        self.truths, self.refused, self.images = truths, refused, 0

    async def chat(self, request: Any) -> Any:
        from aiohttp import web

        body = await request.json()
        user = body["messages"][-1]["content"]
        if isinstance(user, str):  # the backend's warm-up
            return web.json_response(reply("hello", 3))
        text, image = user[0]["text"], user[1]["image_url"]["url"]
        self.images += image.startswith(("data:image/JPEG;base64,", "data:image/PNG;base64,"))
        title = TITLE.search(text).group(1)  # type: ignore[union-attr]  # the reference's user text has it
        if title == self.refused:
            return web.json_response({"object": "error", "message": "This model's maximum context length is 4096 "
                                      "tokens. However, you requested 5120 tokens.", "code": 400}, status=400)
        await asyncio.sleep(0.005)
        answer = {"category": self.truths[title], "brand": "b", "is_secondhand": False}
        return web.json_response(reply(json.dumps(answer), 17))


def reply(content: str, tokens: int) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1100, "completion_tokens": tokens, "total_tokens": 1100 + tokens}}


@pytest.mark.e2e
def test_a_chat_benchmark_runs_offline_and_server_judged_on_whole_answers_and_scores_its_replies(tmp_path: Path):
    pytest.importorskip("mlperf_loadgen")
    catalogue_dir = make_tiny_catalogue(tmp_path / "catalogue", rows=64, seed=3).path
    catalogue = load_catalogue(catalogue_dir)
    titles = [catalogue.product(i).title for i in range(len(catalogue))]
    truths = {t: catalogue.reference(i) for i, t in enumerate(titles)}  # a repeated title answers one truth
    model = benchmark_for("qwen3-vl-235b-a22b").make_tiny_model(tmp_path / "model")  # config.json: not speech
    with CatalogueServer(truths, titles[REFUSED]) as server:
        config = app_config(tmp_path, benchmark="qwen3-vl-235b-a22b", backend="endpoint", model=model,
                            tokenizer=model, dataset=catalogue_dir, rows=None, scenarios=("Offline", "Server"),
                            # Offline's query is sized from its target: the stand-in once answered it all under the
                            # 500 ms minimum (INVALID) at 2,000 (419 ms) and at 6,000 (452 ms, a CI trial); 20,000
                            # issues over three times 6,000's samples
                            modes=("performance", "accuracy"), target_qps={"Offline": 20000.0, "Server": 50.0},
                            timeout_s=300.0, endpoint=EndpointSettings(url=server.url, model="own"))
        result = run_app(config)
    assert server.images > 0 and server.completions == 0  # every sample went to the chat route, with its image
    pairs = [(SEPARATOR.join([CATEGORY_PAD] * len(truths[t].split(SEPARATOR))) if i == REFUSED else truths[t],
              catalogue.reference(i)) for i, t in enumerate(titles)]
    for scenario in ("Offline", "Server"):
        folder = config.scenario_dir(scenario)
        assert read_loadgen_run(folder / "performance" / "run_1").results.validity == "VALID"
        # the replies scored as the reference scores them, the refused one as padding
        assert read_accuracy_txt(folder / "accuracy" / "accuracy.txt")["f1"] == pytest.approx(hierarchical_f1(pairs))
        facts = json.loads((folder / "cmx_run.json").read_text())
        accuracy = next(r for r in facts["runs"] if r["mode"] == "accuracy")
        assert accuracy["details"]["refused_requests"] == 1 and accuracy["problems"] == []
    server_run = read_loadgen_run(config.scenario_dir("Server") / "performance" / "run_1")
    assert server_run.settings.target_latency_ns == 12_000_000_000 and not server_run.settings.use_token_latencies
    assert server_run.results.ttft is None and 0 < server_run.results.latency.p99_ns < 12_000_000_000
    table = result.table
    assert "samples/s" in table and "latency p99 ms" in table and "TTFT" not in table, table
    assert "Offline accuracy: the server refused 1 request(s)" in table and "VALID" in table
