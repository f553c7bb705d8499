"""`cmx check --round v6.1` on results of MLCommons' endpoint client ("Loadgen++"), against the official checker.

A hand-made passing tree (tests/client_trees.py) and single perturbations of it, each named after the rule
it breaks. Every case records what the official checker (mlcommons/inference tools/submission/
submission_checker at b66003e) says of it, `official`; cmx must say the same, and where it is stricter
(`stricter`: the rules ask what that checker does not look at) it fails a tree the official one passes, never
the other way round. `test_the_official_checker_gives_the_recorded_verdicts` re-runs the official checker on
every case where one is at hand (CMX_OFFICIAL_CHECKER=<mlcommons/inference>/tools/submission, or the checker
exported from a mirror of mlcommons/inference into a temporary folder); CI has neither and skips it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from cmx.mlperf.submission.check import check_tree
from cmx.mlperf.submission.check.report import format_report
from tests.client_trees import GPT_OSS, QWEN, RESULTS, add_client_result, build_client_tree, edit_yaml, scenario_dir
from tests.conftest import DATA
from tests.submission_trees import SUBMITTER, SYSTEM

Mutation = Callable[[Path], None]


@dataclass(frozen=True)
class Case:
    name: str
    mutate: Mutation
    official: bool           # does the official checker pass the tree
    rule: str | None = None  # the rule cmx reports (None: cmx passes it too)
    stricter: bool = False   # cmx fails what the official checker passes, because the rules say so
    round: str = "v6.1"


def cfg(bench: str, scenario: str) -> Callable[[Path], Path]:
    return lambda r: scenario_dir(r, bench, scenario) / "config.yaml"


def perf(bench: str, scenario: str) -> Callable[[Path], Path]:
    return lambda r: scenario_dir(r, bench, scenario) / "performance" / "result_summary.json"


def acc(bench: str, scenario: str) -> Callable[[Path], Path]:
    return lambda r: scenario_dir(r, bench, scenario) / "accuracy" / "accuracy_results.json"


def setting(file: Callable[[Path], Path], dotted: str, value: object) -> Mutation:
    return lambda r: edit_yaml(file(r), dotted, value)


def both(*mutations: Mutation) -> Mutation:
    def run(root: Path) -> None:
        for m in mutations:
            m(root)
    return run


def unlink(file: Callable[[Path], Path]) -> Mutation:
    return lambda r: file(r).unlink()


def write(file: Callable[[Path], Path], data: object) -> Mutation:
    def run(root: Path) -> None:
        path = file(root)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data if isinstance(data, str) else json.dumps(data))
    return run


def audit(bench: str, scenario: str, name: str) -> Callable[[Path], Path]:
    return lambda r: scenario_dir(r, bench, scenario) / "audit" / f"audit_{name}.json"


def rename_scenario(bench: str, old: str, new: str) -> Mutation:
    return lambda r: scenario_dir(r, bench, old).rename(scenario_dir(r, bench, new))


def to_open(root: Path) -> None:
    (root / "closed").rename(root / "open")
    edit_yaml(root / "open" / SUBMITTER / "systems" / f"{SYSTEM}.json", "division", "open")


def loadgen_log_in(bench: str, scenario: str) -> Mutation:
    """A LoadGen detail log beside the client's files: the folder is LoadGen's, and its other logs are missing."""
    def run(root: Path) -> None:
        run_1 = scenario_dir(root, bench, scenario) / "performance" / "run_1"
        run_1.mkdir(parents=True)
        import gzip
        src = DATA / "loadgen" / "compliant" / "offline-perf"
        (run_1 / "mlperf_log_detail.txt").write_bytes(gzip.decompress((src / "mlperf_log_detail.txt.gz").read_bytes()))
        shutil.copyfile(src / "mlperf_log_summary.txt", run_1 / "mlperf_log_summary.txt")
    return run


def llama2_client_results(root: Path) -> None:
    for scenario in ("Offline", "Server"):
        add_client_result(root, "llama2-70b-99.9", scenario, json.loads(json.dumps(RESULTS[(GPT_OSS, scenario)])))


MS = 1_000_000
ES99 = "early_stopping_percentiles/99.0"
CASES = [
    Case("the-passing-tree", lambda r: None, official=True),
    Case("client-report-extras", both(write(lambda r: scenario_dir(r, QWEN, "Offline") / "report.txt", "report\n"),
                                      write(lambda r: scenario_dir(r, QWEN, "Offline") / "events.jsonl", "{}\n")),
         official=True),
    Case("percentile-key-99", both(setting(perf(GPT_OSS, "Server"), "ttft/early_stopping_percentiles/99.0", ...),
                                   setting(perf(GPT_OSS, "Server"), "ttft/early_stopping_percentiles/99", 2500 * MS)),
         official=True),
    # seeds
    Case("seeds-dataloader", setting(cfg(QWEN, "Offline"), "settings/runtime/dataloader_random_seed", 42),
         official=False, rule="endpoints.seeds"),
    Case("seeds-scheduler", setting(cfg(GPT_OSS, "Server"), "settings/runtime/scheduler_random_seed", 42),
         official=False, rule="endpoints.seeds"),
    Case("seeds-v6.0", setting(cfg(GPT_OSS, "Offline"), "settings/runtime/scheduler_random_seed", 3936089224930324775),
         official=False, rule="endpoints.seeds"),
    # duration
    Case("min-duration-configured", setting(cfg(QWEN, "Offline"), "settings/runtime/min_duration_ms", 300000),
         official=False, rule="endpoints.min-duration"),
    Case("min-duration-absent", setting(cfg(GPT_OSS, "Server"), "settings/runtime/min_duration_ms", ...),
         official=False, rule="endpoints.min-duration"),
    Case("duration-measured-short", setting(perf(QWEN, "Interactive"), "duration_ns", 300_000_000_000),
         official=True, rule="endpoints.duration", stricter=True),
    # scenario and type
    Case("type-offline-in-server", setting(cfg(GPT_OSS, "Server"), "type", "offline"),
         official=False, rule="endpoints.scenario"),
    Case("type-online-in-offline", setting(cfg(GPT_OSS, "Offline"), "type", "online"),
         official=False, rule="endpoints.scenario"),
    Case("type-submission-in-offline", setting(cfg(QWEN, "Offline"), "type", "submission"),
         official=False, rule="endpoints.scenario"),
    Case("type-submission-in-interactive", setting(cfg(QWEN, "Interactive"), "type", "submission"), official=True),
    Case("type-offline-in-interactive", setting(cfg(QWEN, "Interactive"), "type", "offline"),
         official=True, rule="endpoints.scenario", stricter=True),
    Case("online-folder-for-server", rename_scenario(GPT_OSS, "Server", "Online"),
         official=False, rule="layout.scenario"),
    Case("no-server-or-interactive", lambda r: shutil.rmtree(scenario_dir(r, QWEN, "Interactive")),
         official=False, rule="scenarios.required"),
    # latency
    Case("ttft-at-the-limit", setting(perf(GPT_OSS, "Server"), f"ttft/{ES99}", 3000 * MS),
         official=False, rule="endpoints.latency-limit"),
    Case("tpot-over-the-limit", setting(perf(GPT_OSS, "Server"), f"tpot/{ES99}", 81 * MS),
         official=False, rule="endpoints.latency-limit"),
    Case("ttft-estimate-missing", setting(perf(GPT_OSS, "Server"), f"ttft/{ES99}", None),
         official=False, rule="endpoints.latency-limit"),
    Case("server-not-streamed", setting(perf(GPT_OSS, "Server"), "ttft", {}),
         official=False, rule="endpoints.latency-limit"),
    Case("qwen-interactive-at-1.5s", setting(perf(QWEN, "Interactive"), f"latency/{ES99}", 1500 * MS),
         official=True),
    Case("qwen-interactive-over-1.5s", setting(perf(QWEN, "Interactive"), f"latency/{ES99}", 1600 * MS),
         official=False, rule="endpoints.latency-limit"),
    Case("qwen-latency-estimate-missing", setting(perf(QWEN, "Interactive"), f"latency/{ES99}", None),
         official=False, rule="endpoints.latency-limit"),
    # completion (the official checker never reads n_samples_failed or state)
    Case("failed-samples", setting(perf(GPT_OSS, "Server"), "n_samples_failed", 5),
         official=True, rule="endpoints.incomplete", stricter=True),
    Case("interrupted", setting(perf(QWEN, "Offline"), "state", "interrupted"),
         official=True, rule="endpoints.incomplete", stricter=True),
    Case("offline-query-below-6396", both(setting(perf(GPT_OSS, "Offline"), "n_samples_issued", 6000),
                                          setting(perf(GPT_OSS, "Offline"), "n_samples_completed", 6000)),
         official=True, rule="endpoints.sample-count", stricter=True),
    # the result
    Case("offline-duration-absent", setting(perf(QWEN, "Offline"), "duration_ns", None),
         official=False, rule="endpoints.result"),
    Case("llm-server-tps-absent", setting(perf(GPT_OSS, "Server"), "tps", None),
         official=False, rule="endpoints.result"),
    # accuracy
    Case("qwen-accuracy-below-target", setting(acc(QWEN, "Offline"), "accuracy_scores/0/score", 0.78),
         official=False, rule="accuracy.target"),
    Case("qwen-interactive-own-target", setting(acc(QWEN, "Interactive"), "accuracy_scores/0/score", 0.7800),
         official=True),
    Case("qwen-score-as-a-dict", setting(acc(QWEN, "Offline"), "accuracy_scores/0/score",
                                         {"f1": 0.5, "f1_hierarchical": 0.79}), official=True),
    Case("qwen-score-as-a-dict-below", setting(acc(QWEN, "Offline"), "accuracy_scores/0/score",
                                               {"F1_HIERARCHICAL": 0.70, "f1": 0.9}),
         official=False, rule="accuracy.target"),
    Case("qwen-interactive-full-set", setting(acc(QWEN, "Interactive"), "accuracy_scores/0/total_samples", 48289),
         official=False, rule="accuracy.coverage"),
    Case("gpt-oss-accuracy-short", setting(acc(GPT_OSS, "Server"), "accuracy_scores/2/total_samples", 2090),
         official=False, rule="accuracy.coverage"),
    Case("no-score", both(*(setting(acc(GPT_OSS, "Offline"), f"accuracy_scores/{i}/score", None) for i in range(3))),
         official=False, rule="accuracy.unreadable"),
    Case("accuracy-results-missing", unlink(acc(QWEN, "Offline")), official=False, rule="layout.missing-file"),
    Case("result-summary-missing", unlink(perf(GPT_OSS, "Offline")), official=False, rule="layout.missing-file"),
    Case("result-summary-not-json", write(perf(GPT_OSS, "Offline"), "{not json"),
         official=False, rule="endpoints.unreadable"),
    Case("config-missing", unlink(cfg(QWEN, "Offline")), official=False, rule="layout.missing-file"),  # it crashes
    # compliance
    Case("test09-short-answers", setting(perf(GPT_OSS, "Offline"), "output_sequence_lengths/avg", 1100.0),
         official=False, rule="test09.check"),
    Case("test09-lengths-absent", setting(perf(GPT_OSS, "Server"), "output_sequence_lengths", {}),
         official=False, rule="test09.check"),
    Case("test07-audit-passed", write(audit(GPT_OSS, "Offline", "accuracy_in_performance_full_test"),
                                      {"test": "accuracy_in_performance_full_test", "passed": True}), official=True),
    Case("test07-audit-failed", write(audit(GPT_OSS, "Offline", "accuracy_in_performance_full_test"),
                                      {"test": "accuracy_in_performance_full_test", "passed": False}),
         official=False, rule="endpoints.audit"),
    Case("test07-audit-of-another-test", write(audit(GPT_OSS, "Offline", "accuracy_in_performance_full_test"),
                                               {"test": "output_caching_test", "passed": True}),
         official=False, rule="endpoints.audit"),
    # measurements
    Case("measurements-field-empty", lambda r: edit_yaml(scenario_dir(r, QWEN, "Offline") / "measurements.json",
                                                         "retraining", ""), official=False, rule="measurements.field"),
    Case("readme-missing", unlink(lambda r: scenario_dir(r, GPT_OSS, "Server") / "README.md"),
         official=False, rule="layout.missing-file"),
    Case("readme-empty", write(lambda r: scenario_dir(r, GPT_OSS, "Server") / "README.md", ""),
         official=False, rule="layout.empty-file"),
    Case("power-beside-client-results", write(lambda r: scenario_dir(r, QWEN, "Offline") / "performance" / "power" /
                                              "power.json", {}), official=False, rule="power.unchecked"),
    # the model, the round, the division, a mixed folder
    Case("llama2-from-the-client", llama2_client_results, official=False, rule="endpoints.model"),
    Case("client-results-in-v6.0", lambda r: None, official=False, rule="endpoints.model", round="v6.0"),
    Case("loadgen-log-beside-client-files", loadgen_log_in(GPT_OSS, "Offline"),
         official=False, rule="layout.missing-file"),
    Case("open-accuracy-below-target", both(to_open, lambda r: edit_yaml(
        r / "open" / SUBMITTER / "results" / SYSTEM / QWEN / "Offline" / "accuracy" / "accuracy_results.json",
        "accuracy_scores/0/score", 0.5)), official=True),
    Case("open-test09-short-answers", both(to_open, lambda r: edit_yaml(
        r / "open" / SUBMITTER / "results" / SYSTEM / GPT_OSS / "Offline" / "performance" / "result_summary.json",
        "output_sequence_lengths/avg", 1100.0)), official=False, rule="test09.check"),
    # precedence: the checker reads each field in the JSON first (its dotted name, then ENDPOINTS_JSON_ALT_PATHS's),
    # then in config.yaml (ENDPOINTS_YAML_FIELD_MAP's path, then the dotted name)
    Case("json-seed-before-yaml", setting(perf(QWEN, "Offline"), "effective_sample_index_rng_seed", 42),
         official=False, rule="endpoints.seeds"),
    Case("json-scenario-before-yaml", setting(perf(GPT_OSS, "Offline"), "effective_scenario", "online"),
         official=False, rule="endpoints.scenario"),
    Case("json-min-duration-before-yaml", setting(perf(GPT_OSS, "Server"), "min_duration_ms", 300000),
         official=False, rule="endpoints.min-duration"),
    Case("json-min-duration-over-a-short-yaml", both(
        setting(cfg(QWEN, "Offline"), "settings/runtime/min_duration_ms", 300000),
        setting(perf(QWEN, "Offline"), "min_duration_ms", 600000)), official=True),
    Case("yaml-dotted-seed-after-its-map", both(
        setting(cfg(QWEN, "Offline"), "settings/runtime/dataloader_random_seed", ...),
        setting(cfg(QWEN, "Offline"), "effective_sample_index_rng_seed", 2747215439041700203)), official=True),
    Case("json-issued-count-before-its-alt-path", setting(perf(QWEN, "Offline"), "generated_query_count", 0),
         official=False, rule="endpoints.result"),
    # failed samples: the accuracy run's fail the official checker (JSON, its alt path, then config.yaml)
    Case("accuracy-failed-samples", setting(acc(QWEN, "Offline"), "n_samples_failed", 3),
         official=False, rule="endpoints.incomplete"),
    Case("accuracy-failed-as-the-string-0", setting(acc(QWEN, "Offline"), "n_samples_failed", "0"),
         official=False, rule="endpoints.incomplete"),
    Case("accuracy-failed-dotted-before-alt", both(setting(acc(QWEN, "Offline"), "result", {"failed": 0}),
                                                   setting(acc(QWEN, "Offline"), "n_samples_failed", 3)),
         official=True),
    Case("yaml-result-failed", setting(cfg(QWEN, "Interactive"), "result", {"failed": 2}),
         official=False, rule="endpoints.incomplete"),
    # values: the checker compares them as written (a string is not a number) and int()s the accuracy counts
    Case("seed-as-a-string", setting(cfg(GPT_OSS, "Offline"), "settings/runtime/dataloader_random_seed",
                                     "2747215439041700203"), official=False, rule="endpoints.seeds"),
    Case("min-duration-as-a-string", setting(cfg(QWEN, "Offline"), "settings/runtime/min_duration_ms", "600000"),
         official=False, rule="endpoints.min-duration"),
    Case("ttft-as-a-string", setting(perf(GPT_OSS, "Server"), f"ttft/{ES99}", "2500000000"),
         official=False, rule="endpoints.latency-limit"),
    Case("ttft-as-the-string-nan", setting(perf(GPT_OSS, "Server"), f"ttft/{ES99}", "NaN"),
         official=False, rule="endpoints.latency-limit"),
    Case("test09-mean-as-a-string", setting(perf(GPT_OSS, "Offline"), "output_sequence_lengths/avg", "1278"),
         official=False, rule="test09.check"),
    Case("accuracy-count-as-a-string", setting(acc(QWEN, "Offline"), "accuracy_scores/0/total_samples", "48289"),
         official=True),
    Case("qps-as-a-numeric-string", setting(perf(QWEN, "Interactive"), "qps", "19.67"), official=True),
    Case("duration-infinite", write(perf(QWEN, "Offline"), '{"n_samples_issued": 48289, "duration_ns": 1e400}'),
         official=False, rule="endpoints.result"),
    Case("summary-nested-too-deep", write(perf(QWEN, "Offline"), "[" * 100_000 + "]" * 100_000),
         official=False, rule="endpoints.unreadable"),
    # non-finite numbers: some of the checker's comparisons let a NaN pass; cmx refuses them (its own rule)
    Case("qwen-latency-nan", write(perf(QWEN, "Interactive"), json.dumps(
        {**RESULTS[(QWEN, "Interactive")]["summary"], "latency": {"early_stopping_percentiles": {"99.0": "@"}}}
    ).replace('"@"', "NaN")), official=True, rule="endpoints.latency-limit", stricter=True),
    Case("min-duration-nan", write(perf(QWEN, "Offline"), json.dumps(
        {**RESULTS[(QWEN, "Offline")]["summary"], "min_duration_ms": "@"}).replace('"@"', "NaN")),
         official=True, rule="endpoints.min-duration", stricter=True),
    Case("qps-nan", write(perf(QWEN, "Interactive"), json.dumps(
        {**RESULTS[(QWEN, "Interactive")]["summary"], "qps": "@"}).replace('"@"', "NaN")),
         official=True, rule="endpoints.result", stricter=True),
    Case("qwen-score-nan", write(acc(QWEN, "Offline"), json.dumps(RESULTS[(QWEN, "Offline")]["accuracy"]).replace(
        '"score": 0.795', '"score": NaN')), official=True, rule="accuracy.unreadable", stricter=True),
]
IDS = [c.name for c in CASES]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return build_client_tree(tmp_path / "tree")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_each_perturbation_is_judged_as_the_official_checker_judges_it(tree: Path, case: Case) -> None:
    case.mutate(tree)
    report = check_tree(tree, case.round)
    if case.rule is None:
        assert report.ok, format_report(report)
        return
    assert not report.ok
    assert case.rule in report.rules_broken(), format_report(report)
    assert all(p.fix for p in report.errors)
    # cmx is never laxer than the official checker; it is stricter only where the case says the rules are
    assert case.official is case.stricter


def test_the_passing_tree_reports_each_result_as_the_client_made_it(tree: Path) -> None:
    report = check_tree(tree, "v6.1")
    rows = {(r.benchmark, r.scenario): r for r in report.results}
    assert set(rows) == set(RESULTS)
    assert all(r.harness == "endpoint-client" and r.validity == "VALID" and r.compliant for r in rows.values())
    offline, server = rows[(GPT_OSS, "Offline")], rows[(GPT_OSS, "Server")]
    assert (offline.units, round(offline.metric or 0)) == ("Tokens/s", round(12792 * 1278 / 655))
    assert (server.units, round(server.metric or 0)) == ("Tokens/s", round(5800 * 1278 / 612))
    interactive = rows[(QWEN, "Interactive")]
    assert (interactive.units, interactive.accuracy) == ("Queries/s", {"f1": 0.79})


def test_a_failed_performance_rule_makes_the_row_invalid(tree: Path) -> None:
    edit_yaml(perf(GPT_OSS, "Server")(tree), "n_samples_failed", 3)
    row = next(r for r in check_tree(tree, "v6.1").results if (r.benchmark, r.scenario) == (GPT_OSS, "Server"))
    assert row.validity == "INVALID" and not row.compliant


MIRROR = Path("/work/.mirror/mlcommons+inference/repo")  # a bare clone of mlcommons/inference, where one is at hand
CHECKER = "tools/submission/submission_checker"


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mlcommons/inference's tools/submission: CMX_OFFICIAL_CHECKER, else the checker at the mirror's HEAD exported
    into a temporary folder (never into cmx)."""
    given = os.environ.get("CMX_OFFICIAL_CHECKER")
    if given:
        return Path(given)
    if not (MIRROR / "HEAD").is_file():
        pytest.skip(f"no official checker: set CMX_OFFICIAL_CHECKER or have a mirror at {MIRROR}")
    dest = tmp_path_factory.mktemp("official")
    archive = subprocess.run(["git", "-C", str(MIRROR), "archive", "HEAD", CHECKER], capture_output=True, timeout=60)
    if archive.returncode != 0:
        pytest.skip(f"git archive of {CHECKER} failed: {archive.stderr.decode()[-300:]}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True, timeout=60)
    return dest / "tools" / "submission"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_official_checker_gives_the_recorded_verdicts(tree: Path, case: Case, official: Path) -> None:
    case.mutate(tree)
    run = subprocess.run([sys.executable, "-m", "submission_checker.main", "--input", str(tree), "--version",
                          case.round, "--csv", str(tree.parent / "official.csv")], cwd=official, capture_output=True,
                         text=True, timeout=120)
    assert (run.returncode == 0) is case.official, run.stderr[-3000:]


HOSTILE = {"nan": "NaN", "nan-string": '"NaN"', "huge": "1e400", "huge-int": "1" + "0" * 5000,
           "deep": "[" * 100_000 + "]" * 100_000, "long-string": '"' + "x" * 1_000_000 + '"'}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_value_in_each_client_file_is_a_finding_with_exit_1(tree: Path, name: str) -> None:
    """NaN, "NaN", 1e400, a 5,000-digit integer, a 100,000-deep array or a megabyte string, put in every field the
    checker reads of result_summary.json and accuracy_results.json: one line each, exit 1, no internal error, and
    no value echoed whole."""
    value = HOSTILE[name]
    for scenario in ("Offline", "Interactive"):
        folder = scenario_dir(tree, QWEN, scenario)
        for path in (folder / "performance" / "result_summary.json", folder / "accuracy" / "accuracy_results.json"):
            data = json.loads(path.read_text())
            scores = [{**e, "score": "@", "total_samples": "@"} for e in data["accuracy_scores"]] \
                if "accuracy_scores" in data else None
            marked = {key: "@" for key in data} if scores is None else {**data, "accuracy_scores": scores}
            path.write_text(json.dumps(marked).replace('"@"', value))
    write(lambda r: scenario_dir(r, GPT_OSS, "Server") / "performance" / "result_summary.json", value)(tree)
    run = subprocess.run([sys.executable, "-m", "cmx", "check", str(tree), "--round", "v6.1"], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1, run.stderr[-2000:]
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr.lower()
    assert len(run.stdout) + len(run.stderr) < 20_000
    assert all(len(line) < 1000 for line in run.stdout.splitlines())
    assert "[endpoints." in run.stdout


def test_a_client_file_over_the_size_limit_is_refused_unread(tree: Path) -> None:
    from cmx.mlperf.endpoints.results import MAX_FILE_BYTES
    path = perf(QWEN, "Offline")(tree)
    with path.open("w") as f:
        f.write('{"pad": "' + "x" * (MAX_FILE_BYTES + 1) + '"}')
    report = check_tree(tree, "v6.1")
    found = [p for p in report.errors if p.rule == "endpoints.unreadable"]
    assert found and "over cmx's 16 MiB limit" in found[0].found and len(found[0].line()) < 500


def test_a_client_file_or_folder_linked_out_of_the_tree_is_not_read(tree: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    config = cfg(QWEN, "Offline")(tree)
    (outside / "config.yaml").write_text(config.read_text())  # a passing config: only the link can fail it
    config.unlink()
    config.symlink_to(outside / "config.yaml")
    performance = perf(GPT_OSS, "Server")(tree).parent
    shutil.move(performance, outside / "performance")
    performance.symlink_to(outside / "performance")
    report = check_tree(tree, "v6.1")
    unread = {p.path: p.found for p in report.errors if p.rule == "endpoints.unreadable"}
    config_at, summary_at = (str(f.relative_to(tree)) for f in (config, perf(GPT_OSS, "Server")(tree)))
    assert "cmx reads no file through a link" in unread[config_at]
    assert "cmx reads no file through a link" in unread[summary_at]
    links = {p.path for p in report.errors if p.rule == "layout.link"}
    assert {config_at, str(performance.relative_to(tree))} <= links


def test_the_docs_table_names_exactly_the_rules_the_cases_catch() -> None:
    import re

    from tests.conftest import REPO

    text = (REPO / "docs" / "submission.md").read_text(encoding="utf-8")
    table = text[text.index("<!-- client-rules:start -->"):text.index("<!-- client-rules:end -->")]
    named = {rule for line in table.splitlines()[3:] for rule in re.findall(r"`([a-z0-9.-]+)`", line.split("|")[1])}
    assert named == {c.rule for c in CASES if c.rule}
