"""cmx.mlperf.loadgen.log on real LoadGen logs: short runs of a tiny SUT, the saved logs, a published run."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cmx.mlperf.loadgen.log import (
    LoadgenLogError,
    LoadgenRun,
    parse_detail,
    parse_entries,
    read_loadgen_run,
)
from cmx.mlperf.rounds import load_round
from tests.conftest import REPO, loadgen_env

V60, V61, V51 = load_round("v6.0"), load_round("v6.1"), load_round("v5.1")
BENCH = "llama2-70b-99"
DATA = REPO / "tests" / "data" / "loadgen"
TINY_SUT = DATA / "tiny_sut.py"
SAMPLE = Path("/work/shared/mlperf-sample/closed/AMD/results/8xMI300X_2xEPYC_9575F/llama2-70b-99")

# One LoadGen test per process (FromConfig may run once per process). Each takes about two
# seconds of mostly sleeping, so they run side by side.
RUNS: dict[str, list[str]] = {
    "offline-perf": ["--scenario", "Offline", "--rate", "100"],
    "offline-accuracy": ["--scenario", "Offline", "--mode", "accuracy"],
    "server-perf": ["--scenario", "Server"],
    "server-accuracy": ["--scenario", "Server", "--mode", "accuracy"],
    # 16 tokens: a scheduling hiccup between the first and last token must then pass 16 x 40 ms
    # to break the 40 ms TPOT limit on a busy two-core machine
    "interactive-perf": ["--scenario", "Interactive", "--n-tokens", "16"],
    "ttft-over-limit": ["--scenario", "Server", "--first-token-ms", "5", "--override", "ttft_latency=1"],
    "slow-first-token": ["--scenario", "Server", "--first-token-ms", "460"],
    "offline-too-fast": ["--scenario", "Offline"],
    "one-token": ["--scenario", "Offline", "--mode", "accuracy", "--n-tokens", "1"],
    "no-n-tokens": ["--scenario", "Offline", "--rate", "100", "--n-tokens", "0"],
    "from-config-twice": ["--scenario", "Offline", "--mode", "accuracy", "--from-config-twice"],
    "test06": ["--scenario", "Offline", "--audit-test06"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, LoadgenRun]:
    pytest.importorskip("mlperf_loadgen")
    root = tmp_path_factory.mktemp("loadgen")
    env = loadgen_env("v6.0")  # the runs are judged as v6.0's: its LoadGen, whichever the venv holds

    def run(name: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, str(TINY_SUT), "--out", str(root / name), *RUNS[name]]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=root, check=False, env=env)

    with ThreadPoolExecutor(max_workers=4) as pool:
        done = dict(zip(RUNS, pool.map(run, RUNS), strict=True))
    for name, proc in done.items():
        assert proc.returncode == 0, f"{name}: {proc.stderr[-2000:]}"
    return {name: read_loadgen_run(root / name) for name in RUNS}


def _problems(run: LoadgenRun, compliant: bool = False, **kw: object) -> str:
    return "\n".join(run.problems(V60, BENCH, compliant, **kw))


# --- short runs of real LoadGen ---------------------------------------------------------------

@pytest.mark.e2e
@pytest.mark.parametrize("name", ["offline-perf", "server-perf", "interactive-perf"])
def test_short_runs_are_valid_with_the_v6_0_seeds_and_no_errors(runs: dict[str, LoadgenRun], name: str) -> None:
    run = runs[name]
    assert run.valid and run.results.validity == "VALID"
    assert run.loadgen_version == "6.0.15"
    assert run.settings.seeds == V60.seeds
    assert run.errors == ()
    assert run.problems(V60, BENCH, compliant=False) == []
    assert run.summary.result == "VALID" and run.summary.error_count == 0


@pytest.mark.e2e
@pytest.mark.parametrize("name", ["offline-accuracy", "server-accuracy"])
def test_accuracy_runs_have_no_verdict_and_no_errors(runs: dict[str, LoadgenRun], name: str) -> None:
    run = runs[name]
    assert run.mode == "AccuracyOnly" and run.results.validity is None
    assert run.errors == () and run.summary.error_count == 0
    assert run.problems(V60, BENCH, compliant=False) == []


@pytest.mark.e2e
def test_server_runs_carry_token_latencies(runs: dict[str, LoadgenRun]) -> None:
    run = runs["server-perf"]
    s, r = run.settings, run.results
    assert s.use_token_latencies and s.sample_concatenate_permutation
    assert (s.ttft_latency_ns, s.tpot_latency_ns) == (2_000_000_000, 200_000_000)
    assert r.tokens_per_second > 0 and r.samples_per_second > 0
    assert 0 < r.ttft.p50_ns <= r.ttft.p99_ns <= r.ttft.max_ns
    assert r.tpot.p99_ns is not None and r.latency.p99_ns >= r.ttft.p99_ns
    assert r.query_count >= 459  # enough for early stopping
    assert float(run.summary.get("Completed tokens per second")) == pytest.approx(r.tokens_per_second, rel=1e-3)


@pytest.mark.e2e
def test_offline_run_reports_samples_and_tokens_per_second(runs: dict[str, LoadgenRun]) -> None:
    run = runs["offline-perf"]
    r = run.results
    assert r.tokens_per_second == pytest.approx(3 * r.samples_per_second, rel=1e-3)  # 3 tokens a sample
    assert run.settings.samples_per_query == 220  # 1.1 x 2 s x 100 samples/s
    assert r.generated_samples_per_query == 224  # padded to a multiple of the 32 samples (equal issue)
    assert r.ttft is None


@pytest.mark.e2e
def test_the_compliant_view_lists_every_shortcut_of_the_short_profile(runs: dict[str, LoadgenRun]) -> None:
    text = _problems(runs["offline-perf"], compliant=True)
    assert "min_duration was 2000 ms; v6.0 llama2-70b-99 Offline needs at least 600000 ms" in text
    assert "the Offline query had 220 samples; v6.0 llama2-70b-99 Offline needs at least 24576" in text
    assert "performance_sample_count was 32" in text
    accuracy = _problems(runs["offline-accuracy"], compliant=True)
    assert accuracy == "the accuracy run covered 32 samples, not all 24576 of llama2-70b-99."


@pytest.mark.e2e
def test_ttft_over_the_runs_limit_is_explained(runs: dict[str, LoadgenRun]) -> None:
    run = runs["ttft-over-limit"]
    assert run.results.validity == "INVALID" and run.results.perf_constraints_met is False
    assert run.settings.ttft_latency_ns == 1_000_000
    text = _problems(run)
    assert "LoadGen marked the result INVALID: TTFT constrain not met" in text
    assert "TTFT p99 over limit:" in text and "> 1 ms (the run's ttft_latency)" in text
    assert "LoadGen's early-stopping condition was not met (TTFT: processed" in text
    assert "LoadGen judged the run against TTFT 1 ms / TPOT 200 ms" in _problems(run, compliant=True)


@pytest.mark.e2e
def test_an_offline_sut_faster_than_min_duration_is_explained(runs: dict[str, LoadgenRun]) -> None:
    run = runs["offline-too-fast"]
    assert run.results.validity == "INVALID" and run.results.min_duration_met is False
    assert "min duration not met: the run was shorter than min_duration = 2000 ms" in _problems(run)


@pytest.mark.e2e
def test_a_single_token_answer_is_an_error_line_per_sample(runs: dict[str, LoadgenRun]) -> None:
    run = runs["one-token"]
    assert {e.key for e in run.errors} == {"error_runtime"}
    assert len(run.errors) == 32 and run.summary.error_count == 32
    assert "LoadGen logged an error (32 times): \"Number of tokens need to be greater than 1\"" in _problems(run)


@pytest.mark.e2e
def test_missing_n_tokens_means_zero_tokens_per_second(runs: dict[str, LoadgenRun]) -> None:
    run = runs["no-n-tokens"]
    assert run.results.validity == "VALID" and run.results.tokens_per_second == 0
    text = _problems(run)
    assert "0 tokens/s: LoadGen counted no output tokens" in text
    assert "n_tokens argument missing" in text


@pytest.mark.e2e
def test_interactive_limits_are_checked_although_loadgen_passed_the_run(runs: dict[str, LoadgenRun]) -> None:
    run = runs["slow-first-token"]  # a Server run: LoadGen judged its 460 ms TTFT against 2000 ms
    assert run.valid
    assert run.problems(V60, BENCH, compliant=False) == []
    text = _problems(run, scenario="Interactive")
    assert text.startswith("TTFT p99 ") and "ms is over the v6.0 Interactive limit of 450 ms." in text


@pytest.mark.e2e
def test_an_interactive_run_is_recognised_by_its_latency_settings(runs: dict[str, LoadgenRun]) -> None:
    run = runs["interactive-perf"]
    assert (run.scenario, run.settings.ttft_latency_ns, run.settings.tpot_latency_ns) == \
        ("Server", 450_000_000, 40_000_000)
    assert "v6.0 llama2-70b-99 Interactive needs at least 600000 ms" in _problems(run, compliant=True)


@pytest.mark.e2e
def test_interactive_judged_with_the_server_model_is_flagged(runs: dict[str, LoadgenRun]) -> None:
    text = _problems(runs["server-perf"], compliant=True, scenario="Interactive")
    assert "LoadGen judged the run against TTFT 2000 ms / TPOT 200 ms, not v6.0 llama2-70b-99 Interactive's" in text
    assert "(llama2-70b-interactive)" in text


@pytest.mark.e2e
def test_a_second_from_config_call_is_caught(runs: dict[str, LoadgenRun]) -> None:
    run = runs["from-config-twice"]
    assert run.multiple_conf_files and [e.key for e in run.errors] == ["error_invalid_config"]
    assert "run each LoadGen test in a fresh process" in _problems(run)


@pytest.mark.e2e
def test_a_test06_audit_run_is_recognised(runs: dict[str, LoadgenRun]) -> None:
    run = runs["test06"]
    assert run.audit_config_used
    assert (run.settings.accuracy_log_sampling_target, run.settings.sample_concatenate_permutation) == (100, False)
    assert run.problems(V60, BENCH, compliant=True, compliance_test="TEST06") == []
    assert "found an audit.config" in _problems(run)
    assert "used no audit.config" in "\n".join(
        runs["offline-perf"].problems(V60, BENCH, compliant=False, compliance_test="TEST06"))


@pytest.mark.e2e
def test_seeds_of_another_round_are_named(runs: dict[str, LoadgenRun]) -> None:
    problems = runs["offline-perf"].problems(V61, "llama2-70b-99.9", compliant=False)
    assert problems == [("the RNG seeds (LoadGen 6.0.15) are those of v6.0, not v6.1's: a wrong seed fails the "
                         "check in every division; install mlcommons-loadgen==6.0.17.")]


# --- the saved logs ---------------------------------------------------------------------------

def test_saved_logs_still_say_what_their_names_say() -> None:
    offline, server = read_loadgen_run(DATA / "offline-perf"), read_loadgen_run(DATA / "server-perf")
    accuracy, invalid, error = (read_loadgen_run(DATA / n) for n in ("accuracy", "invalid", "error"))
    for run in (offline, server, accuracy, invalid, error):
        assert run.loadgen_version == "6.0.15" and run.settings.seeds == V60.seeds
        assert (DATA / run.path.parent.name / "user.conf").is_file()
    assert offline.valid and offline.scenario == "Offline" and not offline.errors
    assert server.valid and server.scenario == "Server" and server.results.ttft.p99_ns and not server.errors
    assert accuracy.mode == "AccuracyOnly" and not accuracy.errors
    assert invalid.results.validity == "INVALID" and invalid.results.perf_constraints_met is False
    assert error.mode == "AccuracyOnly" and len(error.errors) == 16
    short_runs = [p for p in DATA.rglob("*") if p.is_file() and p.name != "tiny_sut.py" and "compliant" not in p.parts]
    assert sum(p.stat().st_size for p in short_runs) < 250_000


def test_the_compliant_runs_say_what_their_readme_says() -> None:
    """tests/data/loadgen/compliant: 600 s, 24576 samples, the v6.0 seeds, VALID, no finding at all."""
    import gzip
    import shutil
    import tempfile

    compliant = DATA / "compliant"
    with tempfile.TemporaryDirectory() as tmp:
        for name, scenario in (("offline-perf", "Offline"), ("server-perf", "Server"),
                               ("interactive-perf", "Interactive"), ("accuracy-offline", "Offline")):
            folder = Path(tmp) / name
            folder.mkdir()
            with gzip.open(compliant / name / "mlperf_log_detail.txt.gz", "rb") as f, \
                    open(folder / "mlperf_log_detail.txt", "wb") as out:
                shutil.copyfileobj(f, out)
            shutil.copyfile(compliant / name / "mlperf_log_summary.txt", folder / "mlperf_log_summary.txt")
            run = read_loadgen_run(folder)
            assert run.loadgen_version == "6.0.15" and run.settings.seeds == V60.seeds
            assert run.findings(V60, BENCH, compliant=True, scenario=scenario) == [], name
            if run.is_performance:
                assert run.valid and run.settings.min_duration_ms == 600_000
                assert run.settings.performance_sample_count == 24576
    assert sum(p.stat().st_size for p in compliant.rglob("*") if p.is_file()) < 1_000_000


def test_a_server_run_that_fails_early_stopping_alone_says_so_with_loadgens_numbers() -> None:
    """tests/data/loadgen/early-stopping: a real run where only the early-stopping bound fails (a few slow queries)."""
    run = read_loadgen_run(DATA / "early-stopping")
    r = run.results
    assert r.validity == "INVALID" and r.early_stopping_met is False
    assert r.perf_constraints_met and r.min_duration_met and r.min_queries_met
    assert run.summary.early_stopping_met is False
    found = {f.rule: f.text for f in run.findings(V60, BENCH, compliant=False)}
    assert set(found) == {"loadgen.invalid", "loadgen.early-stopping"}
    assert found["loadgen.invalid"] == "LoadGen marked the result INVALID: early stopping not met."
    assert found["loadgen.early-stopping"] == (
        "LoadGen's early-stopping condition was not met (TTFT: processed 592 queries, would need at least 409 more "
        "with every one under the limit)")


def test_early_stopping_is_read_from_the_summary_when_the_detail_log_lacks_it(tmp_path: Path) -> None:
    detail = (DATA / "early-stopping" / "mlperf_log_detail.txt").read_text()
    (tmp_path / "mlperf_log_detail.txt").write_text(
        "".join(ln for ln in detail.splitlines(keepends=True) if '"key": "early_stopping_met"' not in ln))
    (tmp_path / "mlperf_log_detail.txt").with_name("mlperf_log_summary.txt").write_text(
        (DATA / "early-stopping" / "mlperf_log_summary.txt").read_text())
    run = read_loadgen_run(tmp_path)
    assert run.results.early_stopping_met is None
    assert "loadgen.early-stopping" in {f.rule for f in run.findings(V60, BENCH, compliant=False)}
    (tmp_path / "mlperf_log_summary.txt").unlink()
    texts = read_loadgen_run(tmp_path).problems(V60, BENCH, compliant=False)
    assert any("does not say whether LoadGen's early-stopping condition was met" in t for t in texts)


def test_offline_runs_are_not_judged_by_early_stopping() -> None:
    run = read_loadgen_run(DATA / "offline-perf")
    assert run.results.early_stopping_met is True or run.results.early_stopping_met is None
    assert "loadgen.early-stopping" not in {f.rule for f in run.findings(V60, BENCH, compliant=False)}


def test_a_detail_log_that_lost_its_error_lines_disagrees_with_its_summary(tmp_path: Path) -> None:
    folder = tmp_path / "error"
    folder.mkdir()
    detail = (DATA / "error" / "mlperf_log_detail.txt").read_text()
    (folder / "mlperf_log_detail.txt").write_text(
        "".join(line for line in detail.splitlines(keepends=True) if '"is_error": true' not in line))
    (folder / "mlperf_log_summary.txt").write_text((DATA / "error" / "mlperf_log_summary.txt").read_text())
    run = read_loadgen_run(folder)
    assert run.errors == ()
    assert run.problems(V60, BENCH, compliant=False) == [
        "the summary counts 16 errors but the detail log holds 0: the two logs are not from the same run, "
        "or one was cut."]


# --- parsing ----------------------------------------------------------------------------------

def test_cplusplus_inf_and_nan_values_are_read() -> None:
    line = (':::MLLOG {"key": "result_token_throughput", "value": inf, "time_ms": 1.0, "namespace": "mlperf::logging", '
            '"event_type": "POINT_IN_TIME", "metadata": {"is_error": false, "is_warning": false, "file": "results.cc", '
            '"line_no": 803, "pid": 1, "tid": 1}}\n')
    entries = parse_entries(line + line.replace("inf", "-nan"))
    assert entries[0].value == float("inf") and entries[1].value != entries[1].value


def test_a_file_without_mllog_lines_is_refused(tmp_path: Path) -> None:
    (tmp_path / "mlperf_log_detail.txt").write_text("hello\n")
    with pytest.raises(LoadgenLogError, match="not a LoadGen detail log"):
        read_loadgen_run(tmp_path)
    with pytest.raises(LoadgenLogError, match="no LoadGen detail log"):
        read_loadgen_run(tmp_path / "missing")
    with pytest.raises(LoadgenLogError, match="not JSON") as err:
        parse_detail(":::MLLOG {broken\n")
    assert err.value.where == "detail log:1"


# --- a published run --------------------------------------------------------------------------

def _sample(scenario: str, mode: str) -> LoadgenRun:
    folder = SAMPLE / scenario / ("performance/run_1" if mode == "performance" else "accuracy")
    if not folder.is_dir():
        pytest.skip("the sample submission is not on this machine")
    return read_loadgen_run(folder)


def test_a_published_offline_run_parses() -> None:
    run = _sample("Offline", "performance")
    assert (run.loadgen_version, run.scenario, run.mode, run.results.validity) == \
        ("5.1.0", "Offline", "PerformanceOnly", "VALID")
    assert (run.results.samples_per_second, run.results.tokens_per_second) == (92.1544, 27803.9)
    assert run.settings.samples_per_query == 245520 and run.results.generated_samples_per_query == 245760
    assert run.settings.seeds == V51.seeds and len(run.warnings) == 2 and run.errors == ()
    assert run.summary.get("Samples per second") == "92.1544" and run.summary.warning_count == 2


@pytest.mark.parametrize("scenario", ["Offline", "Server", "Interactive"])
@pytest.mark.parametrize("mode", ["performance", "accuracy"])
def test_a_published_run_is_compliant_for_its_own_round_only(scenario: str, mode: str) -> None:
    run = _sample(scenario, mode)
    assert run.problems(V51, BENCH, compliant=True) == []
    assert ["seeds" in p for p in run.problems(V60, BENCH, compliant=True)] == [True]


def test_published_interactive_latencies_are_read() -> None:
    run = _sample("Interactive", "performance")
    assert run.results.ttft.p99_ns == 435976100 and run.results.tpot.p99_ns == 39507635
    assert (run.settings.ttft_latency_ns, run.settings.tpot_latency_ns) == (450_000_000, 40_000_000)
    assert run.results.tokens_per_second == 8840.42
