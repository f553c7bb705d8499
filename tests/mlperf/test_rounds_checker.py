"""Every round file against the official checker's constants (mlcommons/inference, tools/submission/
submission_checker/constants.py at b66003e, 2026-08-20): MODEL_CONFIG[round] and OFFLINE_MIN_SPQ_SINCE_V4.

The table below holds the official values for the benchmarks cmx has, as numbers (accuracy bounds already
multiplied by their factor, latency constraints in ms). A round file that drifts from the checker, or a
benchmark added without its row, fails here; when the checker changes, update the table from its HEAD."""

from __future__ import annotations

import gzip
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from cmx.mlperf.loadgen.findings import run_findings
from cmx.mlperf.loadgen.log import read_loadgen_run
from cmx.mlperf.loadgen.userconf import user_conf
from cmx.mlperf.rounds import known_rounds, load_round
from tests.conftest import DATA


@dataclass(frozen=True)
class Official:
    dataset: int                   # dataset-size
    performance_samples: int       # performance-sample-count
    accuracy_samples: int          # accuracy-sample-count (Offline), else dataset-size
    offline_min_samples: int       # OFFLINE_MIN_SPQ_SINCE_V4: closed Offline samples_per_query
    required: tuple[str, ...]      # required-scenarios-datacenter
    optional: tuple[str, ...]      # optional-scenarios-datacenter (closed: one of Server/Interactive)
    latency_ms: dict[str, float]   # latency-constraint
    compliance: tuple[str, ...]    # models_TEST0x lists the benchmark is in
    accuracy_minimums: tuple[float, ...]   # accuracy-target values (Offline)
    accuracy_maximums: tuple[float, ...]   # accuracy-upper-limit values
    # (performance_sample_count_override, Offline.min_query_count) where loadgen/mlperf.conf sets more than the
    # checker's minimums, which the round keeps (wan-2.2-t2v-a14b: 248 and 248 against the checker's 50 and 50)
    mlperf_conf: tuple[int, int] | None = None


# one value per benchmark and the rounds it is the same in
LLAMA2_70B_99 = Official(
    dataset=24576, performance_samples=24576, accuracy_samples=24576,
    offline_min_samples=24576, required=("Offline",), optional=("Interactive", "Server"),
    latency_ms={"Server": 20000.0}, compliance=("TEST06",),
    accuracy_minimums=(43.986888, 21.814848, 28.330038, 265.005),
    accuracy_maximums=(323.895,))
LLAMA2_70B_99_9 = Official(
    dataset=24576, performance_samples=24576, accuracy_samples=24576,
    offline_min_samples=24576, required=("Offline",), optional=("Interactive", "Server"),
    latency_ms={"Server": 20000.0}, compliance=("TEST06",),
    accuracy_minimums=(44.386769, 22.013165, 28.587584, 265.005),
    accuracy_maximums=(323.895,))
LLAMA3_1_8B = Official(
    dataset=13368, performance_samples=13368, accuracy_samples=13368,
    offline_min_samples=13368, required=("Offline",), optional=("Interactive", "Server"),
    latency_ms={"Server": 20000.0}, compliance=("TEST06",),
    accuracy_minimums=(38.391408, 15.748425, 24.250743, 35.43507, 7350879.6),
    accuracy_maximums=(8984408.4,))
LLAMA3_1_405B = Official(
    dataset=8313, performance_samples=8313, accuracy_samples=8313,
    offline_min_samples=8313, required=("Offline",), optional=("Interactive", "Server"),
    latency_ms={"Server": 60000.0}, compliance=("TEST06",),
    accuracy_minimums=(21.449934, 89.232165, 616.212),
    accuracy_maximums=(753.148,))
MIXTRAL_8X7B = Official(
    dataset=15000, performance_samples=15000, accuracy_samples=15000,
    offline_min_samples=15000, required=("Server", "Offline"), optional=(),
    latency_ms={"Server": 20000.0}, compliance=("TEST06",),
    accuracy_minimums=(45.142911, 23.119074, 30.156192, 130.356, 72.9234, 59.5584),
    accuracy_maximums=(160.49,))
DEEPSEEK_R1_V51 = Official(
    dataset=4388, performance_samples=4388, accuracy_samples=4388,
    offline_min_samples=4388, required=("Server", "Offline"), optional=(),
    latency_ms={"Server": 60000.0}, compliance=("TEST06",),
    accuracy_minimums=(80.544618, 3497.60466),
    accuracy_maximums=(4274.85014,))
GPT_OSS_120B = Official(
    dataset=6396, performance_samples=6396, accuracy_samples=4395,
    offline_min_samples=6396, required=("Offline",), optional=("Interactive", "Server"),
    latency_ms={"Server": 60000.0}, compliance=("TEST07", "TEST09"),
    accuracy_minimums=(82.2987,),
    accuracy_maximums=(10998.9,))
DEEPSEEK_R1_V60_V61 = Official(
    dataset=4388, performance_samples=4388, accuracy_samples=4388,
    offline_min_samples=4388, required=("Offline",), optional=("Interactive", "Server"),
    latency_ms={"Server": 60000.0}, compliance=("TEST06",),
    accuracy_minimums=(80.544618, 3497.60466),
    accuracy_maximums=(4274.85014,))
WHISPER = Official(
    dataset=1633, performance_samples=1633, accuracy_samples=1633,
    offline_min_samples=1633, required=("Offline",), optional=(),
    latency_ms={}, compliance=("TEST01",),
    accuracy_minimums=(96.953571,),
    accuracy_maximums=())
QWEN3_VL_235B_A22B_V60 = Official(
    dataset=48289, performance_samples=48289, accuracy_samples=48289,
    offline_min_samples=48289, required=("Server", "Offline"), optional=(),
    latency_ms={"Server": 12000.0}, compliance=(),
    accuracy_minimums=(0.782397,),
    accuracy_maximums=())
QWEN3_VL_235B_A22B_V61 = Official(
    dataset=48289, performance_samples=48289, accuracy_samples=48289,
    offline_min_samples=48289, required=("Offline",), optional=("Interactive", "Server"),
    latency_ms={"Server": 12000.0, "Interactive": 1500.0}, compliance=(),
    accuracy_minimums=(0.782397,),
    accuracy_maximums=())
WAN_2_2_T2V_A14B = Official(
    dataset=248, performance_samples=50, accuracy_samples=248,
    offline_min_samples=50, required=("Offline", "SingleStream"), optional=(),
    latency_ms={}, compliance=("TEST04",),
    accuracy_minimums=(70.48 * 0.99,),
    accuracy_maximums=(), mlperf_conf=(248, 248))

OFFICIAL: dict[str, dict[str, Official]] = {
    "v5.1": {"llama2-70b-99": LLAMA2_70B_99, "llama2-70b-99.9": LLAMA2_70B_99_9, "llama3.1-8b": LLAMA3_1_8B,
             "llama3.1-405b": LLAMA3_1_405B, "mixtral-8x7b": MIXTRAL_8X7B, "deepseek-r1": DEEPSEEK_R1_V51},
    "v6.0": {"llama2-70b-99": LLAMA2_70B_99, "llama2-70b-99.9": LLAMA2_70B_99_9, "llama3.1-8b": LLAMA3_1_8B,
             "llama3.1-405b": LLAMA3_1_405B, "gpt-oss-120b": GPT_OSS_120B, "mixtral-8x7b": MIXTRAL_8X7B,
             "deepseek-r1": DEEPSEEK_R1_V60_V61, "whisper": WHISPER, "qwen3-vl-235b-a22b": QWEN3_VL_235B_A22B_V60,
             "wan-2.2-t2v-a14b": WAN_2_2_T2V_A14B},
    "v6.1": {"llama2-70b-99.9": LLAMA2_70B_99_9, "llama3.1-8b": LLAMA3_1_8B, "deepseek-r1": DEEPSEEK_R1_V60_V61,
             "gpt-oss-120b": GPT_OSS_120B, "whisper": WHISPER, "qwen3-vl-235b-a22b": QWEN3_VL_235B_A22B_V61,
             "wan-2.2-t2v-a14b": WAN_2_2_T2V_A14B},
}


def _cases() -> list[tuple[str, str]]:
    return [(r, b) for r in known_rounds() for b in load_round(r).benchmark_names]


def test_the_table_covers_every_benchmark_of_every_round() -> None:
    assert {(r, b) for r in OFFICIAL for b in OFFICIAL[r]} == set(_cases())


@pytest.mark.parametrize(("round_name", "name"), _cases(), ids=[f"{r}-{b}" for r, b in _cases()])
def test_each_benchmark_matches_the_official_checkers_constants(round_name: str, name: str) -> None:
    bench, want = load_round(round_name).benchmark(name), OFFICIAL[round_name][name]
    samples, offline = want.mlperf_conf or (want.performance_samples, want.offline_min_samples)
    assert samples >= want.performance_samples and offline >= want.offline_min_samples
    assert (bench.dataset_size, bench.performance_sample_count, bench.accuracy_sample_count) == \
        (want.dataset, samples, want.accuracy_samples)
    assert bench.scenario("Offline").min_query_count == offline
    assert set(bench.required_scenarios) == set(want.required)
    demanded = {s for group in bench.one_of_scenarios for s in group}
    assert demanded == set(want.optional) & {"Server", "Interactive"}
    for rules in bench.scenarios:
        if rules.loadgen_scenario == "Server":
            limit = want.latency_ms.get(rules.name, want.latency_ms.get("Server"))
            assert rules.target_latency_max_ms == limit, rules.name
    assert bench.compliance_tests == want.compliance
    assert sorted(b.value for b in bench.accuracy.minimums) == pytest.approx(sorted(want.accuracy_minimums), abs=1e-6)
    assert sorted(b.value for b in bench.accuracy.maximums) == pytest.approx(sorted(want.accuracy_maximums), abs=1e-6)


def test_qwen3_vl_interactive_in_v6_1_is_the_endpoint_clients_with_its_own_accuracy_set() -> None:
    bench = load_round("v6.1").benchmark("qwen3-vl-235b-a22b")
    rules = bench.scenario("Interactive")
    assert rules.endpoints_only and rules.target_latency_ms == 1500
    assert bench.accuracy_samples_for("Interactive") == 8000 and bench.accuracy_samples_for("Offline") == 48289
    assert bench.accuracy_for("Interactive").minimum("f1") == pytest.approx(0.7878 * 0.99)
    assert "Interactive" not in bench.loadgen_scenario_names


@pytest.mark.parametrize("round_name", ["v6.0", "v6.1"])
def test_a_gpt_oss_120b_offline_user_conf_asks_for_the_official_query_size(round_name: str) -> None:
    conf = user_conf(load_round(round_name), "gpt-oss-120b", "Offline", target_qps=0.5)
    assert "gpt-oss-120b.Offline.min_query_count = 6396" in conf.text.splitlines()
    assert conf.compliant


def _offline_log(tmp_path: Path, samples_per_query: int) -> Path:
    src = DATA / "loadgen" / "compliant" / "offline-perf"
    run = tmp_path / f"spq-{samples_per_query}"
    run.mkdir()
    text = gzip.decompress((src / "mlperf_log_detail.txt.gz").read_bytes()).decode()
    old = '"key": "effective_samples_per_query", "value": 24576'
    assert old in text
    (run / "mlperf_log_detail.txt").write_text(
        text.replace(old, f'"key": "effective_samples_per_query", "value": {samples_per_query}'))
    shutil.copyfile(src / "mlperf_log_summary.txt", run / "mlperf_log_summary.txt")
    return run


@pytest.mark.parametrize("round_name", ["v6.0", "v6.1"])
def test_a_gpt_oss_120b_offline_query_below_6396_samples_is_caught(tmp_path: Path, round_name: str) -> None:
    """The lax hole: the checker fails a closed gpt-oss-120b Offline run whose query holds fewer than 6,396
    samples (a small system's target_qps x 600 s); cmx passed it while its round files lacked the minimum."""
    round_ = load_round(round_name)
    small = run_findings(read_loadgen_run(_offline_log(tmp_path, 6395)), round_, "gpt-oss-120b", True,
                         scenario="Offline")
    enough = run_findings(read_loadgen_run(_offline_log(tmp_path, 6396)), round_, "gpt-oss-120b", True,
                          scenario="Offline")
    caught = [f.text for f in small if f.rule == "loadgen.sample-count"]
    assert any("6395 samples" in t and "at least 6396" in t for t in caught), caught
    assert not [f for f in enough if f.rule == "loadgen.sample-count" and "Offline query" in f.text]
