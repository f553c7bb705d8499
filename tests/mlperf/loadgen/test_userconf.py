"""cmx.mlperf.loadgen.userconf: user.conf text LoadGen really reads, refused keys, and what breaks a round's rules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cmx.mlperf.loadgen.log import read_loadgen_run
from cmx.mlperf.loadgen.userconf import (
    TEST06_AUDIT,
    ShortProfile,
    UserConfError,
    audit_conf_test06,
    user_conf,
)
from cmx.mlperf.loadgen.userconf_check import noncompliant_keys, parse_user_conf
from cmx.mlperf.loadgen.userconf_keys import MLPERF_CONF_ONLY_KEYS
from cmx.mlperf.rounds import load_round
from tests.conftest import REPO, loadgen_env

V60 = load_round("v6.0")
TINY_SUT = REPO / "tests" / "data" / "loadgen" / "tiny_sut.py"
SAMPLE = Path("/work/shared/mlperf-sample/closed/AMD/results/8xMI300X_2xEPYC_9575F/llama2-70b-99")


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_official_offline_conf_is_target_qps_and_the_rounds_query_size_and_compliant() -> None:
    conf = user_conf(V60, "llama2-70b-99", "Offline", target_qps=12.5)
    assert _lines(conf.text) == ["llama2-70b.Offline.target_qps = 12.5", "llama2-70b.Offline.min_query_count = 24576"]
    assert conf.compliant and noncompliant_keys(conf.text, V60, "llama2-70b-99", "Offline") == []


def test_interactive_conf_is_written_for_the_interactive_model_as_a_server_run() -> None:
    conf = user_conf(V60, "llama2-70b-99", "Interactive", target_qps=29.5)
    assert (conf.model, conf.scenario) == ("llama2-70b-interactive", "Server")
    assert _lines(conf.text) == ["llama2-70b-interactive.Server.target_qps = 29.5"]


def test_mode_is_written_as_loadgens_number_only_when_asked() -> None:
    assert _lines(user_conf(V60, "llama2-70b-99", "Server", target_qps=1).text) == ["llama2-70b.Server.target_qps = 1"]
    conf = user_conf(V60, "llama2-70b-99", "Server", target_qps=1, mode="accuracy")
    assert "llama2-70b.Server.mode = 1" in _lines(conf.text)
    assert conf.compliant


def test_short_profile_says_loudly_that_it_is_not_compliant_and_why() -> None:
    conf = user_conf(V60, "llama2-70b-99", "Server", target_qps=300, short=ShortProfile())
    assert _lines(conf.text) == [
        "llama2-70b.Server.target_qps = 300",
        "llama2-70b.Server.min_duration = 2000",
        "llama2-70b.Server.min_query_count = 32",
        "llama2-70b.Server.max_query_count = 10000",
        "llama2-70b.Server.performance_sample_count_override = 32",
    ]
    assert not conf.compliant
    assert "# SHORT PROFILE: a smoke test, NOT a compliant run." in conf.text
    reasons = " | ".join(f.reason for f in conf.noncompliance)
    assert "min_duration = 2000 ms is below the v6.0 minimum of 600000 ms" in reasons
    assert "performance_sample_count_override = 32 is below 24576" in reasons
    assert "max_query_count = 10000 bounds the run" in reasons
    for finding in conf.noncompliance:
        assert f"#   - {finding.reason}" in conf.text


def test_short_offline_profile_misses_the_offline_sample_minimum() -> None:
    conf = user_conf(V60, "llama2-70b-99", "Offline", target_qps=100, short=ShortProfile())
    assert any("min_query_count = 32 is below the v6.0 minimum of 24576" in f.reason for f in conf.noncompliance)


def test_overrides_win_over_the_profile() -> None:
    conf = user_conf(V60, "llama2-70b-99", "Offline", target_qps=100, short=ShortProfile(),
                     overrides={"min_duration": 600000})
    assert "llama2-70b.Offline.min_duration = 600000" in _lines(conf.text)
    assert not any(f.key == "min_duration" for f in conf.noncompliance)


@pytest.mark.parametrize("key", sorted(MLPERF_CONF_ONLY_KEYS))
def test_keys_loadgen_takes_only_from_mlperf_conf_are_refused(key: str) -> None:
    with pytest.raises(UserConfError, match=r"only from its built-in mlperf.conf") as err:
        user_conf(V60, "llama2-70b-99", "Offline", target_qps=1, overrides={key: 1})
    assert "mlcommons-loadgen==6.0.15" in err.value.hint


def test_unknown_key_is_refused_with_a_suggestion() -> None:
    with pytest.raises(UserConfError, match="does not read 'min_duraton'") as err:
        user_conf(V60, "llama2-70b-99", "Offline", target_qps=1, overrides={"min_duraton": 5})
    assert err.value.hint == "did you mean 'min_duration'?"


def test_fractional_value_for_a_whole_number_key_is_refused() -> None:
    with pytest.raises(UserConfError, match="whole number"):
        user_conf(V60, "llama2-70b-99", "Server", target_qps=1, overrides={"ttft_latency": 0.5})


def test_key_without_effect_on_the_scenario_is_refused() -> None:
    with pytest.raises(UserConfError, match="no effect on a llama2-70b-99 Offline run"):
        user_conf(V60, "llama2-70b-99", "Offline", target_qps=1, overrides={"ttft_latency": 450})


def test_target_qps_is_required() -> None:
    with pytest.raises(UserConfError, match="target_qps is required"):
        user_conf(V60, "llama2-70b-99", "Offline")


def test_a_scenario_the_benchmark_lacks_is_refused() -> None:
    with pytest.raises(Exception, match="no scenario 'SingleStream'"):
        user_conf(V60, "llama2-70b-99", "SingleStream", target_qps=1)


def test_noncompliance_is_judged_on_what_loadgen_would_take() -> None:
    text = "\n".join([
        "*.*.min_duration = 1000",                   # overridden by the model's own line below
        "llama2-70b.*.min_duration = 600000",
        "llama2-70b.Server.min_duration = 1000",     # another scenario: not read for Offline
        "llama2-70b.Offline.min_query_count = 100",
        "llama2-70b.Offline.min_query_count = 24576",  # the last of equal keys wins
        "llama2-70b-interactive.*.performance_sample_count_override = 8",  # another model
    ])
    assert noncompliant_keys(text, V60, "llama2-70b-99", "Offline") == []
    server = noncompliant_keys(text, V60, "llama2-70b-99", "Server")
    assert [(f.key, f.line_no) for f in server] == [("min_duration", 3)]


def test_latency_keys_that_change_the_rounds_limits_are_noncompliant() -> None:
    text = "llama2-70b-interactive.Server.ttft_latency = 2000\nllama2-70b-interactive.Server.tpot_latency = 40\n"
    findings = noncompliant_keys(text, V60, "llama2-70b-99", "Interactive")
    assert [f.key for f in findings] == ["ttft_latency"]
    assert "TTFT limit of 450 ms" in findings[0].reason


def test_a_benchmark_judged_on_whole_answers_may_not_loosen_its_latency_or_turn_token_latencies_on() -> None:
    text = ("qwen3-vl-235b-a22b.Server.target_latency = 20000\nqwen3-vl-235b-a22b.Server.use_token_latencies = 1\n"
            "qwen3-vl-235b-a22b.Server.target_qps = 5\n")
    findings = noncompliant_keys(text, V60, "qwen3-vl-235b-a22b", "Server")
    assert [f.key for f in findings] == ["target_latency", "use_token_latencies"]
    assert "limit of 12000 ms" in findings[0].reason and "judged on whole answers (0)" in findings[1].reason
    assert noncompliant_keys("qwen3-vl-235b-a22b.Server.target_latency = 8000\n", V60, "qwen3-vl-235b-a22b",
                             "Server") == []  # a stricter target is the submitter's choice


def test_seed_lines_in_a_user_conf_are_reported_as_ignored() -> None:
    findings = noncompliant_keys("*.*.qsl_rng_seed = 1\n", V60, "llama2-70b-99", "Offline")
    assert len(findings) == 1 and "ignored in user.conf" in findings[0].reason


def test_lines_loadgen_never_reads_are_reported() -> None:
    text = ("llama2-70b-interactive.Interactive.target_qps = 5\n"
            "llama2-70b-interactive.Server.min_duraton = 600000\n"
            "llama2-70b.Server.target_qps = 3\n")  # another model: not this run's business
    findings = noncompliant_keys(text, V60, "llama2-70b-99", "Interactive")
    assert [(f.line_no, f.reason) for f in findings] == [
        (1, "LoadGen has no scenario 'Interactive' and never reads this line "
            "(Interactive runs read llama2-70b-interactive.Server.*)"),
        (2, "LoadGen does not read 'min_duraton' from user.conf (did you mean 'min_duration'?)"),
    ]


def test_lines_loadgen_rejects_are_reported() -> None:
    text = "llama2-70b.Offline.target_qps = 5 # fast\nllama2-70b.Offline.min_duration=600000\n#tight\n"
    parsed = parse_user_conf(text)
    assert [e.line_no for e in parsed.errors] == [1, 2, 3]
    assert all("rejects the whole file" in e.reason for e in parsed.errors)


def test_loadgen_number_syntax_is_honoured() -> None:
    parsed = parse_user_conf("llama2-70b.Offline.min_duration = 0x927C0\nllama2-70b.Offline.min_query_count = 010\n")
    assert parsed.errors == ()
    findings = noncompliant_keys("llama2-70b.Offline.min_query_count = 057777\n", V60, "llama2-70b-99", "Offline")
    assert "min_query_count = 24575 is below" in findings[0].reason  # octal, as strtoul reads it


def test_audit_conf_test06_has_the_compliance_folders_keys() -> None:
    text = audit_conf_test06()
    assert _lines(text) == [
        "*.*.mode = 2",
        "*.*.accuracy_log_rng_seed = 720381539243781796",
        "*.*.accuracy_log_sampling_target = 100",
        "*.*.min_query_count = 100",
        "*.*.min_duration = 0",
        "*.*.sample_concatenate_permutation = 0",
    ]
    assert parse_user_conf(text).errors == ()
    assert TEST06_AUDIT["accuracy_log_rng_seed"] == 720381539243781796


@pytest.mark.parametrize("scenario", ["Offline", "Server", "Interactive"])
def test_the_published_submissions_user_conf_is_compliant(scenario: str) -> None:
    path = SAMPLE / scenario / "user.conf"
    if not path.is_file():
        pytest.skip("the sample submission is not on this machine")
    assert noncompliant_keys(path.read_text(), load_round("v5.1"), "llama2-70b-99", scenario) == []


# --- LoadGen itself reads the files -----------------------------------------------------------

def _run_loadgen(out: Path, scenario: str, conf: Path, mode: str = "accuracy") -> subprocess.CompletedProcess:
    pytest.importorskip("mlperf_loadgen")
    argv = [sys.executable, str(TINY_SUT), "--out", str(out), "--scenario", scenario, "--mode", mode,
            "--user-conf", str(conf)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=out.parent, check=False,
                          env=loadgen_env("v6.0"))  # judged as v6.0's (its seeds), whichever LoadGen the venv holds
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.mark.e2e
def test_loadgen_takes_the_same_lines_as_the_parser(tmp_path: Path) -> None:
    conf = tmp_path / "user.conf"
    conf.write_text("\n".join([
        "*.*.min_duration = 1500",
        "llama2-70b.*.min_duration = 1200",
        "*.Offline.min_duration = 1100",
        "llama2-70b.Offline.min_query_count = 40",
        "llama2-70b.Offline.min_query_count = 48",
        "llama2-70b-interactive.Offline.target_qps = 999",
        "*.Offline.target_qps = 50",
        "llama2-70b.Server.performance_sample_count_override = 16",
        "llama2-70b.*.performance_sample_count_override = 32",
        "llama2-70b.Offline.qsl_rng_seed = 1",
    ]) + "\n")
    _run_loadgen(tmp_path / "out", "Offline", conf)
    settings = read_loadgen_run(tmp_path / "out").settings
    parsed = parse_user_conf(conf.read_text())
    expected = {key: float(parsed.lookup("llama2-70b", "Offline", key).raw)
                for key in ("min_duration", "min_query_count", "target_qps", "performance_sample_count_override")}
    assert expected == {"min_duration": 1100, "min_query_count": 48, "target_qps": 50,
                        "performance_sample_count_override": 32}
    assert (settings.min_duration_ms, settings.requested_min_query_count, settings.target_qps,
            settings.performance_sample_count) == (1100, 48, 50, 32)
    assert settings.seeds == V60.seeds  # the seed line was ignored, as the finding says
    assert [f.key for f in noncompliant_keys(conf.read_text(), V60, "llama2-70b-99", "Offline")
            if f.key == "qsl_rng_seed"] == ["qsl_rng_seed"]


@pytest.mark.e2e
def test_loadgen_reads_every_key_of_a_generated_short_interactive_conf(tmp_path: Path) -> None:
    conf = user_conf(V60, "llama2-70b-99", "Interactive", target_qps=250, mode="accuracy",
                     short=ShortProfile(min_duration_ms=1500, samples=16, min_query_count=20, max_query_count=5000),
                     overrides={"tpot_latency": 35}).write(tmp_path / "user.conf")
    _run_loadgen(tmp_path / "out", "Interactive", conf, mode="performance")
    run = read_loadgen_run(tmp_path / "out")
    s = run.settings
    assert run.mode == "AccuracyOnly"  # the file's mode key beat the harness's setting
    assert (s.scenario, s.target_qps, s.min_duration_ms, s.requested_min_query_count, s.max_query_count,
            s.performance_sample_count) == ("Server", 250, 1500, 20, 5000, 16)
    assert (s.ttft_latency_ns, s.tpot_latency_ns) == (450_000_000, 35_000_000)  # mlperf.conf, then user.conf
    assert run.errors == ()


@pytest.mark.e2e
def test_loadgen_rejects_the_lines_the_parser_rejects(tmp_path: Path) -> None:
    conf = tmp_path / "user.conf"
    conf.write_text("llama2-70b.Offline.target_qps = 50 # too many tokens\n")
    assert parse_user_conf(conf.read_text()).errors
    _run_loadgen(tmp_path / "out", "Offline", conf)
    errors = read_loadgen_run(tmp_path / "out").errors
    assert [e.key for e in errors] == ["error_invalid_config"]
    assert "value needs to be integer or double" in errors[0].value
