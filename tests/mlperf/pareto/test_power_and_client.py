"""A system_power file as the Endpoints rules total it; MLCommons' client's config per point, and a point measured by
that client (a stand-in `inference-endpoint` on PATH writes the report the real one writes)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cmx.mlperf.pareto.client_config import ClientPoint, client_config, write_client_config, write_prompts
from cmx.mlperf.pareto.official import ClientRunFailed, run_client
from cmx.mlperf.pareto.power import PowerError, read_system_power


def power_file(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "system_power.json"
    path.write_text(json.dumps(data))
    return path


def test_components_times_the_cooling_overhead_give_the_rules_example(tmp_path: Path) -> None:
    path = power_file(tmp_path, {"cpu": {"num_cpu": 2, "tdp_per_cpu": 350},
                                 "accelerator": {"num_accelerator": 8, "tdp_per_accelerator": 700},
                                 "scale_up_network": {"num_switches": 1, "tdp_per_switch": 3500}})
    power = read_system_power(path, "liquid")
    assert power.kw == pytest.approx(12.74) and power.method == "components x 1.3"
    assert read_system_power(path, "air").kw == pytest.approx(9.8 * 1.5)


def test_a_declared_total_wins_and_a_rack_scales_by_nodes(tmp_path: Path) -> None:
    assert read_system_power(power_file(tmp_path, {"provisioned_power_w": 14000, "cpu": {"num_cpu": 1,
                                                                                        "tdp_per_cpu": 1}})).kw == 14
    rack = read_system_power(power_file(tmp_path, {"rack_power_w": 140000, "rack_nodes": 18, "submitted_nodes": 9}))
    assert (rack.watts, rack.method) == (70000, "rack scaling")


@pytest.mark.parametrize(("data", "message"), [
    ({}, "gives no total"),
    ({"cpu": {"num_cpu": 2, "tdp_per_cpu": 350}}, "no overhead_fraction and the cooling is not given"),
    ({"provisioned_power_w": -5}, "must be above 0"),
    ({"accelerator": {"num_accelerator": 8}}, "needs num_accelerator and tdp_per_accelerator"),
])
def test_a_file_without_a_derivable_total_is_refused_saying_why(tmp_path: Path, data: object, message: str) -> None:
    with pytest.raises(PowerError, match=message):
        read_system_power(power_file(tmp_path, data))


def point(tmp_path: Path, concurrency: int | None = 24) -> ClientPoint:
    return ClientPoint(concurrency=concurrency, min_duration_ms=600000, url="http://127.0.0.1:8000/v1", model="m",
                       max_new_tokens=128, prompts=tmp_path / "prompts.jsonl", folder=tmp_path / "r24")


def test_a_point_config_asks_the_client_for_its_concurrency_duration_and_streaming(tmp_path: Path) -> None:
    config = client_config(point(tmp_path))
    assert config["type"] == "online"
    assert config["settings"]["load_pattern"] == {"type": "concurrency", "target_concurrency": 24}
    assert config["settings"]["runtime"]["min_duration_ms"] == 600000
    assert config["model_params"]["streaming"] == "on"
    assert config["endpoint_config"] == {"endpoints": ["http://127.0.0.1:8000"], "api_type": "openai_completions"}
    offline = client_config(point(tmp_path, None))
    assert offline["type"] == "offline" and "load_pattern" not in offline["settings"]
    written = write_client_config(point(tmp_path))
    assert yaml.safe_load(written.read_text()) == config and "from-config --config" in written.read_text()


def test_prompts_are_written_one_json_line_each(tmp_path: Path) -> None:
    path = write_prompts(tmp_path / "p.jsonl", 3, lambda row: [row], lambda ids: f"text {ids[0]}")
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"prompt": f"text {i}"} for i in range(3)]


CLIENT = os.environ.get("CMX_ENDPOINTS_CLIENT")  # mlcommons/endpoints' src/
# an interpreter with the schema's dependencies (pydantic, cyclopts, msgspec, pyzmq, rich, pyyaml)
CLIENT_PYTHON = os.environ.get("CMX_ENDPOINTS_PYTHON", sys.executable)


@pytest.mark.skipif(not CLIENT, reason="CMX_ENDPOINTS_CLIENT (mlcommons/endpoints src/) is not set")
@pytest.mark.parametrize("concurrency", [24, None], ids=["online", "offline"])
def test_the_config_is_valid_under_the_clients_own_schema(tmp_path: Path, concurrency: int | None) -> None:
    written = write_client_config(point(tmp_path, concurrency))
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "hello"}\n')
    # the schema module imports the client's HTTP adapters (pandas, transformers...) only to name them
    check = (
        "import sys, types\n"
        "for mod, cls in [('inference_endpoint.openai.openai_msgspec_adapter', 'OpenAIMsgspecAdapter'),"
        " ('inference_endpoint.openai.accumulator', 'OpenAISSEAccumulator'),"
        " ('inference_endpoint.openai.completions_adapter', 'OpenAITextCompletionsAdapter')]:\n"
        "    m = types.ModuleType(mod); setattr(m, cls, type(cls, (), {})); sys.modules.setdefault(mod, m)\n"
        "from inference_endpoint.config.schema import BenchmarkConfig\n"
        f"print(BenchmarkConfig.from_yaml_file({str(written)!r}).type)\n")
    proc = subprocess.run([CLIENT_PYTHON, "-c", check], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(CLIENT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == ("TestType.ONLINE" if concurrency else "TestType.OFFLINE")


FAKE_CLIENT = """#!{python}
import json, sys, pathlib, yaml
config = yaml.safe_load(open(sys.argv[sys.argv.index("--config") + 1]))
report = pathlib.Path(config["report_dir"]) / "performance"
report.mkdir(parents=True)
tpot = {{"percentiles": {{"90.0": 20e6}}}}
(report / "result_summary.json").write_text(json.dumps({{
    "n_samples_issued": 100, "n_samples_completed": 100, "n_samples_failed": 0, "duration_ns": 10 * 10**9,
    "ttft": {{"percentiles": {{"90.0": 150e6}}}}, "tpot": tpot, "output_sequence_lengths": {{"total": 5000}}}}))
"""


def test_a_point_measured_by_the_clients_report_reads_as_the_endpoints_checker_derives_it(tmp_path: Path) -> None:
    fake = tmp_path / "inference-endpoint"
    fake.write_text(FAKE_CLIENT.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    config = write_client_config(point(tmp_path))
    f = run_client(str(fake), config, tmp_path / "r24" / "client_report")
    assert (f.system_tps, f.tpot_p90_ms, f.tps_per_user, f.ttft_p90_ms) == (500.0, 20.0, 50.0, 150.0)
    assert (f.issued, f.completed, f.failed, f.window_s) == (100, 100, 0, 10.0)


def test_a_client_that_fails_is_named_with_its_log(tmp_path: Path) -> None:
    fake = tmp_path / "inference-endpoint"
    fake.write_text("#!/bin/sh\necho 'no endpoint' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(ClientRunFailed, match="exited with status 3") as info:
        run_client(str(fake), write_client_config(point(tmp_path)), tmp_path / "nowhere")
    assert "client.log" in (info.value.hint or "")
    assert "no endpoint" in (tmp_path / "r24" / "client.log").read_text()
