"""cmx.mlperf.rounds: each round's facts come from its data file, and unknown names fail clearly."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
import tomllib

from cmx.errors import CmxError
from cmx.mlperf.rounds import (
    ROUNDS_DIR,
    RoundError,
    Seeds,
    known_rounds,
    latest_round,
    load_round,
    read_round_file,
    round_for_seeds,
)
from tests.conftest import REPO

V60_SEEDS = Seeds(2465351861681999779, 14276810075590677512, 3936089224930324775)
V61_SEEDS = Seeds(2085463073848966840, 2747215439041700203, 16159082839903944936)
V51_SEEDS = Seeds(1780908523862526354, 14771362308971278857, 18209322760996052031)


def test_every_round_file_loads_and_names_itself() -> None:
    assert known_rounds() == ["v5.1", "v6.0", "v6.1"]
    for name in known_rounds():
        assert load_round(name).name == name


def test_each_round_pins_the_loadgen_release_that_carries_its_seeds() -> None:
    v60, v61, v51 = load_round("v6.0"), load_round("v6.1"), load_round("v5.1")
    assert (v60.loadgen_requirement, v60.seeds) == ("mlcommons-loadgen==6.0.15", V60_SEEDS)
    assert (v61.loadgen_requirement, v61.seeds) == ("mlcommons-loadgen==6.0.17", V61_SEEDS)
    assert v61.loadgen_seed_versions == ("6.0.16", "6.0.17")
    assert (v51.loadgen_requirement, v51.seeds) == ("mlcommons-loadgen==5.1.2", V51_SEEDS)


def test_a_log_seeds_tell_which_round_they_belong_to() -> None:
    assert round_for_seeds(V61_SEEDS).name == "v6.1"
    assert round_for_seeds(Seeds(1, 2, 3)) is None


def test_the_cpu_and_mlperf_extras_install_the_loadgen_of_the_default_round() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    newest = load_round(latest_round())  # another round's pin is get-loadgen's cached artefact
    assert newest.loadgen_requirement in extras["cpu"] and newest.loadgen_requirement in extras["mlperf"]
    try:
        installed = importlib.metadata.version("mlcommons-loadgen")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("mlcommons-loadgen is not installed")
    assert installed == newest.loadgen_version


def test_v6_1_drops_llama2_70b_99_and_keeps_99_9() -> None:
    assert load_round("v6.0").benchmark_names == ("llama2-70b-99", "llama2-70b-99.9", "llama3.1-8b", "llama3.1-405b",
                                                  "gpt-oss-120b", "mixtral-8x7b", "deepseek-r1", "whisper",
                                                  "qwen3-vl-235b-a22b", "wan-2.2-t2v-a14b")
    assert load_round("v6.1").benchmark_names == ("llama2-70b-99.9", "llama3.1-8b", "deepseek-r1", "gpt-oss-120b",
                                                  "whisper", "qwen3-vl-235b-a22b", "wan-2.2-t2v-a14b")


def test_qwen3_vl_is_judged_on_whole_answers_with_the_checkers_target_and_no_compliance_test() -> None:
    for name, required in (("v6.0", ("Server", "Offline")), ("v6.1", ("Offline",))):
        qwen = load_round(name).benchmark("qwen3-vl-235b-a22b")
        assert qwen.loadgen_scenario_names == ("Offline", "Server") and qwen.required_scenarios == required
        assert not qwen.token_latencies and qwen.compliance_tests == () and qwen.performance_sample_count == 48289
        server = qwen.scenario("Server")
        assert (server.latency, server.target_latency_ms, server.target_latency_max_ms) == (None, 12000, 12000)
        assert qwen.scenario("Offline").min_query_count == 48289
        # constants.py: ("F1_HIERARCHICAL", 0.7903 * 0.99)
        assert [(b.metric, b.value) for b in qwen.accuracy.minimums] == [("f1", 0.7903 * 0.99)]


def test_a_server_scenario_needs_one_kind_of_latency_limit(tmp_path: Path) -> None:
    text = (REPO / "cmx/mlperf/rounds/v6.0.yaml").read_text()
    both = text.replace("        target_latency_ms: 12000 ", "        ttft_p99_ms: 2000\n        tpot_p99_ms: 100\n"
                                                             "        target_latency_ms: 12000 ")
    (tmp_path / "v6.0.yaml").write_text(both)
    with pytest.raises(RoundError, match="either ttft_p99_ms and tpot_p99_ms or target_latency_ms"):
        read_round_file(tmp_path / "v6.0.yaml")


def test_whisper_is_offline_only_with_test01_and_the_checkers_accuracy_target() -> None:
    for name in ("v6.0", "v6.1"):
        whisper = load_round(name).benchmark("whisper")
        assert whisper.scenario_names == ("Offline",) and whisper.required_scenarios == ("Offline",)
        assert whisper.compliance_tests == ("TEST01",) and whisper.performance_sample_count == 1633
        # constants.py: ("ACCURACY", (100.0 - 2.0671) * 0.99)
        assert [(b.metric, b.value) for b in whisper.accuracy.minimums] == [("accuracy", (100.0 - 2.0671) * 0.99)]



def test_wan_2_2_runs_offline_and_singlestream_in_seconds_with_test04_and_the_checkers_videos() -> None:
    # constants.py MODEL_CONFIG[round], SPECIAL_UNIT_DICT, REQUIRED_ACC_BENCHMARK and loadgen/mlperf.conf at b66003e
    videos = {"v6.0": ("130", "106", "84", "59", "12", "31", "86", "122", "233", "96"),
              "v6.1": ("130", "106", "84", "59", "12", "123", "43", "22", "238", "32")}
    for name, ids in videos.items():
        wan = load_round(name).benchmark("wan-2.2-t2v-a14b")
        assert wan.loadgen_scenario_names == ("Offline", "SingleStream") == wan.required_scenarios
        assert wan.compliance_tests == ("TEST04",) and not wan.token_latencies and not wan.equal_issue
        single = wan.scenario("SingleStream")
        assert (single.latency_unit, single.min_query_count, single.latency_result) == ("s", None, True)
        assert wan.scenario("Offline").min_query_count == 248 and wan.scenario("Offline").latency_unit is None
        assert [(b.metric, b.value) for b in wan.accuracy.minimums] == [("vbench_score", 70.48 * 0.99)]
        assert wan.accuracy_files == tuple(f"videos/{i}.mp4" for i in ids)

@pytest.mark.parametrize("round_", ["v6.0", "v6.1"])
def test_gpt_oss_120b_has_the_checkers_targets_sample_counts_and_compliance_tests(round_: str) -> None:
    # constants.py MODEL_CONFIG[round], loadgen/mlperf.conf and compliance/TEST07, TEST09 at b66003e
    bench = load_round(round_).benchmark("gpt-oss-120b")
    assert [(b.metric, b.value) for b in bench.accuracy.minimums] == [("exact_match", 83.13 * 0.99)]
    assert [(b.metric, b.value) for b in bench.accuracy.maximums] == [("tokens_per_sample", 9999 * 1.1)]
    assert (bench.dataset_size, bench.performance_sample_count, bench.accuracy_sample_count) == (6396, 6396, 4395)
    server, interactive = bench.scenario("Server"), bench.scenario("Interactive")
    assert (server.latency.ttft_p99_ms, server.latency.tpot_p99_ms) == (3000, 80)
    assert (interactive.loadgen_model, interactive.latency.ttft_p99_ms, interactive.latency.tpot_p99_ms) == (
        "gpt-oss-120b-interactive", 2000, 15)
    # mlperf.conf sets none for gpt-oss-120b; the checker's OFFLINE_MIN_SPQ_SINCE_V4 wants 6396 in the query
    assert bench.scenario("Offline").min_query_count == 6396
    assert bench.compliance_tests == ("TEST07", "TEST09") and bench.missing_scenarios({"Offline"}) == [
        "Server or Interactive"]


def test_a_benchmark_without_its_own_accuracy_set_covers_its_dataset() -> None:
    bench = load_round("v6.0").benchmark("llama3.1-8b")
    assert bench.accuracy_sample_count == bench.dataset_size == 13368


@pytest.mark.parametrize("round_", ["v5.1", "v6.0"])
def test_llama3_1_405b_has_the_checkers_targets_and_latency_limits(round_: str) -> None:
    # constants.py MODEL_CONFIG[round] and loadgen/mlperf.conf at b66003e; v6.1's constants drop llama3.1-405b
    bench = load_round(round_).benchmark("llama3.1-405b")
    targets = bench.accuracy
    assert [(b.metric, b.value) for b in targets.minimums] == [
        ("rougeL", 21.6666 * 0.99), ("exact_match", 90.1335 * 0.99), ("tokens_per_sample", 684.68 * 0.9)]
    assert [(b.metric, b.value) for b in targets.maximums] == [("tokens_per_sample", 684.68 * 1.1)]
    assert (bench.dataset_size, bench.performance_sample_count) == (8313, 8313)
    server, interactive = bench.scenario("Server"), bench.scenario("Interactive")
    assert (server.latency.ttft_p99_ms, server.latency.tpot_p99_ms) == (6000, 175)
    assert (interactive.loadgen_model, interactive.latency.ttft_p99_ms, interactive.latency.tpot_p99_ms) == (
        "llama3_1-405b-interactive", 4500, 80)
    assert bench.compliance_tests == ("TEST06",) and bench.missing_scenarios({"Offline"}) == ["Server or Interactive"]
    assert "llama3.1-405b" not in load_round("v6.1").benchmark_names


@pytest.mark.parametrize("round_", ["v5.1", "v6.0", "v6.1"])
def test_deepseek_r1_has_the_checkers_targets_upper_limit_and_latency_limits(round_: str) -> None:
    # constants.py MODEL_CONFIG[round] and loadgen/mlperf.conf at b66003e
    bench = load_round(round_).benchmark("deepseek-r1")
    assert [(b.metric, b.value) for b in bench.accuracy.minimums] == [
        ("exact_match", 0.99 * 81.3582), ("tokens_per_sample", 0.9 * 3886.2274)]
    assert [(b.metric, b.value) for b in bench.accuracy.maximums] == [("tokens_per_sample", 1.1 * 3886.2274)]
    assert (bench.dataset_size, bench.performance_sample_count) == (4388, 4388)
    server = bench.scenario("Server")
    assert (server.latency.ttft_p99_ms, server.latency.tpot_p99_ms) == (2000, 80)
    assert bench.scenario("Offline").min_query_count == 4388 and bench.compliance_tests == ("TEST06",)
    if round_ == "v5.1":  # required-scenarios-datacenter ['Server', 'Offline']; mlperf.conf has no interactive model
        assert "Interactive" not in bench.scenario_names and bench.missing_scenarios({"Offline"}) == ["Server"]
    else:
        interactive = bench.scenario("Interactive")
        assert (interactive.loadgen_model, interactive.latency.ttft_p99_ms, interactive.latency.tpot_p99_ms) == (
            "deepseek-r1-interactive", 1500, 15)
        assert bench.missing_scenarios({"Offline"}) == ["Server or Interactive"]


def test_llama3_1_8b_has_the_checkers_targets_upper_limit_and_latency_limits() -> None:
    bench = load_round("v6.0").benchmark("llama3.1-8b")
    targets = bench.accuracy
    assert [(b.metric, b.value) for b in targets.minimums] == [
        ("rouge1", 38.7792 * 0.99), ("rouge2", 15.9075 * 0.99), ("rougeL", 24.4957 * 0.99),
        ("rougeLsum", 35.793 * 0.99), ("gen_len", 8167644 * 0.9)]
    assert targets.maximum("gen_len") == 8167644 * 1.1
    assert (bench.dataset_size, bench.performance_sample_count) == (13368, 13368)
    server, interactive = bench.scenario("Server").latency, bench.scenario("Interactive").latency
    assert (server.ttft_p99_ms, server.tpot_p99_ms, interactive.ttft_p99_ms, interactive.tpot_p99_ms) == \
        (2000, 100, 500, 30)
    assert bench.scenario("Interactive").loadgen_model == "llama3_1-8b-interactive"
    assert bench.compliance_tests == ("TEST06",) and bench.missing_scenarios({"Offline"}) == ["Server or Interactive"]


def test_layout_names_the_code_folder_of_each_round() -> None:
    assert load_round("v6.0").layout.code_dir == "src"
    assert load_round("v5.1").layout.code_dir == "code"
    assert load_round("v5.1").layout.compliance_dir == "compliance"
    assert load_round("v6.0").layout.compliance_dir == "results"


def test_llama2_scenarios_carry_loadgen_names_durations_and_limits() -> None:
    bench = load_round("v6.0").benchmark("llama2-70b-99")
    offline, server, interactive = (bench.scenario(s) for s in ("Offline", "Server", "Interactive"))
    assert (offline.loadgen_model, offline.loadgen_scenario, offline.latency) == ("llama2-70b", "Offline", None)
    assert offline.min_query_count == 24576
    assert (server.loadgen_model, server.loadgen_scenario) == ("llama2-70b", "Server")
    assert (interactive.loadgen_model, interactive.loadgen_scenario) == ("llama2-70b-interactive", "Server")
    assert (server.latency.ttft_p99_ns, server.latency.tpot_p99_ns) == (2_000_000_000, 200_000_000)
    assert (interactive.latency.ttft_p99_ms, interactive.latency.tpot_p99_ms) == (450, 40)
    assert {s.min_duration_ms for s in bench.scenarios} == {600000}
    assert (bench.dataset_size, bench.performance_sample_count) == (24576, 24576)
    assert bench.equal_issue and bench.token_latencies
    assert bench.compliance_tests == ("TEST06",)


def test_accuracy_targets_scale_rouge_by_the_benchmark_factor_but_not_tokens_per_sample() -> None:
    v60 = load_round("v6.0")
    t99, t999 = v60.benchmark("llama2-70b-99").accuracy, v60.benchmark("llama2-70b-99.9").accuracy
    rouge = ("rouge1", "rouge2", "rougeL")
    assert tuple(t99.minimum(m) for m in rouge) == (44.4312 * 0.99, 22.0352 * 0.99, 28.6162 * 0.99)
    assert tuple(t999.minimum(m) for m in rouge) == (44.4312 * 0.999, 22.0352 * 0.999, 28.6162 * 0.999)
    for targets in (t99, t999):
        assert (targets.minimum("tokens_per_sample"), targets.maximum("tokens_per_sample")) == (294.45 * 0.9,
                                                                                                294.45 * 1.1)
        assert targets.metrics == ("rouge1", "rouge2", "rougeL", "tokens_per_sample")
    assert round(t99.minimum("tokens_per_sample"), 3) == 265.005


def test_datacenter_llama2_needs_offline_and_one_of_server_or_interactive() -> None:
    bench = load_round("v6.0").benchmark("llama2-70b-99")
    assert bench.missing_scenarios({"Offline", "Interactive"}) == []
    assert bench.missing_scenarios({"Offline", "Server"}) == []
    assert bench.missing_scenarios({"Server"}) == ["Offline"]
    assert bench.missing_scenarios({"Offline"}) == ["Server or Interactive"]


def test_unknown_round_lists_the_known_rounds() -> None:
    with pytest.raises(RoundError) as err:
        load_round("v9.9")
    assert isinstance(err.value, CmxError)
    assert "v9.9" in err.value.message and "v5.1, v6.0, v6.1" in err.value.hint


def test_unknown_benchmark_names_the_rounds_that_have_it() -> None:
    with pytest.raises(RoundError) as err:
        load_round("v6.1").benchmark("llama2-70b-99")
    assert "v5.1, v6.0" in err.value.message
    assert "llama2-70b-99.9" in err.value.hint


def test_unknown_scenario_lists_the_benchmarks_scenarios() -> None:
    with pytest.raises(RoundError, match="SingleStream") as err:
        load_round("v6.0").benchmark("llama2-70b-99").scenario("SingleStream")
    assert "Offline, Server, Interactive" in err.value.hint


def _copy_round(tmp_path: Path, edit: str, replacement: str, name: str = "v6.0") -> Path:
    text = (ROUNDS_DIR / f"{name}.yaml").read_text()
    assert edit in text
    path = tmp_path / f"{name}.yaml"
    path.write_text(text.replace(edit, replacement, 1))
    return path


def test_a_mistyped_key_in_a_round_file_is_refused_with_the_file(tmp_path: Path) -> None:
    path = _copy_round(tmp_path, "    dataset_size:", "    dataset_sise:")
    with pytest.raises(RoundError, match="dataset_sise") as err:
        read_round_file(path)
    assert err.value.where == str(path)


def test_a_round_file_must_name_its_own_round(tmp_path: Path) -> None:
    path = _copy_round(tmp_path, "round: v6.0", "round: v6.1")
    with pytest.raises(RoundError, match="does not match the file name"):
        read_round_file(path)


def test_a_seed_written_as_text_is_refused(tmp_path: Path) -> None:
    path = _copy_round(tmp_path, "qsl_rng_seed: 2465351861681999779", 'qsl_rng_seed: "2465351861681999779"')
    with pytest.raises(RoundError, match=r"seeds.qsl_rng_seed must be int"):
        read_round_file(path)


@pytest.mark.parametrize("round_", ["v5.1", "v6.0"])
def test_mixtral_8x7b_has_the_checkers_targets_limits_and_both_required_scenarios(round_: str) -> None:
    # constants.py MODEL_CONFIG[round] and loadgen/mlperf.conf at b66003e; v6.1's constants drop mixtral-8x7b
    bench = load_round(round_).benchmark("mixtral-8x7b")
    targets = bench.accuracy
    assert [(b.metric, b.value) for b in targets.minimums] == [
        ("rouge1", 45.5989 * 0.99), ("rouge2", 23.3526 * 0.99), ("rougeL", 30.4608 * 0.99),
        ("gsm8k", 73.66 * 0.99), ("mbxp", 60.16 * 0.99), ("tokens_per_sample", 144.84 * 0.9)]
    assert [(b.metric, b.value) for b in targets.maximums] == [("tokens_per_sample", 145.9 * 1.1)]
    assert (bench.dataset_size, bench.performance_sample_count, bench.equal_issue) == (15000, 15000, True)
    assert bench.scenario_names == ("Offline", "Server")
    server = bench.scenario("Server")
    assert (server.loadgen_model, server.latency.ttft_p99_ms, server.latency.tpot_p99_ms) == ("mixtral-8x7b", 2000, 200)
    assert bench.compliance_tests == ("TEST06",) and bench.missing_scenarios({"Offline"}) == ["Server"]
    assert "mixtral-8x7b" not in load_round("v6.1").benchmark_names
