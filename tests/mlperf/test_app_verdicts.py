"""A test that failed is never labelled VALID: cmx's `validity` says FAILED in result.json, cmx_run.json, the error,
summary.txt and `cmx report`, with LoadGen's own verdict kept as `loadgen_validity`, and the error's first line is
the cause. Results written by an older cmx (LoadGen's verdict as `validity`) read the same way.

The unit tests replay recorded LoadGen logs (tests/mlperf/test_app_run.py's Recorded runner) with samples that
failed in the backend. One test runs the real parts: the harness process, LoadGen and the endpoint backend, against
a small server of our own on 127.0.0.1 that answers a few requests and drops the rest.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from cmx.mlperf.app import AppRunFailed, run_app
from cmx.mlperf.loadgen.harness_config import EndpointSettings, HarnessResult
from cmx.mlperf.loadgen.sut import SampleError
from cmx.mlperf.report.collect import collect
from cmx.mlperf.report.page import write_report
from cmx.mlperf.run_summary import RunSummary, format_row
from tests.fake_openai import FakeOpenAIServer
from tests.mlperf.backends.test_endpoint import tiny_tokenizer
from tests.mlperf.test_app_run import Recorded, app_config, fake_evaluate, fake_verify

LOST = "the connection to the server was lost during request 9: the server stopped or crashed"
# a verdict that calls the test VALID: a validity value, or a word of the error, table or page (LoadGen's own logs,
# and `loadgen_validity`, keep LoadGen's word; "LoadGen said VALID" names it as LoadGen's)
CALLED_VALID = re.compile(r"(?<!LoadGen said )\bVALID\b")


def failed_offline_run(tmp_path: Path) -> tuple[Path, AppRunFailed]:
    """An Offline performance run LoadGen called VALID, in which 12 samples failed in the backend."""
    runner = Recorded(failed={("Offline", "performance"): [SampleError(i, LOST) for i in range(12)]})
    config = app_config(tmp_path, modes=("performance",))
    with pytest.raises(AppRunFailed) as caught:
        run_app(config, runner=runner, evaluate=fake_evaluate, verify=fake_verify)
    return config.scenario_dir("Offline"), caught.value


def test_failed_samples_make_every_verdict_failed_and_keep_loadgens_apart(tmp_path: Path):
    folder, _ = failed_offline_run(tmp_path)
    result = json.loads((folder / "performance/run_1/result.json").read_text())
    assert (result["validity"], result["loadgen_validity"]) == ("FAILED", "VALID")
    facts = json.loads((folder / "cmx_run.json").read_text())
    assert facts["validity"] == {"performance": "FAILED"} and facts["loadgen_validity"] == {"performance": "VALID"}
    assert [(r["validity"], r["loadgen_validity"]) for r in facts["runs"]] == [("FAILED", "VALID")]
    assert facts["ok"] is False
    summary = (tmp_path / "results/summary.txt").read_text()
    assert "FAILED (" in summary and not CALLED_VALID.search(summary)


def test_the_errors_first_line_is_the_cause_and_no_line_calls_the_test_valid(tmp_path: Path):
    _, error = failed_offline_run(tmp_path)
    first, *rest = error.message.splitlines()
    assert first == f"Offline performance FAILED: {LOST} (12 of 16 samples failed in the backend and were answered " \
                    "empty)"
    assert "  Offline performance (FAILED):" in rest
    assert not CALLED_VALID.search(error.render())


def test_the_report_shows_a_failed_test_as_failed(tmp_path: Path):
    failed_offline_run(tmp_path)
    [row] = collect(tmp_path / "results").tests
    assert (row.validity, row.loadgen_validity, row.ok) == ("FAILED", "VALID", False)
    page = write_report(tmp_path / "results", tmp_path / "report.html").read_text()
    assert '<td class="bad">FAILED</td>' in page and not CALLED_VALID.search(page)


def test_an_invalid_run_stays_invalid_and_a_failed_check_is_failed(tmp_path: Path):
    runner = Recorded({("Server", "performance"): "invalid"})
    config = app_config(tmp_path, scenarios=("Server",), modes=("performance", "test06"))
    with pytest.raises(AppRunFailed):
        run_app(config, runner=runner, evaluate=fake_evaluate,
                verify=lambda out, scenario, eos: fake_verify(out, scenario, eos, passed=False))
    facts = json.loads((config.scenario_dir("Server") / "cmx_run.json").read_text())
    assert facts["validity"] == {"performance": "INVALID", "test06": "FAILED"}
    assert facts["loadgen_validity"]["performance"] == "INVALID"


def test_results_of_an_older_cmx_read_failed_where_they_had_problems(tmp_path: Path):
    old = {"scenario": "Offline", "mode": "performance", "validity": "VALID", "problems": ["4 samples failed"],
           "samples_per_second": 1.0, "tokens_per_second": 2.0, "ttft_p99_ms": None, "tpot_p99_ms": None,
           "completed_samples": 16, "failed_samples": 4, "start_seconds": 1.0, "test_seconds": 2.0, "details": {}}
    (tmp_path / "result.json").write_text(json.dumps(old))
    read = HarnessResult.read(tmp_path / "result.json")
    assert (read.validity, read.loadgen_validity, read.ok) == ("FAILED", "VALID", False)
    assert HarnessResult.read(read.write(tmp_path / "again.json")) == read
    good = HarnessResult.read(_write(tmp_path / "good.json", {**old, "problems": [], "failed_samples": 0}))
    assert (good.validity, good.loadgen_validity) == ("VALID", "VALID")
    # a cmx_run.json of an older cmx: no loadgen_validity, LoadGen's VALID beside the problems
    folder, _ = failed_offline_run(tmp_path)
    facts = json.loads((folder / "cmx_run.json").read_text())
    del facts["loadgen_validity"]
    facts["runs"] = [{k: ("VALID" if k == "validity" else v) for k, v in r.items() if k != "loadgen_validity"}
                     for r in facts["runs"]]
    _write(folder / "cmx_run.json", facts)
    [row] = collect(tmp_path / "results").tests
    assert (row.validity, row.loadgen_validity) == ("FAILED", "VALID")
    shown = RunSummary(scenario="Offline", mode="performance", folder="f", validity="VALID", tokens_per_second=1.0,
                       ttft_p99_ms=None, tpot_p99_ms=None, rouge=None, problems=["4 samples failed"])
    assert "FAILED (1 problem(s); LoadGen said VALID)" in format_row(shown)


def _write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --- the real parts: harness process, LoadGen, the endpoint backend, a server that drops requests ---------------

class DroppingServer(FakeOpenAIServer):
    """Answers /v1/completions with token ids for its first `answered` requests (the backend's warm-up among
    them) and, for every later one, waits `hold_s` (so LoadGen's run outlasts its min_duration) and then drops
    the connection without an answer."""

    def __init__(self, answered: int, hold_s: float) -> None:
        super().__init__()
        self.answered, self.hold_s = answered, hold_s

    async def complete(self, request):
        from aiohttp import web

        body = await request.json()
        if self.completions > self.answered:
            await asyncio.sleep(self.hold_s)
            if request.transport is not None:  # None: the client gave up on it already
                request.transport.close()  # no answer: the client sees the server disconnect
            return web.Response()
        n = body["max_tokens"]
        choice = {"text": "x", "token_ids": [7] * n, "finish_reason": "length"}
        return await self.stream_or_json(request, body, [choice], {"usage": {"completion_tokens": n}})


def test_an_endpoint_run_that_loses_most_samples_is_failed_in_every_file(tmp_path: Path):
    from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_openorca

    model = tiny_tokenizer(tmp_path / "model")  # the prompts' tokenizer: the server sends token ids itself
    dataset = make_tiny_openorca(tmp_path / "orca.pkl", model, rows=16, seed=0).path
    with DroppingServer(answered=8, hold_s=2.5) as server:
        config = app_config(tmp_path, modes=("performance",), backend="endpoint", model=model, tokenizer=model,
                            dataset=dataset, target_qps={"Offline": 5.0}, timeout_s=120.0,
                            endpoint=EndpointSettings(url=server.url, model="own"))
        with pytest.raises(AppRunFailed) as caught:
            run_app(config)
    folder = config.scenario_dir("Offline")
    result = HarnessResult.read(folder / "performance/run_1/result.json")
    assert result.failed_samples > result.completed_samples / 2, result
    assert result.validity == "FAILED" and result.loadgen_validity == "VALID", result
    assert "samples failed in the backend" in caught.value.message.splitlines()[0]
    facts = json.loads((folder / "cmx_run.json").read_text())
    assert facts["validity"] == {"performance": "FAILED"}
    texts = {"the error": caught.value.render(), "summary.txt": (tmp_path / "results/summary.txt").read_text(),
             "the report": write_report(tmp_path / "results", tmp_path / "report.html").read_text()}
    for name in ("cmx_run.json", "performance/run_1/result.json"):  # every verdict but LoadGen's own
        data = json.loads((folder / name).read_text())
        texts[name] = json.dumps({k: v for k, v in data.items() if k != "loadgen_validity"} | {
            "runs": [{k: v for k, v in r.items() if k != "loadgen_validity"} for r in data.get("runs", [])]})
    assert {name: CALLED_VALID.findall(text) for name, text in texts.items()} == {name: [] for name in texts}
