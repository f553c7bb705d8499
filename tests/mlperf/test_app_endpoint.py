"""The app with the endpoint backend: unit tests of how an endpoint run is recorded and packaged, and one
e2e run of `_endpoint` through the CLI, where cmx starts `vllm serve` (CPU build, tiny Llama 2) itself,
runs Offline and Server (performance, accuracy) over HTTP, stops the server, and packages the results."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cmx.errors import CmxError
from cmx.mlperf.app import AppConfig, backend_record
from cmx.mlperf.app_plan import AppConfigError
from cmx.mlperf.loadgen.harness_config import EndpointSettings
from cmx.mlperf.loadgen.log import read_loadgen_run
from cmx.mlperf.rounds import load_round
from cmx.mlperf.run_summary import RunSummary
from cmx.mlperf.serving_stack import Role, ServingStack, read_stack_file
from cmx.mlperf.submission.check import check_tree
from cmx.mlperf.submission.check.report import format_report
from cmx.mlperf.submission.system_desc import (
    description_problems,
    detected_fields,
    endpoint_is_remote,
)
from tests.conftest import REPO, Home, needs_vllm


def config(tmp_path: Path, **kw: object) -> AppConfig:
    base: dict[str, object] = dict(round="v6.0", benchmark="llama2-70b-99", device="cpu", scenarios=("Offline",),
                                   modes=("performance",), model=tmp_path, tokenizer=tmp_path, dataset=tmp_path,
                                   results_dir=tmp_path / "r", system="box", target_qps={"Offline": 1.0})
    return AppConfig(**{**base, **kw})


def summary(details: dict[str, object]) -> RunSummary:
    return RunSummary(scenario="Offline", mode="performance", folder="f", validity="VALID", tokens_per_second=1.0,
                      ttft_p99_ms=None, tpot_p99_ms=None, rouge=None, problems=[], details=details)


def test_an_endpoint_url_with_the_in_process_backend_is_refused(tmp_path: Path):
    with pytest.raises(AppConfigError, match="add _endpoint"):
        config(tmp_path, endpoint=EndpointSettings(url="http://gw:8000/v1"))


def test_a_chat_benchmark_is_refused_in_process_before_anything_runs(tmp_path: Path):
    from cmx.mlperf.app import run_app

    chat = config(tmp_path, benchmark="qwen3-vl-235b-a22b", target_qps={"Offline": 1.0})
    with pytest.raises(AppConfigError, match="only an endpoint's chat route takes") as info:
        run_app(chat, runner=lambda *a, **k: pytest.fail("a test ran"))
    assert "_endpoint" in (info.value.hint or "") and not chat.results_dir.exists()


def test_cmx_plan_refuses_an_endpoint_url_without_endpoint_before_any_step_runs(builtin: Home):
    for verb in ("plan", "run"):
        proc = builtin.cmx(verb, "app mlperf inference llama2 _cpu _tiny", "--input", "endpoint_url=http://gw:8000/v1")
        assert proc.returncode != 0
        assert "--input endpoint_url is for _endpoint, which the query does not choose (it runs _vllm)" in proc.stderr
        assert "add _endpoint to the query, or drop --input endpoint_url" in proc.stderr
    for folder in (builtin.root / "runs", builtin.root / "cache"):  # no run record, no entry (the index is hidden)
        assert not folder.exists() or not [p for p in folder.iterdir() if not p.name.startswith(".")]


def test_the_backend_record_takes_the_servers_own_words_and_no_key(tmp_path: Path):
    details = {"transport": "http", "url": "http://gw:8000/v1", "model": "m", "server_software": "vLLM",
               "server_version": "0.32.0", "server_max_model_len": 4096, "token_ids_source": "server",
               "api_key": "never"}
    record = backend_record(config(tmp_path, backend="endpoint", endpoint=EndpointSettings(url="http://gw:8000/v1")),
                            [summary(details)])
    assert record == {"kind": "endpoint", "transport": "http", "url": "http://gw:8000/v1", "model": "m",
                      "server_software": "vLLM", "server_version": "0.32.0", "server_max_model_len": 4096,
                      "token_ids_source": "server", "started_by_cmx": False, "server_log": None, "stack": None}
    assert backend_record(config(tmp_path), []) == {"kind": "vllm", "transport": "in-process"}


def test_the_serving_stack_behind_the_url_is_recorded_and_needs_one(tmp_path: Path):
    stack = ServingStack(name="dynamo", device="cuda", routing="kv",
                         roles=(Role("prefill", 1, 8, 8), Role("decode", 2, 4, 4)))
    path = tmp_path / "stack.json"
    path.write_text(json.dumps(stack.to_json()))
    assert read_stack_file(path) == stack
    endpoint = EndpointSettings(url="http://g-frontend:8000/v1")
    record = backend_record(config(tmp_path, backend="endpoint", endpoint=endpoint, serving_stack=stack), [])
    assert record["stack"]["roles"][1] == {"name": "decode", "replicas": 2, "tensor_parallel": 4, "gpus_per_pod": 4,
                                           "pods_per_replica": 1}
    assert stack.topology() == "1 prefill x TP 8 + 2 decode x TP 4, 16 cuda GPUs in 3 pods (nodes not read)"
    with pytest.raises(AppConfigError, match="serving_stack describes the stack behind an endpoint_url"):
        config(tmp_path, backend="endpoint", serving_stack=stack)


@pytest.mark.parametrize("text, match", [
    ("{", "cannot read"), ("[]", "not a serving-stack description"),
    ('{"name": "vllm"}', "not a serving-stack description"),
    ('{"name": "triton", "roles": [], "device": "cuda"}', "unknown serving stack")])
def test_a_stack_file_that_is_not_one_is_refused_with_its_path(tmp_path: Path, text: str, match: str):
    path = tmp_path / "stack.json"
    path.write_text(text)
    with pytest.raises(CmxError, match=match):
        read_stack_file(path)


@pytest.mark.parametrize(("url", "remote"), [("http://127.0.0.1:8000/v1", False), ("http://localhost/v1", False),
                                             ("http://[::1]:80/v1", False), ("http://gateway:8000/v1", True),
                                             ("https://10.0.0.7/v1", True)])
def test_an_endpoint_is_remote_unless_it_is_loopback(url: str, remote: bool):
    assert endpoint_is_remote(url) is remote


def test_a_remote_endpoint_is_written_down_and_kept_out_of_closed():
    backend = {"kind": "endpoint", "url": "http://gateway:8000/v1", "server_software": "vLLM",
               "server_version": "0.32.0", "token_ids_source": "server"}
    from cmx.mlperf.provenance import RunOrigin

    fields = detected_fields(RunOrigin(command=["cmx"], cmx_version="0", run_record=None, system={},
                                       software={"vllm": "0.1"}, model={}),
                             "cpu", backend)
    assert fields["framework"] == "vLLM 0.32.0 (OpenAI-compatible server, over HTTP)"
    assert fields["sw_notes"].startswith("SUT over HTTP: a remote OpenAI-compatible server (vLLM 0.32.0)")
    v60 = load_round("v6.0")
    closed = [p.field for p in description_problems(fields, v60, division="closed")]
    opened = [p.field for p in description_problems(fields, v60, division="open")]
    assert "sw_notes" in closed and "sw_notes" not in opened



def vllm_servers() -> list[str]:
    out = subprocess.run(["pgrep", "-af", "vllm.entrypoints.openai.api_server"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "pgrep" not in line]


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_the_endpoint_app_starts_vllm_serve_runs_offline_and_server_and_stops_it(home: Home, tmp_path: Path):
    (home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                             encoding="utf-8")
    assert vllm_servers() == [], "another test left a vllm server running"
    results, submission = tmp_path / "results", tmp_path / "submission"
    # v6.0: the folders and the check below are written for it (its LoadGen is get-loadgen's cached artefact); no
    # Server target: find-performance measures it through the server cmx started
    proc = home.cmx("run", "app mlperf inference llama2 _cpu _tiny _short _endpoint _submission",
                    "--input", "round=v6.0",
                    "--input", "scenarios=Offline,Server", "--input", "modes=performance,accuracy",
                    "--input", "rows=128", "--input", f"results_dir={results}", "--input", "system_name=cpu-box",
                    "--input", "submitter=cmx-test",
                    "--input", f"system_file={REPO / 'docs/examples/system-demo.yaml'}",
                    "--input", f"submission_dir={submission}", "--progress", "none", timeout=1500)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert vllm_servers() == [], "the server cmx started is still running"
    for scenario in ("Offline", "Server"):
        folder = results / "cpu-box" / "llama2-70b-99" / scenario
        assert read_loadgen_run(folder / "performance" / "run_1").results.validity == "VALID", scenario
        assert (folder / "accuracy" / "accuracy.txt").is_file()
        facts = json.loads((folder / "cmx_run.json").read_text())
        backend = facts["backend"]
        assert backend["kind"] == "endpoint" and backend["started_by_cmx"] is True, backend
        assert backend["server_software"] == "vLLM" and backend["server_version"], backend
        assert backend["token_ids_source"] == "server"
        assert Path(backend["server_log"]).stat().st_size > 0
        assert json.loads((folder / "performance" / "run_1" / "result.json").read_text())["details"]["backend"] \
            == "endpoint"
    tree = submission / "open" / "cmx-test"
    readme = (tree / "results" / "cpu-box" / "llama2-70b-99" / "Server" / "README.md").read_text()
    assert "an OpenAI-compatible server over HTTP: vLLM" in readme
    system = json.loads((tree / "systems" / "cpu-box.json").read_text())
    assert system["sw_notes"].startswith("SUT over HTTP: a local OpenAI-compatible server (vLLM ")
    report = check_tree(submission, "v6.0")
    assert report.rules_broken() == {"loadgen.min-duration", "loadgen.sample-count", "accuracy.coverage"}, \
        format_report(report)
