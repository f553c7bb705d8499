"""`cmx check` of a SingleStream result: the checker's result is LoadGen's early-stopping estimate of the 90th
percentile latency, in the unit the round gives (constants.py SPECIAL_UNIT_DICT: seconds for wan-2.2-t2v-a14b), and
early stopping is judged as for Server.

The tree is an open submission of one SingleStream result, its logs written by real LoadGen runs in this process
(tests/mlperf/single_stream.py) under a copy of cmx's rounds in which Qwen3-VL has a SingleStream scenario in s.
Those runs are short, so the tree breaks what a short run breaks in every division (SHORT) and nothing else.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from cmx.mlperf import rounds
from cmx.mlperf.benchmarks import benchmark_for
from cmx.mlperf.loadgen.log import read_loadgen_run
from cmx.mlperf.loadgen.userconf import user_conf
from cmx.mlperf.submission.check import check_tree
from cmx.mlperf.submission.check.report import format_report, summary_csv
from cmx.tools.fs import sha256_file
from tests.mlperf import single_stream
from tests.mlperf.single_stream import QWEN, OneAtATime, run_single_stream
from tests.submission_trees import MEASUREMENTS, SUBMITTER, SYSTEM, SYSTEM_JSON

# a short run's shortfalls: 100 ms, 16 samples set by hand (equal issue off), an accuracy run over 16 of them
SHORT = {"loadgen.min-duration", "loadgen.sample-count", "loadgen.equal-issue", "accuracy.coverage"}


@pytest.fixture
def use_rounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return single_stream.use_rounds(tmp_path, monkeypatch)


def single_stream_tree(root: Path, scratch: Path, **performance: int) -> Path:
    """open/<submitter>/results/box/qwen3-vl-235b-a22b/SingleStream with a performance and an accuracy run."""
    sub = root / "open" / SUBMITTER
    write(sub / "systems" / f"{SYSTEM}.json", json.dumps({**SYSTEM_JSON, "division": "open"}))
    write(sub / "src" / "README.md", "The harness: cmx.\n")
    folder = sub / "results" / SYSTEM / QWEN / "SingleStream"
    run_single_stream(folder / "performance" / "run_1", OneAtATime(), token_latencies=False, **performance)
    run_single_stream(scratch, OneAtATime(), mode="accuracy", token_latencies=False)
    (folder / "accuracy").mkdir()
    for name in ("mlperf_log_detail.txt", "mlperf_log_summary.txt", "mlperf_log_accuracy.json"):
        shutil.copyfile(scratch / name, folder / "accuracy" / name)
    log = folder / "accuracy" / "mlperf_log_accuracy.json"
    write(folder / "accuracy" / "accuracy.txt", benchmark_for(QWEN).format_accuracy_txt({"f1": 0.5}, sha256_file(log)))
    user_conf(rounds.load_round("v6.1"), QWEN, "SingleStream").write(folder / "user.conf")
    write(folder / "measurements.json", json.dumps(MEASUREMENTS))
    write(folder / "README.md", f"# {QWEN} SingleStream\n\nLoadGen logs of a test backend.\n")
    return folder


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_a_single_stream_result_is_its_early_stopping_latency_in_the_rounds_unit(tmp_path: Path, use_rounds: Path):
    folder = single_stream_tree(tmp_path / "tree", tmp_path / "scratch")
    report = check_tree(tmp_path / "tree", "v6.1")
    assert report.rules_broken() == SHORT, format_report(report)
    [row] = report.results
    ns = read_loadgen_run(folder / "performance" / "run_1").results.early_stopping_latency_ns
    assert ns and (row.scenario, row.validity, row.units, row.metric) == ("SingleStream", "VALID", "Latency (s)",
                                                                          ns / 1e9)
    assert f"{ns / 1e9:.4g} Latency (s)" in format_report(report)
    [line] = csv.DictReader(io.StringIO(summary_csv(report)))
    assert (line["Scenario"], line["Units"], float(line["Result"])) == ("SingleStream", "Latency (s)", ns / 1e9)


def test_a_single_stream_result_without_enough_queries_for_early_stopping_fails(tmp_path: Path, use_rounds: Path):
    single_stream_tree(tmp_path / "tree", tmp_path / "scratch", min_query_count=20, min_duration_ms=0)
    report = check_tree(tmp_path / "tree", "v6.1")
    assert report.rules_broken() == {*SHORT, "loadgen.early-stopping", "loadgen.invalid"}, format_report(report)
    assert any("an estimate needs at least 64" in p.line() for p in report.errors)
