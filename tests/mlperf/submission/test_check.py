"""`cmx check` (cmx.mlperf.submission.check): a compliant-shaped tree from recorded real LoadGen logs passes every rule,
and each perturbation of it is caught by the rule it breaks, with a message that says what and what to do."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from cmx.mlperf.submission.check import check_tree
from cmx.mlperf.submission.check.report import CSV_HEADER, format_report, summary_csv
from tests.conftest import DATA, REPO, Home
from tests.submission_trees import BENCHMARK, SUBMITTER, SYSTEM, build_tree, result_dir


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return build_tree(tmp_path / "submission")


def sub(root: Path) -> Path:
    return root / "closed" / SUBMITTER


def edit_json(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is ...:
            data.pop(key)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


def edit_log(path: Path, key: str, value: str) -> None:
    """Replace the value of one `:::MLLOG` entry, as a hand edit of the log would."""
    text = path.read_text()
    new, count = re.subn(rf'("key": "{re.escape(key)}", "value": )("[^"]*"|[^,]+)', rf"\g<1>{value}", text, count=1)
    assert count == 1, key
    path.write_text(new)


def perf(root: Path, scenario: str = "Offline") -> Path:
    return result_dir(root, scenario) / "performance" / "run_1"


def acc(root: Path, scenario: str = "Offline") -> Path:
    return result_dir(root, scenario) / "accuracy"


def system_json(root: Path) -> Path:
    return sub(root) / "systems" / f"{SYSTEM}.json"


def test_the_compliant_tree_passes_every_rule(tree: Path):
    report = check_tree(tree, "v6.0")
    assert report.problems == [], format_report(report)
    assert report.ok
    assert [(r.scenario, r.validity, r.compliant) for r in report.results] == [
        ("Interactive", "VALID", True), ("Offline", "VALID", True), ("Server", "VALID", True)]
    assert all(r.metric and r.metric > 0 for r in report.results)
    assert report.results[0].accuracy == {"ROUGE1": 44.4312, "ROUGE2": 22.0352, "ROUGEL": 28.6162,
                                          "TOKENS_PER_SAMPLE": 294.45}


def test_the_csv_has_the_official_columns_and_one_quoted_row_per_result(tree: Path):
    text = summary_csv(check_tree(tree, "v6.0"))
    assert text.splitlines()[0] == ",".join(CSV_HEADER)
    assert all(line.startswith('"') for line in text.splitlines()[1:])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["Scenario"] for r in rows] == ["Interactive", "Offline", "Server"]
    offline = rows[1]
    assert (offline["Organization"], offline["Division"], offline["Platform"], offline["Model"]) == \
        (SUBMITTER, "closed", SYSTEM, BENCHMARK)
    assert offline["total_accelerators"] == "8" and offline["Units"] == "Tokens/s"
    assert float(offline["Result"]) > 0 and offline["weight_data_types"] == "bf16"
    assert offline["Accuracy"] == "ROUGE1: 44.4312  ROUGE2: 22.0352  ROUGEL: 28.6162  TOKENS_PER_SAMPLE: 294.45"


def test_an_open_tree_needs_neither_test06_nor_calibration_nor_every_scenario(tmp_path: Path):
    root = build_tree(tmp_path / "s", division="open", scenarios=("Offline",))
    below = result_dir(root, "Offline", division="open") / "accuracy" / "accuracy.txt"
    below.write_text(below.read_text().replace("'rouge1': 44.4312", "'rouge1': 12.5"))
    report = check_tree(root, "v6.0")
    assert report.problems == [], format_report(report)


Mutation = Callable[[Path], None]


def _unlink(rel: Callable[[Path], Path]) -> Mutation:
    return lambda root: rel(root).unlink()


def _write(rel: Callable[[Path], Path], text: str | bytes) -> Mutation:
    def apply(root: Path) -> None:
        path = rel(root)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    return apply


def _replace(rel: Callable[[Path], Path], old: str, new: str) -> Mutation:
    def apply(root: Path) -> None:
        path = rel(root)
        text = path.read_text()
        assert old in text, old
        path.write_text(text.replace(old, new))
    return apply


def _invalid(root: Path) -> None:
    edit_log(perf(root) / "mlperf_log_detail.txt", "result_validity", '"INVALID"')
    _replace(lambda r: perf(r) / "mlperf_log_summary.txt", "Result is : VALID", "Result is : INVALID")(root)


def _error_line(root: Path) -> None:
    entry = {"key": "error_runtime", "value": "Loadgen found an error in the SUT's response", "time_ms": 1.0,
             "namespace": "mlperf::logging", "event_type": "POINT_IN_TIME",
             "metadata": {"is_error": True, "is_warning": False, "file": "loadgen.cc", "line_no": 1, "pid": 1,
                          "tid": 1}}
    with open(acc(root) / "mlperf_log_detail.txt", "a") as f:
        f.write(f":::MLLOG {json.dumps(entry)}\n")
    _replace(lambda r: acc(r) / "mlperf_log_summary.txt", "No errors encountered", "1 ERROR encountered")(root)


def _early_stopping_not_met(scenario: str) -> Mutation:
    """The single change the official checker rejects and a VALID-looking log can hide: early_stopping_met false."""
    def apply(root: Path) -> None:
        edit_log(perf(root, scenario) / "mlperf_log_detail.txt", "early_stopping_met", "false")
        _replace(lambda r: perf(r, scenario) / "mlperf_log_summary.txt", "Early stopping satisfied: Yes",
                 "Early stopping satisfied: NO")(root)
    return apply


def _server_logs_in_offline(root: Path) -> None:
    for name in ("mlperf_log_detail.txt", "mlperf_log_summary.txt"):
        shutil.copyfile(perf(root, "Server") / name, perf(root) / name)


def _move_division(root: Path, division: str, **system: object) -> Path:
    """The tree's one submitter moved from closed into `division`, its system description saying so."""
    moved = root / division / SUBMITTER
    moved.parent.mkdir()
    sub(root).rename(moved)
    (root / "closed").rmdir()
    edit_json(moved / "systems" / f"{SYSTEM}.json", division=division, **system)
    return moved


def _open_with_bad_model_mapping(root: Path) -> None:
    (_move_division(root, "open") / "model_mapping.json").write_text("{not json")


def _rename_benchmark(root: Path) -> None:
    folder = result_dir(root, "Offline").parent
    folder.rename(folder.with_name("llama2-70b"))


def _only_offline(root: Path) -> None:
    for scenario in ("Server", "Interactive"):
        shutil.rmtree(result_dir(root, scenario))


# (id, mutation, rule, path fragment, message fragment)
MUTATIONS: list[tuple[str, Mutation, str, str, str]] = [
    ("missing-file", _unlink(lambda r: perf(r) / "mlperf_log_summary.txt"), "layout.missing-file",
     "Offline/performance/run_1/mlperf_log_summary.txt", "missing"),
    ("empty-user-conf", _write(lambda r: result_dir(r, "Server") / "user.conf", ""), "layout.empty-file",
     "Server/user.conf", "empty"),
    ("wrong-seed", lambda r: edit_log(perf(r) / "mlperf_log_detail.txt", "effective_qsl_rng_seed",
                                      "1780908523862526354"), "loadgen.seeds", "Offline/performance/run_1",
     "not v6.0's"),
    ("invalid-result", _invalid, "loadgen.invalid", "Offline/performance/run_1", "INVALID"),
    ("error-line", _error_line, "loadgen.error", "Offline/accuracy/mlperf_log_detail.txt",
     "LoadGen logged an error"),
    ("min-duration-1000", lambda r: edit_log(perf(r, "Server") / "mlperf_log_detail.txt",
                                             "effective_min_duration_ms", "1000"),
     "loadgen.min-duration", "Server/performance/run_1", "min_duration was 1000 ms"),
    ("n-tokens-missing", lambda r: edit_log(perf(r) / "mlperf_log_detail.txt", "result_tokens_per_second", "0.0"),
     "loadgen.tokens", "Offline/performance/run_1", "0 tokens/s"),
    ("numpy-repr", _replace(lambda r: acc(r) / "accuracy.txt", "'rouge1': 44.4312", "'rouge1': np.float64(44.4312)"),
     "accuracy.unreadable", "Offline/accuracy/accuracy.txt", "np.float64"),
    ("missing-hash", lambda r: (acc(r) / "accuracy.txt").write_text(
        "\n".join(ln for ln in (acc(r) / "accuracy.txt").read_text().splitlines() if not ln.startswith("hash="))),
     "accuracy.hash", "Offline/accuracy/accuracy.txt", "no hash= line"),
    ("untruncated-json", _write(lambda r: acc(r) / "mlperf_log_accuracy.json", "[" + " " * 20000 + "]"),
     "accuracy.truncation", "Offline/accuracy/mlperf_log_accuracy.json", "not truncated"),
    ("missing-system-field", lambda r: edit_json(system_json(r), cooling=...), "system.field",
     f"systems/{SYSTEM}.json", "cooling: missing"),
    ("zero-not-string", lambda r: edit_json(system_json(r), accelerators_per_node=0), "system.field",
     f"systems/{SYSTEM}.json", "the number 0"),
    ("is-network-false", lambda r: edit_json(system_json(r), is_network="false"), "system.network",
     f"systems/{SYSTEM}.json", "is_network"),
    ("remote-endpoint-in-closed", lambda r: edit_json(system_json(r), sw_notes=(
        "SUT over HTTP: a remote OpenAI-compatible server (vLLM 0.32.0); LoadGen's SUT sends each sample to "
        "POST /v1/completions as token ids, token ids back from the server")), "system.endpoint",
     f"systems/{SYSTEM}.json", "another host"),
    ("division-mismatch", lambda r: edit_json(system_json(r), division="open"), "system.division",
     f"systems/{SYSTEM}.json", "division folder"),
    ("missing-test06-line", _replace(lambda r: result_dir(r, "Server") / "TEST06" / "verify_accuracy.txt",
                                     "EOS check pass: True\n", ""),
     "test06.check", "Server/TEST06/verify_accuracy.txt", "do not all pass"),
    ("interactive-ttft-500ms", lambda r: edit_log(perf(r, "Interactive") / "mlperf_log_detail.txt",
                                                  "result_first_token_99.00_percentile_latency_ns", "500000000"),
     "loadgen.latency-limit", "Interactive/performance/run_1", "over the v6.0 Interactive limit of 450 ms"),
    ("wrong-benchmark-folder", _rename_benchmark, "layout.benchmark", "results/box/llama2-70b",
     "did you mean 'llama2-70b-99'"),
    ("extra-folder-at-root", lambda r: (r / "extras").mkdir(), "layout.root", "extras", "not a division"),
    ("accuracy-below-target", _replace(lambda r: acc(r) / "accuracy.txt", "'rouge1': 44.4312", "'rouge1': 40.0"),
     "accuracy.target", "Offline/accuracy/accuracy.txt", "ROUGE-1 is 40.0, below the minimum"),
    ("missing-required-scenario", _only_offline, "scenarios.required", f"results/{SYSTEM}/{BENCHMARK}",
     "no Server or Interactive result"),
    ("missing-test06", lambda r: shutil.rmtree(result_dir(r, "Offline") / "TEST06"), "test06.missing",
     "Offline/TEST06", "no TEST06 folder"),
    ("empty-measurement", lambda r: edit_json(result_dir(r, "Offline") / "measurements.json", retraining=""),
     "measurements.field", "Offline/measurements.json", "retraining is empty"),
    ("no-src", lambda r: shutil.rmtree(sub(r) / "src"), "layout.src", "src", "no src/ folder"),
    ("no-calibration", lambda r: shutil.rmtree(sub(r) / "documentation"), "layout.calibration",
     "documentation/calibration.md", "missing"),
    ("file-at-root", _write(lambda r: r / "notes.txt", "x"), "layout.root", "notes.txt", "a file at the root"),
    ("hidden-file", _write(lambda r: sub(r) / "src" / ".DS_Store", "x"), "layout.hygiene", "src/.DS_Store",
     "hidden"),
    ("extra-accuracy-file", _write(lambda r: acc(r) / "notes.txt", "x"), "layout.file-list",
     "Offline/accuracy/notes.txt", "does not expect"),
    ("bad-status", lambda r: edit_json(system_json(r), status="released"), "system.status",
     f"systems/{SYSTEM}.json", "'released'"),
    ("orphan-system", _write(lambda r: sub(r) / "systems" / "other.json", "{}"), "system.orphan",
     "systems/other.json", "no results"),
    ("server-early-stopping", _early_stopping_not_met("Server"), "loadgen.early-stopping",
     "Server/performance/run_1", "early-stopping condition was not met"),
    ("interactive-early-stopping", _early_stopping_not_met("Interactive"), "loadgen.early-stopping",
     "Interactive/performance/run_1", "early-stopping condition was not met"),
    ("server-target-latency", lambda r: edit_log(perf(r, "Server") / "mlperf_log_detail.txt",
                                                 "effective_target_latency_ns", "30000000000"),
     "loadgen.latency-setting", "Server/performance/run_1", "target_latency was 30000 ms; the checker allows at "
                                                            "most 20000 ms"),
    ("test06-accuracy-log-lost", _unlink(lambda r: result_dir(r, "Offline") / "TEST06" / "accuracy" /
                                         "mlperf_log_accuracy.json"),
     "test06.missing", "Offline/TEST06/accuracy/mlperf_log_accuracy.json", "missing"),
    ("empty-results", lambda r: [shutil.rmtree(p) for p in (sub(r) / "results").iterdir()], "layout.no-results",
     "results", "no results"),
    ("equal-issue-off", lambda r: edit_log(perf(r, "Server") / "mlperf_log_detail.txt",
                                           "effective_sample_concatenate_permutation", "false"),
     "loadgen.equal-issue", "Server/performance/run_1", "equal-issue mode"),
    ("performance-sample-count", lambda r: edit_log(perf(r) / "mlperf_log_detail.txt",
                                                    "effective_performance_sample_count", "1024"),
     "loadgen.sample-count", "Offline/performance/run_1", "performance_sample_count was 1024"),
    ("token-latencies-off", lambda r: edit_log(perf(r) / "mlperf_log_detail.txt", "requested_use_token_latencies",
                                               "false"),
     "loadgen.tokens", "Offline/performance/run_1", "token latencies were off"),
    ("server-ttft-over-limit", lambda r: edit_log(perf(r, "Server") / "mlperf_log_detail.txt",
                                                  "result_first_token_99.00_percentile_latency_ns", "2500000000"),
     "loadgen.latency-limit", "Server/performance/run_1", "over the v6.0 Server limit of 2000 ms"),
    ("scenario-mismatch", _server_logs_in_offline, "loadgen.scenario", "Offline/performance/run_1",
     "the log's scenario is Server"),
    ("accuracy-not-all-samples", lambda r: edit_log(acc(r) / "mlperf_log_detail.txt",
                                                    "effective_accuracy_sample_count", "1000"),
     "accuracy.coverage", "Offline/accuracy", "covered 1000 samples"),
    ("missing-system-json", lambda r: system_json(r).unlink(), "system.missing-json", f"systems/{SYSTEM}.json",
     "missing"),
    ("bad-system-type", lambda r: edit_json(system_json(r), system_type="Datacenter"), "system.type",
     f"systems/{SYSTEM}.json", "'Datacenter'"),
    ("submitter-mismatch", lambda r: edit_json(system_json(r), submitter="someone-else"), "system.submitter",
     f"systems/{SYSTEM}.json", "submitter folder"),
    ("missing-measurements", lambda r: (result_dir(r, "Offline") / "measurements.json").unlink(),
     "measurements.missing", "Offline/measurements.json", "missing"),
    ("network-sut-name", lambda r: _move_division(r, "network", is_network="true"), "system.network",
     "performance/run_1", "a network SUT's name must contain 'Network SUT'"),
    ("network-without-is-network", lambda r: _move_division(r, "network"), "system.network", f"systems/{SYSTEM}.json",
     "is_network"),
    ("open-bad-model-mapping", _open_with_bad_model_mapping, "layout.model-mapping", "model_mapping.json",
     "not valid JSON"),
    ("lowercase-scenario", lambda r: result_dir(r, "Server").rename(result_dir(r, "Server").with_name("server")),
     "layout.scenario", f"{BENCHMARK}/server", "not a scenario"),
]


@pytest.mark.parametrize(("mutate", "rule", "where", "message"), [m[1:] for m in MUTATIONS],
                         ids=[m[0] for m in MUTATIONS])
def test_check_catches_each_perturbation_with_its_rule(tree: Path, mutate: Mutation, rule: str, where: str,
                                                       message: str):
    mutate(tree)
    report = check_tree(tree, "v6.0")
    assert not report.ok
    hits = [p for p in report.errors if p.rule == rule]
    assert hits, format_report(report)
    assert any(where in p.path and message in p.line() for p in hits), [p.line() for p in hits]
    assert all(p.fix for p in hits)  # every problem says what to do


def test_each_perturbation_breaks_only_its_own_rules(tree: Path):
    """The rules do not cascade: a wrong seed is a seed problem, not also an INVALID or a layout one."""
    edit_log(perf(tree) / "mlperf_log_detail.txt", "effective_qsl_rng_seed", "1780908523862526354")
    assert check_tree(tree, "v6.0").rules_broken() == {"loadgen.seeds"}


@pytest.mark.parametrize("scenario", ["Server", "Interactive"])
def test_early_stopping_not_met_is_the_only_problem_of_an_otherwise_passing_tree(tree: Path, scenario: str):
    _early_stopping_not_met(scenario)(tree)
    report = check_tree(tree, "v6.0")
    assert report.rules_broken() == {"loadgen.early-stopping"}
    assert "run longer" in report.errors[0].line() and "lower target_qps" in report.errors[0].line()


def test_a_real_server_log_that_misses_early_stopping_fails_with_loadgens_numbers(tree: Path):
    """tests/data/loadgen/early-stopping: real LoadGen, a few slow queries, every other flag of the run met."""
    data = DATA / "loadgen" / "early-stopping"
    for name in ("mlperf_log_detail.txt", "mlperf_log_summary.txt"):
        shutil.copyfile(data / name, perf(tree, "Server") / name)
    hits = [p.line() for p in check_tree(tree, "v6.0").errors if p.rule == "loadgen.early-stopping"]
    assert hits == [f"closed/{SUBMITTER}/results/{SYSTEM}/{BENCHMARK}/Server/performance/run_1/mlperf_log_detail.txt: "
                    "[loadgen.early-stopping] LoadGen's early-stopping condition was not met (TTFT: processed 592 "
                    "queries, would need at least 409 more with every one under the limit); the checker fails it "
                    "whatever else the log says: run longer (more queries tighten the estimate's bound; in Server "
                    "at the same target_qps, or at a lower target_qps so fewer queries go over the limits)"]


# --- hints that lead to the fix: what is missing first, and never "remove" what a rule requires ---------------

def _advises_removing(report, fragment: str) -> list[str]:
    return [p.line() for p in report.problems if fragment in p.path and "remove" in p.fix]


def test_a_missing_system_description_is_the_first_problem_and_its_folder_is_not_to_be_removed(tree: Path):
    system_json(tree).unlink()
    report = check_tree(tree, "v6.0")
    assert report.errors[0].rule == "system.missing-json", format_report(report)
    assert _advises_removing(report, "systems") == []
    empty = [p for p in report.errors if p.rule == "layout.hygiene"]
    assert [p.path for p in empty] == [f"closed/{SUBMITTER}/systems"]
    assert empty[0].found == "an empty folder, where the system descriptions (systems/<system>.json) should be"


def test_empty_results_say_no_results_were_found_and_where_they_belong(tree: Path):
    for folder in (sub(tree) / "results").iterdir():
        shutil.rmtree(folder)
    report = check_tree(tree, "v6.0")
    first = report.errors[0]
    assert (first.rule, first.found) == ("layout.no-results",
                                         "no results: it holds no <system>/<benchmark>/<scenario>/ folder")
    assert "results/<system>/<benchmark>/<scenario>/" in first.fix
    assert _advises_removing(report, "results") == [] and _advises_removing(report, "systems") == []
    assert "system.orphan" not in report.rules_broken()


def test_a_lost_test06_accuracy_log_is_to_be_restored_not_its_folder_removed(tree: Path):
    (result_dir(tree, "Offline") / "TEST06" / "accuracy" / "mlperf_log_accuracy.json").unlink()
    report = check_tree(tree, "v6.0")
    assert report.errors[0].rule == "test06.missing" and report.errors[0].path.endswith(
        "Offline/TEST06/accuracy/mlperf_log_accuracy.json")
    assert _advises_removing(report, "TEST06") == []
    # doing what the old hint said (removing the empty folder) must not make the tree pass
    (result_dir(tree, "Offline") / "TEST06" / "accuracy").rmdir()
    assert check_tree(tree, "v6.0").rules_broken() == {"test06.missing"}


def test_a_closed_tree_without_the_whole_test06_fails(tree: Path):
    shutil.rmtree(result_dir(tree, "Server") / "TEST06")
    report = check_tree(tree, "v6.0")
    assert report.rules_broken() == {"test06.missing"}
    assert [p.found for p in report.errors] == ["no TEST06 folder"]


def test_a_network_tree_with_a_boolean_is_network_is_reported_not_a_crash(tree: Path):
    edit_json(system_json(tree), is_network=True)
    found = [p.line() for p in check_tree(tree, "v6.0").errors if p.rule == "system.network"]
    assert found and "not a string" in found[0]


def test_the_v51_layout_keeps_measurements_and_compliance_in_their_own_folders(tree: Path):
    report = check_tree(tree, "v5.1")
    paths = {p.path for p in report.errors if p.rule in ("measurements.missing", "test06.missing")}
    assert f"closed/{SUBMITTER}/measurements/{SYSTEM}/{BENCHMARK}/Offline/{SYSTEM}_Offline.json" in paths
    assert any(p.startswith(f"closed/{SUBMITTER}/compliance/") for p in paths)
    assert "loadgen.seeds" in report.rules_broken()  # v6.0 logs are not v5.1's


def test_cmx_check_prints_the_table_and_problems_and_exits_1(home: Home, tree: Path, tmp_path: Path):
    ok = home.cmx("check", str(tree), "--round", "v6.0", "--csv", str(tmp_path / "summary.csv"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "PASS" in ok.stdout and "Offline" in ok.stdout
    assert (tmp_path / "summary.csv").read_text().startswith("Organization,Availability,Division")
    edit_json(system_json(tree), cooling="")
    bad = home.cmx("check", str(tree), "--round", "v6.0")
    assert bad.returncode == 1
    assert f"closed/{SUBMITTER}/systems/{SYSTEM}.json: [system.field] cooling: empty; put it in the system file" \
        in bad.stdout
    data = json.loads(home.cmx("check", str(tree), "--round", "v6.0", "--json").stdout)
    assert data["ok"] is False and data["problems"][0]["rule"] == "system.field"
    assert len(data["results"]) == 3


def test_cmx_check_judges_by_the_round_of_the_trees_logs_unless_told(home: Home, tree: Path):
    """The v6.0 tree (llama2-70b-99, v6.0's seeds) passes without --round, judged by v6.0's rules; under --round v6.1,
    which keeps llama2-70b-99.9 only, it is refused."""
    assert home.cmx("check", str(tree)).returncode == 0
    proc = home.cmx("check", str(tree), "--round", "v6.1")
    assert proc.returncode == 1
    assert f"[layout.benchmark] '{BENCHMARK}' is not a v6.1 benchmark; did you mean 'llama2-70b-99.9'?" in proc.stdout


def test_cmx_check_of_a_missing_folder_says_so(home: Home, tmp_path: Path):
    proc = home.cmx("check", str(tmp_path / "nowhere"))
    assert proc.returncode == 1
    assert "is not a folder" in proc.stdout


def test_expect_passes_only_when_exactly_the_listed_rules_break(home: Home, tree: Path):
    edit_log(perf(tree, "Server") / "mlperf_log_detail.txt", "effective_min_duration_ms", "1000")
    exact = home.cmx("check", str(tree), "--round", "v6.0", "--expect", "loadgen.min-duration")
    assert exact.returncode == 0, exact.stdout
    assert "[loadgen.min-duration]" in exact.stdout  # still reported
    assert "FAIL:" in exact.stdout and "AS EXPECTED: the tree breaks exactly loadgen.min-duration" in exact.stdout
    more = home.cmx("check", str(tree), "--round", "v6.0", "--expect", "loadgen.min-duration,accuracy.coverage")
    assert more.returncode == 1
    assert "does not break accuracy.coverage, which was expected" in more.stdout
    edit_json(system_json(tree), cooling="")
    other = home.cmx("check", str(tree), "--round", "v6.0", "--expect", "loadgen.min-duration", "--json")
    assert other.returncode == 1
    assert json.loads(other.stdout)["expectation"].startswith("NOT AS EXPECTED: the tree breaks system.field")


# --- the audit of the official checker, docs/submission.md ----------------------------------------------------

DOCS = REPO / "docs" / "submission.md"
# Every check of the official checker at mlcommons/inference b66003e (2026-08-20): each class's `self.checks` in
# tools/submission/submission_checker/checks/*.py, and what loader.py and main.py fail on. A newer checker's
# checks are added here and to the table together.
OFFICIAL_CHECKS = (
    *(f"PerformanceCheck.{c}" for c in (
        "missing_check", "scenarios_check", "loadgen_errors_check", "equal_issue_check",
        "performance_sample_count_check", "seeds_check", "latency_check", "min_query_count_check",
        "min_duration_check", "network_check", "llm_check", "inferred_check", "get_performance_metric_check",
        "endpoints_model_check")),
    *(f"AccuracyCheck.{c}" for c in ("accuracy_result_check", "accuracy_json_check", "loadgen_errors_check",
                                     "dataset_check", "extra_files_check", "endpoints_model_check")),
    *(f"SystemCheck.{c}" for c in ("missing_check", "availability_check", "system_type_check", "network_check",
                                   "required_fields_check", "submitter_check", "division_check",
                                   "nameplate_power_check")),
    *(f"MeasurementsCheck.{c}" for c in ("missing_check", "directory_exist_check", "required_files_check",
                                         "required_fields_check")),
    *(f"PowerCheck.{c}" for c in ("required_files_check", "external_power_check", "get_power_metric_check")),
    *(f"ComplianceCheck.{c}" for c in ("dir_exists_check", "performance_check", "accuracy_check",
                                       "compliance_performance_check", "compliance_endpoints_check")),
    "StructureCheck.sample_check",
    "loader.Loader.load (divisions)", "loader.Loader.load (system description)",
    "loader.Loader.load (model mapping)", "loader.Loader.check_scenarios", "main.main (NoResults)",
)


def _audit_rows() -> dict[str, tuple[list[str], str]]:
    """docs/submission.md's audit table: official check -> (cmx rule ids, or [] for not applicable; notes)."""
    text = DOCS.read_text(encoding="utf-8")
    table = text[text.index("<!-- audit:start -->"):text.index("<!-- audit:end -->")]
    rows: dict[str, tuple[list[str], str]] = {}
    for line in table.splitlines()[3:]:
        check, rules, notes = (cell.strip() for cell in line.strip().strip("|").split("|"))
        name = check.replace("`", "")
        assert name not in rows, f"{name} has two rows"
        rows[name] = ([] if rules == "not applicable" else re.findall(r"`([a-z0-9.-]+)`", rules), notes)
    return rows


def test_the_audit_table_has_a_row_for_every_official_check():
    assert list(_audit_rows()) == list(OFFICIAL_CHECKS)


def test_every_rule_the_audit_names_is_caught_by_a_perturbation_and_every_exception_says_why():
    from tests.mlperf.loadgen.test_test07_test09 import VERDICT_CASES  # the compliance folders of other benchmarks
    from tests.mlperf.submission.test_accuracy_files import CAUGHT  # a round's extra accuracy files (wan's videos)
    from tests.mlperf.submission.test_check_client import CASES  # the endpoint client's result folders

    caught = ({m[2] for m in MUTATIONS} | {case[3] for case in VERDICT_CASES if case[3]} | {c.rule for c in CASES}
              | set(CAUGHT))
    for check, (rules, notes) in _audit_rows().items():
        if not rules:
            assert notes, f"{check}: 'not applicable' needs a reason"
        missing = [r for r in rules if r not in caught]
        assert not missing, f"{check}: no perturbation in MUTATIONS is caught by {missing}"


def test_a_power_measurement_is_named_as_unchecked_not_passed_silently(tree: Path):
    power = perf(tree, "Server").parent / "power"
    power.mkdir()
    (power / "server.json").write_text("{}")
    report = check_tree(tree, "v6.0")
    assert report.ok  # a warning: cmx fails nothing it did not check
    assert [(p.rule, p.severity) for p in report.problems] == [("power.unchecked", "warning")]


def test_a_runs_results_folder_is_refused_with_how_to_package_it(tmp_path: Path) -> None:
    from cmx.mlperf.submission.check import NotASubmissionTree
    from tests.submission_trees import cmx_results

    results = cmx_results(tmp_path / "results")
    with pytest.raises(NotASubmissionTree, match="is the results folder of a run, not a submission tree") as err:
        check_tree(results, "v6.0")
    assert f'results_dir={results}' in (err.value.hint or "") and "cmx check SUBMISSION" in (err.value.hint or "")


def test_without_a_round_the_tree_is_judged_by_the_round_its_logs_were_run_for(tree: Path):
    from cmx import api
    from cmx.mlperf.rounds import latest_round
    from cmx.mlperf.submission.check import round_of_tree

    assert round_of_tree(tree) == "v6.0" != latest_round()  # the recorded logs carry v6.0's seeds
    assert api.check(tree).round == "v6.0" and api.check(tree).ok
    edit_log(perf(tree) / "mlperf_log_detail.txt", "effective_qsl_rng_seed", "1780908523862526354")
    for other in ("Server", "Interactive"):
        shutil.rmtree(result_dir(tree, other))
    assert round_of_tree(tree) is None  # seeds of no round: the newest judges (and has no llama2-70b-99)
    assert api.check(tree).round == latest_round()
    assert api.check(tree).rules_broken() == {"layout.benchmark"}
