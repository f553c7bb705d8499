"""The disaggregated prefill/decode topology (cmx.mlperf.backends.disaggregated): unit tests of how its instances
and vLLM's proxy are started, recorded and refused (no vLLM started), and one e2e run of the llama3.1-8b app through
the CLI twice, on a prefill and a decode instance behind vLLM's own disagg_proxy_demo.py and on one server, whose
greedy answers must be the same."""

from __future__ import annotations

import json
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from cmx.mlperf.app import AppConfig, backend_record, transfer_notes
from cmx.mlperf.app_plan import AppConfigError
from cmx.mlperf.app_step import prefill_decode
from cmx.mlperf.backends.base import BackendError
from cmx.mlperf.backends.disaggregated import (
    CONNECTOR,
    HITS_METRIC,
    DisaggregatedConfig,
    DisaggregatedServer,
    KvTransfer,
    PrefillDecode,
    TopologyInfo,
    TopologyReport,
    counter,
    instance_binds,
    instance_config,
    parse_prefill_decode,
    proxy_argv,
    split_cores,
)
from cmx.mlperf.backends.profiles import EngineOptions
from cmx.mlperf.backends.vllm_server import VllmServerConfig
from cmx.mlperf.loadgen.harness_config import EndpointSettings
from cmx.mlperf.run_summary import RunSummary
from tests.conftest import REPO, Home, needs_vllm
from tests.fake_openai import FakeOpenAIServer

# vLLM's source distribution on PyPI: the only place its docs' proxy ships (its wheel has no examples/)
VLLM_SDIST_URL = ("https://files.pythonhosted.org/packages/d5/df/5471312c76e335eaa2b8333e87ea39f0d37bfe24f10a582620"
                  "e34ff12e33/vllm-0.32.0.tar.gz")
VLLM_SDIST_SHA256 = "d2c957d5eee3d0985012151315ddc62cbe0cd368fc96a5fc3510438d9dddf2ad"
PROXY_MEMBER = "vllm-0.32.0/examples/disaggregated/disaggregated_serving/disagg_proxy_demo.py"
PROXY_CACHE = Path.home() / ".cache" / "cmx-tests" / "vllm-0.32.0" / "disagg_proxy_demo.py"


def server_config(tmp_path: Path, **options: object) -> VllmServerConfig:
    return VllmServerConfig(model=tmp_path / "model", options=EngineOptions(device="cpu", **options),  # type: ignore[arg-type]
                            log_path=tmp_path / "server.log", served_model_name="cmx-sut", extra_args=("--seed", "0"))


def app_config(tmp_path: Path, **kw: object) -> AppConfig:
    base: dict[str, object] = dict(round="v6.0", benchmark="llama3.1-8b", device="cpu", scenarios=("Offline",),
                                   modes=("accuracy",), model=tmp_path, tokenizer=tmp_path, dataset=tmp_path,
                                   results_dir=tmp_path / "r", system="box", target_qps={"Offline": 1.0})
    return AppConfig(**{**base, **kw})  # type: ignore[arg-type]


def info(tmp_path: Path) -> TopologyInfo:
    return TopologyInfo(url="http://127.0.0.1:9000/v1", topology=PrefillDecode(1, 2, tmp_path / "proxy.py"),
                        prefill_urls=("http://127.0.0.1:9001/v1",),
                        decode_urls=("http://127.0.0.1:9002/v1", "http://127.0.0.1:9003/v1"),
                        cpu_binds=("0", "1", "1"), proxy_argv=("python", "proxy.py"), proxy_log=tmp_path / "p.log",
                        instance_logs=(), kv_dir=tmp_path / "kv", served={"software": "vLLM", "version": "0.32.0"})


# --- the parts, without vLLM -----------------------------------------------------------------------------------


def test_prefill_decode_is_read_as_two_counts_and_nonsense_is_refused(tmp_path: Path):
    assert parse_prefill_decode(" 2 : 3 ", tmp_path / "p.py") == PrefillDecode(2, 3, tmp_path / "p.py")
    assert PrefillDecode(1, 1, tmp_path).label == "1P:1D"
    for text in ("1", "1:1:1", "a:b", "-1:1"):
        with pytest.raises(BackendError, match="is not P:D"):
            parse_prefill_decode(text, tmp_path)
    with pytest.raises(BackendError, match="at least one prefill and one decode instance, not 0:1"):
        parse_prefill_decode("0:1", tmp_path)


@pytest.mark.parametrize(("cpus", "n", "binds"), [
    ([0, 1], 2, ("0", "1")),
    ([0, 1, 2, 3], 2, ("0-1", "2-3")),
    ([0, 1, 2, 3, 4], 2, ("0-2", "3-4")),
    ([0, 2, 4, 6], 2, ("0,2", "4,6")),
    ([0, 1], 3, ("0", "1", "0")),
    ([5], 2, ("5", "5")),
])
def test_each_instance_gets_cores_of_its_own_or_one_core_in_turn(cpus: list[int], n: int, binds: tuple[str, ...]):
    assert split_cores(cpus, n) == binds


def test_a_binding_the_user_chose_or_another_device_is_left_alone(tmp_path: Path):
    cpu = server_config(tmp_path)
    assert instance_binds(cpu, 2, {}, [0, 1]) == ("0", "1")
    assert instance_binds(cpu, 2, {"VLLM_CPU_OMP_THREADS_BIND": "1"}, [0, 1]) == (None, None)
    assert instance_binds(server_config(tmp_path, cpu_threads_bind="0-1"), 2, {}, [0, 1]) == (None, None)
    assert instance_binds(server_config(tmp_path, tensor_parallel_size=2), 2, {}, [0, 1]) == (None, None)
    gpu = VllmServerConfig(model=tmp_path, options=EngineOptions(device="cuda"), log_path=tmp_path / "l")
    assert instance_binds(gpu, 2, {}, [0, 1]) == (None, None)


def test_an_instance_is_the_shared_server_with_its_log_cores_and_kv_role(tmp_path: Path):
    shared = server_config(tmp_path)
    decode = instance_config(shared, "kv_consumer", tmp_path / "kv", tmp_path / "vllm-decode-0.log", "1")
    assert decode.log_path == tmp_path / "vllm-decode-0.log" and decode.port is None
    assert decode.options.cpu_threads_bind == "1" and decode.model == shared.model
    assert decode.served_model_name == "cmx-sut"
    assert decode.extra_args[:3] == ("--seed", "0", "--kv-transfer-config")
    assert json.loads(decode.extra_args[3]) == {"kv_connector": CONNECTOR, "kv_role": "kv_consumer",
                                                "kv_connector_extra_config": {"shared_storage_path":
                                                                              str(tmp_path / "kv")}}
    assert instance_config(shared, "kv_producer", tmp_path, tmp_path / "l", None).options == shared.options


def test_the_proxy_gets_vllms_xpyd_flags_with_host_and_port_only(tmp_path: Path):
    argv = proxy_argv("py", tmp_path / "disagg_proxy_demo.py", "cmx-sut", ["http://127.0.0.1:1/v1"],
                      ["http://127.0.0.1:2/v1", "http://127.0.0.1:3/v1"], 8000)
    assert argv == ["py", str(tmp_path / "disagg_proxy_demo.py"), "--model", "cmx-sut", "--prefill", "127.0.0.1:1",
                    "--decode", "127.0.0.1:2", "127.0.0.1:3", "--port", "8000"]


def test_a_counter_is_summed_over_its_label_sets_and_absent_is_zero():
    text = ("# HELP vllm:external_prefix_cache_hits_total Hits.\n# TYPE vllm:external_prefix_cache_hits_total counter\n"
            'vllm:external_prefix_cache_hits_total{engine="0",model_name="m"} 512.0\n'
            'vllm:external_prefix_cache_hits_total{engine="1",model_name="m"} 128.0\n'
            'vllm:external_prefix_cache_hits_created{engine="0",model_name="m"} 1.7e+09\n'
            "vllm:prompt_tokens_total 3.0\n")
    assert counter(text, HITS_METRIC) == 640
    assert counter(text, "vllm:prompt_tokens_total") == 3
    assert counter(text, "vllm:generation_tokens_total") == 0


def test_a_missing_proxy_script_is_refused_before_any_instance_starts(tmp_path: Path):
    pair = DisaggregatedServer(DisaggregatedConfig(server=server_config(tmp_path),
                                                   topology=PrefillDecode(1, 1, tmp_path / "absent.py"),
                                                   work_dir=tmp_path / "work"))
    with pytest.raises(BackendError, match=r"proxy script .*absent\.py does not exist") as err:
        pair.start()
    assert "disagg_proxy_demo.py" in (err.value.hint or "")
    assert not (tmp_path / "work").exists()
    pair.stop()  # and stopping what never started is safe
    with pytest.raises(BackendError, match="not started"):
        _ = pair.url


def test_the_app_reads_both_inputs_and_refuses_one_alone_or_with_a_url(tmp_path: Path):
    proxy = tmp_path / "disagg_proxy_demo.py"
    proxy.write_text("")
    inputs = {"prefill_decode": None, "disagg_proxy": None, "endpoint_url": None}
    assert prefill_decode(inputs) is None
    assert prefill_decode({**inputs, "prefill_decode": "1:1", "disagg_proxy": proxy}) == PrefillDecode(1, 1, proxy)
    with pytest.raises(AppConfigError, match="prefill_decode needs --input disagg_proxy"):
        prefill_decode({**inputs, "prefill_decode": "1:1"})
    with pytest.raises(AppConfigError, match="disagg_proxy needs --input prefill_decode"):
        prefill_decode({**inputs, "disagg_proxy": proxy})
    with pytest.raises(AppConfigError, match="an endpoint_url names a server that is already running"):
        prefill_decode({**inputs, "prefill_decode": "1:1", "disagg_proxy": proxy, "endpoint_url": "http://g/v1"})
    with pytest.raises(AppConfigError, match="is not a file"):
        prefill_decode({**inputs, "prefill_decode": "1:1", "disagg_proxy": tmp_path / "absent.py"})
    with pytest.raises(AppConfigError, match="--input prefill_decode '1' is not P:D"):
        prefill_decode({**inputs, "prefill_decode": "1", "disagg_proxy": proxy})


def test_an_app_config_refuses_a_topology_with_the_in_process_backend_or_a_users_url(tmp_path: Path):
    topology = PrefillDecode(1, 1, tmp_path / "p.py")
    with pytest.raises(AppConfigError, match="the backend is vllm"):
        app_config(tmp_path, prefill_decode=topology)
    with pytest.raises(AppConfigError, match="an endpoint_url was given"):
        app_config(tmp_path, backend="endpoint", prefill_decode=topology,
                   endpoint=EndpointSettings(url="http://gw:8000/v1"))
    started = app_config(tmp_path, backend="endpoint", prefill_decode=topology)  # what `serving` makes of it
    report = TopologyReport(info(tmp_path), KvTransfer(512, 600, 600, 600))
    assert app_config(tmp_path, backend="endpoint", prefill_decode=topology, topology=lambda: report,
                      endpoint=EndpointSettings(url="http://127.0.0.1:9000/v1")).endpoint is not None
    assert started.topology is None


def test_the_record_holds_the_topology_and_what_the_decode_side_loaded(tmp_path: Path):
    report = TopologyReport(info(tmp_path), KvTransfer(decode_loaded_tokens=512, decode_queried_tokens=600,
                                                       decode_prompt_tokens=600, prefill_prompt_tokens=610))
    config = app_config(tmp_path, backend="endpoint", prefill_decode=report.info.topology, topology=lambda: report,
                        endpoint=EndpointSettings(url="http://127.0.0.1:9000/v1", model="cmx-sut"),
                        server_log=tmp_path / "p.log")
    details = {"transport": "http", "url": "http://127.0.0.1:9000/v1", "model": "cmx-sut", "server_software": None,
               "server_lists_models": False}
    record = backend_record(config, [RunSummary(scenario="Offline", mode="accuracy", folder="f", validity="VALID",
                                                tokens_per_second=1.0, ttft_p99_ms=None, tpot_p99_ms=None, rouge=None,
                                                problems=[], details=details)])
    assert record["started_by_cmx"] is True and record["server_lists_models"] is False
    topology = record["topology"]
    assert {k: topology[k] for k in ("kind", "prefill", "decode", "connector", "proxy")} == {
        "kind": "disaggregated", "prefill": 1, "decode": 2, "connector": "ExampleConnector", "proxy": "proxy.py"}
    assert topology["kv_transfer"]["decode_loaded_tokens"] == 512 and topology["kv_transfer"]["happened"] is True
    assert topology["served"] == {"software": "vLLM", "version": "0.32.0"}
    json.dumps(record)  # as cmx_run.json holds it


def test_the_summary_says_how_much_kv_moved_and_why_none_did(tmp_path: Path):
    def note(transfer: KvTransfer | None) -> str:
        (line,) = transfer_notes(TopologyReport(info(tmp_path), transfer))
        return line

    assert transfer_notes(None) == ()
    assert note(KvTransfer(512, 600, 600, 610)) == \
        "DISAGGREGATED 1P:2D: the decode side loaded 512 of 600 prompt tokens from the prefill side"
    refused = note(KvTransfer(0, 600, 600, 0))
    assert "NO KV MOVED" in refused and "the proxy's prefill requests failed" in refused
    assert "whole 128-token blocks" in note(KvTransfer(0, 100, 100, 100))
    assert "could not be read" in note(None)


class ProxyLike(FakeOpenAIServer):
    """As vLLM's disaggregation proxy: completions, and no GET /v1/models (404)."""

    async def models(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response({"detail": "Not Found"}, status=404)

    async def complete(self, request: Any) -> Any:
        body = await request.json()
        choice = {"text": "x", "token_ids": [7] * body["max_tokens"], "finish_reason": "length"}
        return await self.stream_or_json(request, body, [choice], {"usage": {"completion_tokens": body["max_tokens"]}})


def test_an_endpoint_without_a_model_listing_serves_the_model_named_and_says_so():
    pytest.importorskip("aiohttp")
    from cmx.mlperf.backends.base import GenRequest
    from cmx.mlperf.backends.endpoint import EndpointBackend
    from cmx.mlperf.backends.endpoint_client import EndpointConfig

    with ProxyLike() as server:
        with pytest.raises(BackendError, match="GET /models"):  # nothing named: nothing to go on
            EndpointBackend(EndpointConfig(url=server.url, warmup_requests=1)).start()
        backend = EndpointBackend(EndpointConfig(url=server.url, model="cmx-sut", warmup_requests=1))
        try:
            details = backend.start().details
            (result,) = backend.generate([GenRequest(id=0, prompt_ids=[5, 6], max_tokens=3)])
        finally:
            backend.stop()
    assert list(result.token_ids) == [7, 7, 7]
    assert details["model"] == "cmx-sut" and details["server_lists_models"] is False
    assert details["server_software"] is None and details["server_max_model_len"] is None


# --- end to end: vLLM's CPU build, its proxy, the app through the CLI -----------------------------------------


@pytest.fixture(scope="module")
def vllm_proxy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """vLLM's disagg_proxy_demo.py, from vLLM's source distribution on PyPI (checksummed), kept in a cache; the
    test is skipped only when the download fails."""
    if PROXY_CACHE.is_file():
        return PROXY_CACHE
    import requests

    from cmx.docker.launch import default_ca_bundle
    from cmx.tools.download import download

    sdist = tmp_path_factory.mktemp("vllm-sdist") / "vllm-0.32.0.tar.gz"
    session = requests.Session()
    bundle = default_ca_bundle()  # PyPI is reached as pip reaches it (pip.conf's cert, behind a TLS-inspecting proxy)
    if bundle is not None:
        session.verify = str(bundle)
    try:
        download(VLLM_SDIST_URL, sdist, sha256=VLLM_SDIST_SHA256, retries=2, keep_partial=False, session=session)
    except Exception as exc:  # noqa: BLE001 - any failure to fetch is a reason to skip, and says which
        pytest.skip(f"vLLM's source distribution could not be downloaded from PyPI: {exc}")
    with tarfile.open(sdist, "r:gz") as tar:  # the one member, read as bytes: no path from the archive is used
        member = tar.getmember(PROXY_MEMBER)
        assert member.isfile(), PROXY_MEMBER
        data = tar.extractfile(member).read()  # type: ignore[union-attr]
    PROXY_CACHE.parent.mkdir(parents=True, exist_ok=True)
    partial = PROXY_CACHE.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(PROXY_CACHE)
    sdist.unlink()
    return PROXY_CACHE


def vllm_processes() -> list[str]:
    out = subprocess.run(["pgrep", "-af", "vllm.entrypoints.openai.api_server|disagg_proxy_demo"],
                         capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "pgrep" not in line]


def accuracy_outputs(results: Path) -> dict[int, str]:
    log = results / "cpu-box" / "llama3.1-8b" / "Offline" / "accuracy" / "mlperf_log_accuracy.json"
    return {int(r["qsl_idx"]): r["data"] for r in json.loads(log.read_text())}


@needs_vllm
@pytest.mark.e2e
def test_a_prefill_and_a_decode_instance_behind_vllms_proxy_answer_as_one_server(home: Home, tmp_path: Path,
                                                                                 vllm_proxy: Path):
    (home.root / "registry.yaml").write_text(f"sources:\n  - name: builtin\n    path: {REPO / 'recipes'}\n",
                                             encoding="utf-8")
    query = "app mlperf inference llama3.1-8b _cpu _tiny _endpoint _short _accuracy"
    common = ("--input", "rows=8", "--input", "system_name=cpu-box", "--progress", "none")  # the reference's greedy
    began = time.monotonic()
    pair = home.cmx("run", query, *common, "--input", f"results_dir={tmp_path / 'pd'}", "--input", "prefill_decode=1:1",
                    "--input", f"disagg_proxy={vllm_proxy}", timeout=900)
    assert pair.returncode == 0, pair.stdout[-6000:] + pair.stderr[-3000:]
    assert vllm_processes() == [], "an instance or the proxy cmx started is still running"
    middle = time.monotonic()
    one = home.cmx("run", query, *common, "--input", f"results_dir={tmp_path / 'one'}", timeout=900)
    assert one.returncode == 0, one.stdout[-6000:] + one.stderr[-3000:]
    print(f"disaggregated run {middle - began:.0f} s, one server {time.monotonic() - middle:.0f} s")

    # (a) greedy: the same answers, sample by sample
    answers = accuracy_outputs(tmp_path / "pd")
    assert len(answers) == 8 and answers == accuracy_outputs(tmp_path / "one")

    # (b) the record: the topology, the proxy's missing /v1/models, and what the connector moved
    facts = json.loads((tmp_path / "pd" / "cpu-box" / "llama3.1-8b" / "Offline" / "cmx_run.json").read_text())
    backend = facts["backend"]
    assert backend["started_by_cmx"] is True and backend["server_lists_models"] is False, backend
    topology = backend["topology"]
    assert {k: topology[k] for k in ("kind", "prefill", "decode", "connector", "proxy")} == {
        "kind": "disaggregated", "prefill": 1, "decode": 1, "connector": "ExampleConnector",
        "proxy": "disagg_proxy_demo.py"}, topology
    assert topology["served"]["software"] == "vLLM" and topology["served"]["version"], topology
    moved = topology["kv_transfer"]
    # every prompt reached the decode instance (the warm-up's and the 8 samples')
    assert moved["decode_prompt_tokens"] > 8 * 130, moved
    # the decode instance loaded the prefill instance's KV for the prompts long enough for ExampleConnector's whole
    # 128-token blocks (about half the tiny prompts), and cmx left min_tokens out for vLLM's proxy to accept
    assert moved["prefill_prompt_tokens"] > 0 and moved["decode_loaded_tokens"] >= 128, moved
    assert moved["happened"] is True and backend["min_tokens_sent"] is False
    summary = (tmp_path / "pd" / "summary.txt").read_text()
    assert f"DISAGGREGATED 1P:1D: the decode side loaded {moved['decode_loaded_tokens']} of" in summary, summary
    assert not list((home.root / "runs").glob("**/kv-transfer-*")), "the KV folder was left behind"
    for log in ("vllm-prefill-0.log", "vllm-decode-0.log", "disagg-proxy.log"):
        assert list((home.root / "runs").glob(f"**/{log}")), log
