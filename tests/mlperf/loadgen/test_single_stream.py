"""SingleStream through the harness: the round's scenario and its unit, user.conf, the SUT (one query in flight),
LoadGen's log of it, the verdict and result line, and the summary table's line.

The LoadGen runs here are real (mlperf_loadgen in this process, settings set by hand, the round's seeds) on a backend
of the tests' own (tests/mlperf/single_stream.py); the round files are cmx's own, copied, with a SingleStream
scenario added to llama2-70b-99.9 (ms) and Qwen3-VL (s), as no benchmark of the rounds lists one yet.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cmx.mlperf import rounds
from cmx.mlperf.loadgen.accuracy_log import read_accuracy_log
from cmx.mlperf.loadgen.harness import CONFIG_JSON, judge
from cmx.mlperf.loadgen.harness_config import EngineSettings, HarnessConfig, HarnessResult
from cmx.mlperf.loadgen.log import read_loadgen_run
from cmx.mlperf.loadgen.run_record import ACCURACY_LOG, RESULT_JSON
from cmx.mlperf.loadgen.userconf import ShortProfile, UserConfError, user_conf
from cmx.mlperf.run_summary import RunSummary, format_table
from tests.conftest import REPO, needs_vllm
from tests.mlperf import single_stream
from tests.mlperf.single_stream import QWEN, OneAtATime, run_single_stream, single_stream_rounds


@pytest.fixture
def use_rounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return single_stream.use_rounds(tmp_path, monkeypatch)


def config(out: Path, benchmark: str, mode: str = "performance") -> HarnessConfig:
    return HarnessConfig(model=out / "model", dataset=out / "data", scenario="SingleStream", mode=mode,
                         user_conf=out / "user.conf", output=out, round="v6.1", benchmark=benchmark)


def test_a_single_stream_result_is_a_latency_in_the_unit_its_round_gives(use_rounds: Path):
    v61 = rounds.load_round("v6.1")
    qwen, llama = v61.benchmark(QWEN).scenario("SingleStream"), \
        v61.benchmark("llama2-70b-99.9").scenario("SingleStream")
    assert qwen.latency_result and qwen.loadgen_scenario == "SingleStream"
    assert (qwen.latency_unit, qwen.in_latency_unit(2_500_000_000)) == ("s", 2.5)
    assert (llama.latency_unit, llama.in_latency_unit(2_500_000)) == (None, 2.5)  # ms unless the round says s
    assert not v61.benchmark(QWEN).scenario("Offline").latency_result


@pytest.mark.parametrize(("scenario", "refused"), [
    ({"loadgen_model": QWEN, "loadgen_scenario": "SingleStream", "min_duration_ms": 600000,
      "min_query_count": 1024}, "early stopping"),
    ({"loadgen_model": QWEN, "loadgen_scenario": "SingleStream", "min_duration_ms": 600000,
      "latency_unit": "min"}, "latency_unit must be one of ms, s"),
])
def test_a_single_stream_scenario_with_a_query_count_or_an_unknown_unit_is_refused(tmp_path: Path, scenario: dict,
                                                                                   refused: str):
    folder = single_stream_rounds(tmp_path, {("v6.1", QWEN): scenario})
    with pytest.raises(rounds.RoundError, match=refused):
        rounds.read_round_file(folder / "v6.1.yaml")


def test_only_a_single_stream_result_has_a_latency_unit(tmp_path: Path):
    folder = single_stream_rounds(tmp_path, {})
    path = folder / "v6.1.yaml"
    path.write_text(path.read_text().replace("        loadgen_scenario: Offline\n",
                                             "        loadgen_scenario: Offline\n        latency_unit: s\n", 1))
    with pytest.raises(rounds.RoundError, match="only a SingleStream result is a latency"):
        rounds.read_round_file(path)


def test_a_single_stream_user_conf_plans_no_rate_and_may_say_the_expected_latency(use_rounds: Path):
    v61 = rounds.load_round("v6.1")
    conf = user_conf(v61, QWEN, "SingleStream", target_latency_ms=40000.0)
    assert conf.text.splitlines()[-1] == f"{QWEN}.SingleStream.target_latency = 40000.0"
    assert "target_qps" not in conf.text and conf.compliant
    assert "target_qps" not in user_conf(v61, QWEN, "SingleStream").text  # mlperf.conf's expected latency
    with pytest.raises(UserConfError, match=f"target_qps has no effect on a {QWEN} SingleStream run"):
        user_conf(v61, QWEN, "SingleStream", target_qps=5.0)
    odd = user_conf(v61, QWEN, "SingleStream", overrides={"target_latency_percentile": 99.0})
    assert [f.key for f in odd.noncompliance] == ["target_latency_percentile"]
    assert "90th percentile" in odd.noncompliance[0].reason
    short = user_conf(v61, QWEN, "SingleStream", short=ShortProfile(min_duration_ms=0, samples=8,
                                                                          min_query_count=64))
    assert f"{QWEN}.SingleStream.min_query_count = 64" in short.text and not short.compliant


def test_loadgen_issues_single_stream_queries_one_at_a_time_to_the_streaming_sut(tmp_path: Path):
    backend = OneAtATime()
    sut, run = run_single_stream(tmp_path, backend, min_query_count=100)
    r = run.results
    assert backend.most_at_once == 1 and backend.requests == r.query_count == sut.completed >= 100
    assert (run.scenario, r.validity, r.early_stopping_met, sut.errors) == ("SingleStream", "VALID", True, [])
    assert r.latency.min_ns is not None and r.latency.max_ns is not None
    assert r.early_stopping_latency_ns is not None and r.latency.min_ns <= r.early_stopping_latency_ns <= \
        r.latency.max_ns
    assert r.samples_per_second and r.tokens_per_second  # queries/s with LoadGen's overhead; completed tokens/s
    assert r.ttft is not None and r.ttft.p99_ns  # token latencies: the SUT gave every first token
    assert run.errors == ()


def test_the_harness_reports_a_single_stream_result_in_the_rounds_unit(tmp_path: Path, use_rounds: Path):
    run_single_stream(tmp_path / "w", OneAtATime(), token_latencies=False)
    qwen = judge(config(tmp_path / "w", QWEN), [], 100, 1.0, 2.0, {})
    assert qwen.ok and qwen.validity == "VALID", qwen.problems
    ns = rounds_ns(tmp_path / "w")
    assert (qwen.latency, qwen.latency_unit) == (ns / 1e9, "s")
    assert qwen.verdict() == f"SingleStream performance: VALID, OK, 90th percentile latency {ns / 1e9:.4g} s " \
                                "(early stopping)"
    assert qwen.tokens_per_second is None and qwen.latency_p99_ms is None
    run_single_stream(tmp_path / "l", OneAtATime(), token_latencies=True)
    llama = judge(config(tmp_path / "l", "llama2-70b-99.9"), [], 100, 1.0, 2.0, {})
    assert llama.ok, llama.problems
    assert (llama.latency, llama.latency_unit) == (rounds_ns(tmp_path / "l") / 1e6, "ms")
    assert llama.tokens_per_second and llama.ttft_p99_ms is not None


def rounds_ns(out: Path) -> int:
    ns = read_loadgen_run(out).results.early_stopping_latency_ns
    assert ns
    return ns


def test_too_few_single_stream_queries_for_early_stopping_say_how_many_it_needs(tmp_path: Path, use_rounds: Path):
    run_single_stream(tmp_path, OneAtATime(), min_query_count=20, min_duration_ms=0, token_latencies=False)
    result = judge(config(tmp_path, QWEN), [], 20, 1.0, 2.0, {})
    assert result.validity == "INVALID" and result.latency is not None
    said = "\n".join(result.problems)
    assert "early-stopping condition was not met (latency: processed 20 queries, and an estimate needs at least " \
           "64: raise min_query_count)" in said, said


def test_the_summary_table_gives_a_single_stream_result_its_own_line():
    runs = [RunSummary(scenario="SingleStream", mode="performance", folder="f", validity="VALID",
                       tokens_per_second=None, ttft_p99_ms=None, tpot_p99_ms=None, rouge=None, problems=[],
                       samples_per_second=0.05, latency=20.25, latency_unit="s"),
            RunSummary(scenario="SingleStream", mode="accuracy", folder="g", validity=None, tokens_per_second=None,
                       ttft_p99_ms=None, tpot_p99_ms=None, rouge=None, problems=[])]
    lines = format_table(runs, whole_answers=True).splitlines()
    assert lines[-1] == "SingleStream performance: 90th percentile latency 20.25 s (early stopping)"
    assert len(lines) == 4


def test_a_result_without_a_latency_reads_as_it_did(tmp_path: Path):
    """result.json written before SingleStream has neither latency field; it reads, and its verdict is unchanged."""
    result = HarnessResult(scenario="Offline", mode="performance", validity="VALID", problems=[],
                           samples_per_second=1.0, tokens_per_second=2.0, ttft_p99_ms=None, tpot_p99_ms=None,
                           completed_samples=5, failed_samples=0, start_seconds=1.0, test_seconds=2.0)
    path = result.write(tmp_path / "result.json")
    data = json.loads(path.read_text())
    del data["latency"], data["latency_unit"]
    path.write_text(json.dumps(data))
    assert HarnessResult.read(path) == result and result.verdict() == "Offline performance: VALID, OK"


# --- e2e: the harness process, real vLLM on the CPU, real LoadGen ------------------------------------------------

LLAMA = "llama2-70b-99.9"
ROWS = 64


@needs_vllm
@pytest.mark.e2e
@pytest.mark.serial
def test_the_harness_runs_a_single_stream_performance_and_accuracy_test_on_the_tiny_llama(tmp_path: Path,
                                                                                          use_rounds: Path):
    """One harness process (FromConfig once, one engine) runs SingleStream performance and accuracy on vLLM; the
    process reads the rounds' copy, as cmx's own rounds list no SingleStream yet."""
    from cmx.mlperf.benchmarks.llama2_70b.tiny import make_tiny_llama, make_tiny_openorca

    model = make_tiny_llama(tmp_path / "model", seed=0).path
    dataset = make_tiny_openorca(tmp_path / "orca.pkl", model, rows=ROWS, seed=0).path
    # equal issue pads SingleStream's 64 queries up to the next multiple of the 64 samples: 128 queries
    conf = user_conf(rounds.load_round("v6.1"), LLAMA, "SingleStream",
                     short=ShortProfile(min_duration_ms=0, samples=ROWS, min_query_count=ROWS)).write(tmp_path / "conf")
    configs = [HarnessConfig(model=model, dataset=dataset, scenario="SingleStream", mode=mode, user_conf=conf,
                             output=tmp_path / mode, round="v6.1", benchmark=LLAMA, device="cpu", max_tokens=16,
                             rows=ROWS, engine=EngineSettings(max_model_len=2048))
               for mode in ("performance", "accuracy")]
    args: list[str] = []
    for c in configs:
        c.output.mkdir(parents=True)
        args += c.argv(c.output / CONFIG_JSON)
    code = ("import pathlib, sys; import cmx.mlperf.rounds as r; r.ROUNDS_DIR = pathlib.Path(sys.argv.pop(1)); "
            "from cmx.mlperf.loadgen.harness import main; sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", code, str(use_rounds), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    perf = HarnessResult.read(tmp_path / "performance" / RESULT_JSON)
    assert perf.ok and perf.validity == "VALID", perf.problems
    run = read_loadgen_run(tmp_path / "performance")
    assert (run.scenario, run.settings.seeds, run.errors) == ("SingleStream", rounds.load_round("v6.1").seeds, ())
    assert run.results.query_count == 128 and run.results.early_stopping_met
    assert perf.latency == run.results.early_stopping_latency_ns / 1e6 and perf.latency_unit == "ms"
    assert perf.tokens_per_second and perf.ttft_p99_ms is not None
    assert "SingleStream performance: VALID, OK, 90th percentile latency" in proc.stderr
    accuracy = HarnessResult.read(tmp_path / "accuracy" / RESULT_JSON)
    assert accuracy.ok, accuracy.problems
    assert len(read_accuracy_log(tmp_path / "accuracy" / ACCURACY_LOG)) == ROWS
    assert read_loadgen_run(tmp_path / "accuracy").errors == ()


def test_the_app_names_single_stream_in_any_case_and_finds_no_target_for_it():
    from cmx.mlperf.app import short_profile
    from cmx.mlperf.app_plan import scenario_name
    from cmx.mlperf.tune.findperf import unset_targets

    assert [scenario_name(w) for w in ("singlestream", "SingleStream", "offline", "multistream")] == \
        ["SingleStream", "SingleStream", "Offline", None]
    assert unset_targets(("Offline", "SingleStream"), {"target_qps_offline": None}) == ("Offline",)
    profile = short_profile("SingleStream", None)
    assert (profile.min_query_count, profile.min_duration_ms) == (64, 0)  # early stopping's fewest at p90
